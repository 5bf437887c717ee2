"""``/image/v2``: the image service's subset Stratus serves (Glance v2's URLs and bodies).

Enough for ``openstack image create --file F --disk-format raw NAME``, ``image list/show/delete``,
``image save`` and ``server create --image NAME``: create (queued), upload (active), download,
list (filters ``name``, ``status``, ``visibility``, ``owner``; ``limit``/``marker``), show and
delete. Metadata is event-sourced (``commands.image``); the data goes to the image store
(``stratus.imagestore``) and the log records its size, MD5 ``checksum`` and SHA-256
``os_hash_value``. Shows read the image from the log (a client that just created it sees it at
once); lists read the read model.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import falcon
import orjson
from jsonschema import Draft202012Validator

from api import auth
from api.body import read_json
from api.errors import (
    BadRequest,
    Forbidden,
    ItemNotFound,
    PayloadTooLarge,
    ServiceUnavailable,
    UnsupportedMediaType,
)
from api.image import patch as image_patch
from api.links import page_params, query_string
from api.readmodel import POSITION_HEADER, ReadModel
from api.timestamps import isotime
from commands.bus import MessageBus
from commands.errors import NotFound, QuotaExceeded
from commands.image import ACTIVE, DEACTIVATED, Image, canonical_image_id
from commands.image_usage import ImageLimits
from commands.images.create import CreateImage, DeleteImage, RecordImageUpload, image_usage, visible_image
from projections import image_queries
from projections.image_queries import ListedImage
from projections.queries import decode_json
from stratus.context import Actor, acting
from stratus.eventstore.errors import EventStoreUnavailable
from stratus.imagestore import CHUNK, ImageStore, StoreError, TooLarge

IMAGE_ROOT = "/image"
API = "/v2"
BASE_PROPERTIES = (
    "id", "name", "visibility", "container_format", "disk_format", "min_disk", "min_ram", "protected", "tags",
    "owner", "os_hidden",
)  # fmt: skip
DEFAULT_LIMIT = 25  # Glance's limit_param_default
MAX_LIMIT = 1000  # Glance's api_limit_max
HASH_ALGO = "sha256"
_SCHEMA = f"{API}/schemas/image"


def row_of(image: Image) -> ListedImage:
    """An image aggregate as a listed row (``image_queries.list_images``: times as text), so that one
    view serves both; its tags and properties as they are (a listed row's are their JSON)."""
    return ListedImage(
        id=str(image.image_id),
        name=image.name,
        owner=image.owner,
        visibility=image.visibility,
        status=image.status,
        container_format=image.container_format,
        disk_format=image.disk_format,
        min_disk=image.min_disk,
        min_ram=image.min_ram,
        protected=image.protected,
        tags=image.tags,
        properties=image.properties,
        os_hidden=image.os_hidden,
        size=image.size,
        checksum=image.checksum,
        os_hash_algo=image.os_hash_algo,
        os_hash_value=image.os_hash_value,
        created_at=isotime(image.created_on),
        updated_at=isotime(image.modified_on),
    )


def image_view(row: Any) -> dict[str, Any]:
    """Glance v2's image (a listed row, plain or named, or ``row_of``'s: ``ListedImage``'s values,
    unpacked by position): the additional properties, then the base ones at the top level (where a
    base property's name is also an additional one's, the base value in the additional one's place,
    as ``{**properties, **base}`` gives). The base ones are set one by one onto the decoded
    properties: a display of them merged into the properties cost a row ~0.5 us more."""
    (
        iid, name, owner, visibility, status, container_format, disk_format, min_disk, min_ram, protected,
        tags, properties, os_hidden, size, checksum, os_hash_algo, os_hash_value, created_at, updated_at,
    ) = row  # fmt: skip
    if tags.__class__ is str:  # a listed row's JSON: decode_json's, inline (a call less a row)
        try:
            tags = orjson.loads(tags)
        except orjson.JSONDecodeError:
            tags = decode_json(tags)
    if properties.__class__ is str:
        try:
            view = orjson.loads(properties) or {}  # JSON's null: none
        except orjson.JSONDecodeError:  # a number beyond 64 bits
            view = decode_json(properties)
    else:  # an aggregate's: not to be changed
        view = dict(properties or ())
    view["id"] = iid
    view["name"] = name
    view["status"] = status
    view["visibility"] = visibility
    view["protected"] = protected
    view["os_hidden"] = bool(os_hidden)
    view["checksum"] = checksum
    view["os_hash_algo"] = os_hash_algo
    view["os_hash_value"] = os_hash_value
    view["owner"] = owner
    view["size"] = size
    view["virtual_size"] = None
    view["min_ram"] = min_ram
    view["min_disk"] = min_disk
    view["disk_format"] = disk_format
    view["container_format"] = container_format
    view["created_at"] = created_at
    view["updated_at"] = updated_at
    view["tags"] = tags if tags.__class__ is list else list(tags or ())
    view["self"] = f"{API}/images/{iid}"
    view["file"] = f"{API}/images/{iid}/file"
    view["schema"] = _SCHEMA
    return view


def member_key(project_id: str) -> str:
    """Whose reads wait for a change of the project's memberships (``ReadModel.note``)."""
    return f"image-members:{project_id}"


# Every project's image list waits for a change of an image every project may see (or a deletion).
EVERYONES = "images:everyone"
_EVERYONES = ("public", "community")


def _scope(actor: Actor) -> str | None:
    """The project whose view of images applies (None: an admin, who sees every image)."""
    return None if auth.is_admin(actor) else actor.project_id


class Versions:
    """``GET /image``: Glance answers its version list with 300 Multiple Choices, to anyone."""

    public = frozenset({"GET", "HEAD"})

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        href = f"{req.prefix}{IMAGE_ROOT}{API}/"
        resp.status = falcon.HTTP_300
        resp.media = {
            "versions": [
                {"id": "v2.9", "status": "CURRENT", "links": [{"rel": "self", "href": href}]},
            ]
        }


class _Images:
    def __init__(
        self,
        bus: MessageBus,
        read_model: ReadModel,
        store: ImageStore,
        validators: dict[str, Draft202012Validator],
        max_body_bytes: int,
    ) -> None:
        self._bus = bus
        self._read = read_model
        self._store = store
        self._create_validator = validators["images.create"]
        self._max_body = max_body_bytes
        self._image_limits: ImageLimits = bus.dependencies["image_limits"]


class ImageCollection(_Images):
    """``GET``/``POST /image/v2/images``: list and create Glance images."""

    read_beside_check = auth.READ_BESIDE_CHECK  # a list: read beside its token's check

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _no_empty_id(req)
        actor: Actor = req.context.actor
        limit, marker = page_params(req, MAX_LIMIT)
        if req.get_param("limit") is None:
            limit = DEFAULT_LIMIT
        visibility = req.get_param("visibility")
        if visibility is not None and visibility not in ("public", "private", "shared", "community", "all"):
            raise BadRequest(f"Invalid visibility value: {visibility[:64]}")
        member_status = req.get_param("member_status") or "accepted"
        if member_status not in ("pending", "accepted", "rejected", "all"):
            raise BadRequest(f"Invalid status: {member_status[:64]}")
        hidden = (req.get_param("os_hidden") or "false").lower()
        if hidden not in ("true", "false"):
            raise BadRequest(f"Invalid value for os_hidden: {hidden[:64]}")
        with self._read.connection(req, concerning=(member_key(actor.project_id), EVERYONES)) as conn:
            rows = image_queries.list_images(
                conn,
                project_id=_scope(actor),
                limit=limit,
                marker=marker,
                name=req.get_param("name"),
                status=req.get_param("status"),
                visibility=None if visibility == "all" else visibility,
                owner=req.get_param("owner"),
                member_status=member_status,
                os_hidden=hidden == "true",
                tags=tuple(req.get_param_as_list("tag") or ()),
                plain=True,
            )
        body: dict[str, Any] = {
            "images": [image_view(r) for r in rows],
            "first": f"{API}/images",
            "schema": f"{API}/schemas/images",
        }
        if limit and len(rows) == limit:
            params = {k: v for k, v in req.params.items() if k != "marker"}
            params["marker"] = rows[-1][0]  # its id
            body["next"] = f"{API}/images?{query_string(params)}"
        resp.media = body

    def on_delete(self, req: falcon.Request, resp: falcon.Response) -> None:
        """``DELETE /v2/images/`` names no image: Glance has no such route (404, not 405)."""
        raise ItemNotFound("The resource could not be found.")

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        actor: Actor = req.context.actor
        body = read_json(req, self._create_validator, self._max_body)
        visibility = body.get("visibility", "shared")
        admin = auth.is_admin(actor)
        if visibility == "public" and not admin:
            raise Forbidden("You are not authorized to complete publicize_image action.")
        owner = body.get("owner") or actor.project_id
        if owner != actor.project_id and not admin:  # Glance's add_image: project_id:%(owner)s
            raise Forbidden("You are not authorized to complete add_image action.")
        properties = {k: v for k, v in body.items() if k not in BASE_PROPERTIES}
        for ref in ("kernel_id", "ramdisk_id"):
            if properties.get(ref) is None:
                properties.pop(ref, None)
        command = CreateImage(
            owner=owner,
            name=body.get("name"),
            image_id=_chosen_id(body["id"]) if "id" in body else None,
            visibility=visibility,
            container_format=body.get("container_format"),
            disk_format=body.get("disk_format"),
            min_disk=body.get("min_disk", 0),
            min_ram=body.get("min_ram", 0),
            protected=body.get("protected", False),
            tags=tuple(body.get("tags", ())),
            properties=properties,
            os_hidden=body.get("os_hidden", False),
        )
        try:
            with acting(req.context.command):
                result = self._bus.handle(command)
        except QuotaExceeded as e:
            raise PayloadTooLarge(e.message) from None  # Glance: 413 for a limit reached
        image = visible_image(self._bus.uow, result.id, None)
        if visibility in _EVERYONES:
            self._read.note(EVERYONES, result.position)
        resp.status = falcon.HTTP_201
        resp.set_header(POSITION_HEADER, str(result.position))
        resp.location = f"{req.prefix}{IMAGE_ROOT}{API}/images/{result.id}"
        resp.media = image_view(row_of(image))


class ImageItem(_Images):
    """``GET``/``PATCH``/``DELETE /image/v2/images/{id}``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
        image = visible_image(self._bus.uow, image_id, _scope(req.context.actor))
        resp.media = image_view(row_of(image))

    def on_patch(self, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
        """Glance's JSON patch (``api.image.patch``); answers the image as it now is."""
        actor: Actor = req.context.actor
        scope = _scope(actor)
        image = visible_image(self._bus.uow, image_id, scope)
        image.ensure_owned_by(scope)
        changes = image_patch.parse(req, self._max_body, self._create_validator)
        command = image_patch.resolve(image, changes, admin=scope is None, project_id=scope)
        with acting(req.context.command):
            result = self._bus.handle(command)
        if image.visibility in _EVERYONES or command.fields.get("visibility") in _EVERYONES:
            self._read.note(EVERYONES, result.position)
        resp.set_header(POSITION_HEADER, str(result.position))
        resp.media = image_view(row_of(visible_image(self._bus.uow, result.id, None)))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
        with acting(req.context.command):
            result = self._bus.handle(DeleteImage(image_id, _scope(req.context.actor)))
        # The canonical id the data is filed under (``ABCD...`` in the path names ``abcd...``), after
        # the deletion is recorded: a crash leaves a file, not a lie.
        self._store.remove(result.id)
        self._read.note(EVERYONES, result.position)  # whatever it was, no one lists it now
        resp.status = falcon.HTTP_204
        resp.set_header(POSITION_HEADER, str(result.position))


class ImageData(_Images):
    """``PUT`` (upload, streamed and hashed) and ``GET`` (download) ``/image/v2/images/{id}/file``."""

    def on_put(self, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
        scope = _scope(req.context.actor)
        image = visible_image(self._bus.uow, image_id, scope)
        image.ensure_owned_by(scope)
        image.ensure_uploadable()
        content_type = (req.content_type or "application/octet-stream").split(";", 1)[0].strip().lower()
        if content_type != "application/octet-stream":
            raise UnsupportedMediaType(
                f"Unsupported Content-Type {content_type[:100]!r}; use application/octet-stream."
            )
        if req.content_length is not None and req.content_length > self._store.max_size:
            raise PayloadTooLarge(f"Image exceeds the storage quota of {self._store.max_size} bytes.")
        # The owner's image quota, checked before any byte is written and while they stream; the
        # append that records the upload checks it again, against concurrent uploads.
        left = image_usage(self._bus.uow, image.owner).remaining(self._image_limits)
        if left is not None and (req.content_length or 0) > left:
            raise PayloadTooLarge(_over_quota(self._image_limits))
        try:
            stored = self._store.receive(image.image_id, _body(req), limit=left)
        except TooLarge as e:
            message = _over_quota(self._image_limits) if left is not None else str(e)
            raise PayloadTooLarge(message) from e
        except StoreError as e:
            raise ServiceUnavailable("The image store cannot take data right now; retry.") from e
        command = RecordImageUpload(image.image_id, scope, stored.size, stored.md5, HASH_ALGO, stored.sha256)
        try:
            with acting(req.context.command):
                result = self._bus.handle(command)
        except QuotaExceeded as e:
            self._discard_unless_recorded(image.image_id, stored.sha256)
            raise PayloadTooLarge(e.message) from None
        except BaseException:
            self._discard_unless_recorded(image.image_id, stored.sha256)
            raise
        resp.status = falcon.HTTP_204
        resp.set_header(POSITION_HEADER, str(result.position))

    def _discard_unless_recorded(self, image_id: str, sha256: str) -> None:
        """Another upload won, or the append failed: keep the file only if the log names it."""
        try:
            current: Image | None = visible_image(self._bus.uow, image_id, None)
        except NotFound:
            current = None
        except EventStoreUnavailable:  # the file may be the recorded one: keep it
            return
        if current is None or current.os_hash_value != sha256:
            self._store.discard(image_id, sha256)

    def on_get(self, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
        scope = _scope(req.context.actor)
        image = visible_image(self._bus.uow, image_id, scope)
        if image.status == DEACTIVATED and scope is not None:
            raise Forbidden("The requested image has been deactivated. Image data download is forbidden.")
        if image.status not in (ACTIVE, DEACTIVATED) or not image.os_hash_value:
            resp.status = falcon.HTTP_204  # Glance: an image without data answers 204
            return
        try:
            chunks = self._store.read(image.image_id, image.os_hash_value)
        except StoreError as e:
            raise ServiceUnavailable("The image's data is not available from this API node.") from e
        resp.content_type = "application/octet-stream"
        resp.set_header("Content-MD5", image.checksum or "")
        resp.content_length = image.size
        resp.stream = chunks


def _no_empty_id(req: falcon.Request) -> None:
    """``/v2/images/`` names an image whose id is empty (Glance: 404), not the collection."""
    if str(req.env.get("PATH_INFO", "")).endswith("/"):
        raise ItemNotFound("No image found with ID ")


def _over_quota(limits: ImageLimits) -> str:
    return f"The image's data exceeds the project's image_size_total quota of {limits.image_size_total} MiB."


def _chosen_id(value: str) -> str:
    """A client's chosen image id: a UUID (Glance's 400 otherwise), in canonical form."""
    try:
        return canonical_image_id(value)
    except ValueError:
        raise BadRequest(f"Invalid input for field/attribute id. Value: {value[:64]!r}. Not a UUID") from None


def _body(req: falcon.Request) -> Iterator[bytes]:
    # A chunked upload (tempest's, glanceclient's) has no Content-Length: falcon's bounded stream
    # would read nothing, so read the server's stream to its end (the WSGI server decodes the chunks).
    stream = req.bounded_stream if req.content_length is not None else req.stream
    while chunk := stream.read(CHUNK):
        yield chunk
