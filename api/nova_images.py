"""``/v2.1/images``: Nova's image API, a proxy of the image service, until microversion 2.35.

Nova answers it from Glance with the caller's rights; Stratus answers it from its own image
service (``api/image/``) the same way: the images the project may see, Nova's shapes (status
``ACTIVE``/``SAVING``/``ERROR``, ``minRam``, ``minDisk``, the additional properties as
``metadata``), deleting as Glance deletes, and metadata as the image's additional properties. From
2.36 every route is a 404, as Nova's proxies are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import falcon

from api import auth
from api.body import load_validators, read_json
from api.errors import BadRequest, ItemNotFound
from api.image.images import EVERYONES, IMAGE_ROOT, member_key, row_of
from api.links import int_filter, links_of, next_links, page_params, time_param
from api.readmodel import POSITION_HEADER, ReadModel
from api.versions import at_least
from commands.bus import MessageBus
from commands.images.create import DeleteImage, visible_image
from commands.images.update import UpdateImage
from projections import image_queries
from projections.queries import decode_json
from stratus.context import Actor, acting

LAST_MICROVERSION = 35  # the proxies left Nova at 2.36
_STATUS = {"active": "ACTIVE", "queued": "SAVING", "saving": "SAVING", "importing": "SAVING",
           "uploading": "SAVING", "killed": "ERROR", "deleted": "DELETED", "pending_delete": "DELETED",
           "deactivated": "ACTIVE"}  # fmt: skip
_PROGRESS = {"queued": 25, "saving": 50, "active": 100}
_GLANCE_STATUS = {"ACTIVE": "active", "SAVING": "saving", "ERROR": "killed", "DELETED": "deleted"}


def _proxy(req: falcon.Request, resp: falcon.Response, resource: object, params: dict[str, Any]) -> None:
    if at_least(req, LAST_MICROVERSION + 1):
        raise ItemNotFound("The resource could not be found.")


def _scope(actor: Actor) -> str | None:
    return None if auth.is_admin(actor) else actor.project_id


View = Callable[[Any], dict[str, Any]]


def _links_of(req: falcon.Request) -> Callable[[str], list[dict[str, str]]]:
    """An image's links (Nova's and Glance's ``alternate``), the request's prefixes read once."""
    own, glance = links_of(req, "images"), f"{req.prefix}{IMAGE_ROOT}/images/"

    def links(image_id: str) -> list[dict[str, str]]:
        alternate = {"rel": "alternate", "type": "application/vnd.openstack.image", "href": glance + image_id}
        return [*own(image_id), alternate]

    return links


def brief_view_of(req: falcon.Request) -> View:
    """An image (a listed row, ``image_queries.list_images``, or ``row_of``'s) without details."""
    links = _links_of(req)
    return lambda row: {"id": row.id, "name": row.name, "links": links(row.id)}


def detail_view_of(req: falcon.Request) -> View:
    """Nova's image: its properties as metadata, Glance's status as Nova's (as ``brief_view_of``)."""
    links = _links_of(req)

    def view(row: Any) -> dict[str, Any]:
        iid, status = row.id, row.status
        return {
            "id": iid,
            "name": row.name,
            "minRam": row.min_ram or 0,
            "minDisk": row.min_disk or 0,
            "metadata": _metadata(row),
            "status": _STATUS.get(status, "UNKNOWN"),
            "progress": _PROGRESS.get(status, 0),
            "created": row.created_at,
            "updated": row.updated_at,
            "links": links(iid),
            "OS-EXT-IMG-SIZE:size": row.size,
        }

    return view


def _metadata(row: Any) -> dict[str, str]:
    properties = decode_json(row.properties) or {}
    return {str(k): v if isinstance(v, str) else str(v) for k, v in properties.items()}


class _NovaImages:
    def __init__(self, bus: MessageBus, read_model: ReadModel, max_body_bytes: int) -> None:
        self._bus = bus
        self._read = read_model
        self._max_body = max_body_bytes
        self._validators = load_validators(("images.metadata", "images.meta"))

    def _row(self, req: falcon.Request, image_id: str) -> Any:
        return row_of(visible_image(self._bus.uow, image_id, _scope(req.context.actor)))

    def _list(self, req: falcon.Request, path: str, detail: bool) -> dict[str, Any]:
        actor: Actor = req.context.actor
        limit, marker = page_params(req)
        status = req.get_param("status")
        since = time_param(req, "changes-since")
        least = {name: int_filter(req, name) for name in ("minRam", "minDisk")}
        with self._read.connection(req, concerning=(member_key(actor.project_id), EVERYONES)) as conn:
            rows = image_queries.list_images(
                conn,
                project_id=_scope(actor),
                limit=limit,
                marker=marker,
                name=req.get_param("name"),
                status=_GLANCE_STATUS.get(status.upper(), status.lower()) if status else None,
                changed_since=since,
                min_ram=least["minRam"],
                min_disk=least["minDisk"],
            )
        view = detail_view_of(req) if detail else brief_view_of(req)
        body: dict[str, Any] = {"images": [view(r) for r in rows]}
        links = next_links(req, path, rows, limit)
        if links:
            body["images_links"] = links
        return body

    def _set_metadata(self, req: falcon.Request, image_id: str, items: dict[str, str], replace: bool) -> int:
        """Set ``items`` as additional properties (``replace``: and remove every other one)."""
        current = self._row(req, image_id).properties or {}
        removed = tuple(k for k in current if k not in items) if replace else ()
        command = UpdateImage(image_id, _scope(req.context.actor), {}, dict(items), removed)
        with acting(req.context.command):
            position = self._bus.handle(command).position
        self._read.note(EVERYONES, position)
        return position

    def _metadata_body(self, req: falcon.Request, key: str) -> dict[str, str]:
        return dict(read_json(req, self._validators[f"images.{key}"], self._max_body)[key])


@falcon.before(_proxy)
class ImageCollection(_NovaImages):
    """``GET /v2.1/images``: id, name and links."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = self._list(req, "images", detail=False)


@falcon.before(_proxy)
class ImageDetailCollection(_NovaImages):
    """``GET /v2.1/images/detail``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = self._list(req, "images/detail", detail=True)


@falcon.before(_proxy)
class ImageItem(_NovaImages):
    """``GET`` and ``DELETE /v2.1/images/{image_id}``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
        resp.media = {"image": detail_view_of(req)(self._row(req, image_id))}

    def on_delete(self, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
        with acting(req.context.command):
            result = self._bus.handle(DeleteImage(image_id, _scope(req.context.actor)))
        self._read.note(EVERYONES, result.position)
        resp.set_header(POSITION_HEADER, str(result.position))
        resp.status = falcon.HTTP_204


@falcon.before(_proxy)
class ImageMetadata(_NovaImages):
    """``GET``, ``POST`` (merge) and ``PUT`` (replace) ``/v2.1/images/{image_id}/metadata``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
        resp.media = {"metadata": _metadata(self._row(req, image_id))}

    def on_post(self, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
        self._answer(
            req,
            resp,
            image_id,
            self._set_metadata(req, image_id, self._metadata_body(req, "metadata"), False),
        )

    def on_put(self, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
        self._answer(
            req, resp, image_id, self._set_metadata(req, image_id, self._metadata_body(req, "metadata"), True)
        )

    def _answer(self, req: falcon.Request, resp: falcon.Response, image_id: str, position: int) -> None:
        resp.set_header(POSITION_HEADER, str(position))
        resp.media = {"metadata": _metadata(self._row(req, image_id))}


@falcon.before(_proxy)
class ImageMetadataItem(_NovaImages):
    """``GET``, ``PUT`` and ``DELETE /v2.1/images/{image_id}/metadata/{key}``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, image_id: str, key: str) -> None:
        metadata = _metadata(self._row(req, image_id))
        if key not in metadata:
            raise ItemNotFound(f"Image {image_id} has no metadata item with key {key}.")
        resp.media = {"meta": {key: metadata[key]}}

    def on_put(self, req: falcon.Request, resp: falcon.Response, image_id: str, key: str) -> None:
        meta = self._metadata_body(req, "meta")
        if list(meta) != [key]:
            raise BadRequest("Request body and URI mismatch: the one item must be the key in the URI.")
        resp.set_header(POSITION_HEADER, str(self._set_metadata(req, image_id, meta, False)))
        resp.media = {"meta": meta}

    def on_delete(self, req: falcon.Request, resp: falcon.Response, image_id: str, key: str) -> None:
        if key not in _metadata(self._row(req, image_id)):
            raise ItemNotFound(f"Image {image_id} has no metadata item with key {key}.")
        command = UpdateImage(image_id, _scope(req.context.actor), {}, {}, (key,))
        with acting(req.context.command):
            position = self._bus.handle(command).position
        self._read.note(EVERYONES, position)
        resp.set_header(POSITION_HEADER, str(position))
        resp.status = falcon.HTTP_204


def add_routes(app: falcon.App, bus: MessageBus, read: ReadModel, max_body_bytes: int) -> None:
    args = (bus, read, max_body_bytes)
    app.add_route("/v2.1/images", ImageCollection(*args))
    app.add_route("/v2.1/images/detail", ImageDetailCollection(*args))
    app.add_route("/v2.1/images/{image_id}", ImageItem(*args))
    app.add_route("/v2.1/images/{image_id}/metadata", ImageMetadata(*args))
    app.add_route("/v2.1/images/{image_id}/metadata/{key}", ImageMetadataItem(*args))
