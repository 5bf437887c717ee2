"""``/v2.1/flavors``: list (brief and detail), show, create and describe flavors, in Nova's shapes.

As in Nova, everyone sees the public flavors and an admin may add ``?is_public=none`` (or ``all``)
to see private ones too, or ``is_public=false`` for private ones only; creating a flavor is an
admin's act. A flavor's id is Nova's string ``flavorid``; one is generated (a UUID) when the
request names none. The answer to a create is built from the command itself, so it does not wait
for the read model; ``X-Stratus-Position`` says how far to wait to read it back.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import falcon
from jsonschema import Draft202012Validator

from api import auth
from api.body import as_bool, as_int, read_json
from api.errors import BadRequest, ItemNotFound, ReadModelBehind
from api.flavor_extras import FLAVORS, can_see
from api.links import int_filter, links_of, next_links, page_params, serialized_links_of
from api.readmodel import POSITION_HEADER, ReadModel
from api.servers import UPDATE_READ_WAIT_SECONDS
from api.versions import at_least, since
from commands import loaders
from commands.bus import MessageBus
from commands.errors import DomainError
from commands.flavors.change import DescribeFlavor
from commands.flavors.create import CreateFlavor, DeleteFlavor
from projections import queries
from stratus.context import acting

# Nova's query parameters: unknown ones are refused from 2.75 on a list, from 2.102 on a show.
_LIST_PARAMS = frozenset(("limit", "marker", "is_public", "minRam", "minDisk", "sort_key", "sort_dir"))
_SORT_DIRS = ("asc", "desc")


def brief_view_of(req: falcon.Request) -> Callable[[Any], dict[str, Any]]:
    """Nova's flavor in a list without details (``description`` from 2.55), settled once a page;
    a flavor is a listed row (``queries.view_rows``), its links serialized already."""
    description = at_least(req, 55)
    links = serialized_links_of(req, "flavors")

    def view(flavor: Any) -> dict[str, Any]:
        fid = str(flavor.flavorid)
        shown = {"id": fid, "name": flavor.name, "links": links(fid)}
        if description:
            shown["description"] = flavor.description
        return shown

    return view


def detail_view(req: falcon.Request, flavor: dict[str, Any]) -> dict[str, Any]:
    """One flavor's (a read model row's or a command's fields) ``detail_view_of``."""
    return detail_view_of(req)(SimpleNamespace(**{"description": None, "extra_specs": None, **flavor}))


def detail_view_of(req: falcon.Request, listed: bool = False) -> Callable[[Any], dict[str, Any]]:
    """Nova's flavor at the request's microversion: ``description`` from 2.55, ``extra_specs`` from
    2.61 (decoded only then), no swap as 0 (not "") from 2.75, without ``rxtx_factor`` and
    ``disabled`` from 2.102; settled once for a page's flavors (``listed``: listed rows, their
    links serialized already, as ``brief_view_of``'s)."""
    no_swap = 0 if at_least(req, 75) else ""
    rxtx, description, extra_specs = not at_least(req, 102), at_least(req, 55), at_least(req, 61)
    links = (serialized_links_of if listed else links_of)(req, "flavors")

    def view(flavor: Any) -> dict[str, Any]:
        fid = str(flavor.flavorid)
        shown: dict[str, Any] = {
            "id": fid,
            "name": flavor.name,
            "ram": flavor.ram,
            "vcpus": flavor.vcpus,
            "disk": flavor.disk,
            "OS-FLV-EXT-DATA:ephemeral": flavor.ephemeral,
            "swap": flavor.swap or no_swap,
            "os-flavor-access:is_public": flavor.is_public,
            "links": links(fid),
        }
        if rxtx:
            shown["rxtx_factor"] = flavor.rxtx_factor
            shown["OS-FLV-DISABLED:disabled"] = False
        if description:
            shown["description"] = flavor.description
        if extra_specs:
            shown["extra_specs"] = dict(queries.decode_json(flavor.extra_specs) or {})
        return shown

    return view


def _check_params(req: falcon.Request, known: frozenset[str], strict_from: int) -> None:
    if not at_least(req, strict_from):
        return
    unknown = sorted(set(req.params) - known)
    if unknown:
        raise BadRequest(
            f"Invalid input for query parameters {unknown[0][:64]}. Additional properties are not allowed."
        )


def _visibility(req: falcon.Request, admin: bool) -> tuple[bool, bool | None]:
    """``(include_private, only_is_public)`` from Nova's ``is_public`` parameter (admins only)."""
    if not admin:
        return False, None
    value = (req.get_param("is_public") or "true").strip().lower()
    if value in ("none", "all"):
        return True, None
    if value in ("1", "true", "t", "yes", "y", "on"):
        return False, None
    if value in ("0", "false", "f", "no", "n", "off"):
        return True, False
    raise BadRequest(f"Invalid is_public filter [{value[:64]}]")


def _description(req: falcon.Request, spec: dict[str, Any]) -> str | None:
    if "description" in spec and not at_least(req, 55):
        raise BadRequest(
            "Invalid input for field/attribute flavor. Additional properties are not allowed "
            "('description' was unexpected; it needs microversion 2.55)"
        )
    value = spec.get("description")
    return None if value is None else str(value)


def _rxtx(value: object) -> float:
    factor = float(value)  # type: ignore[arg-type]  # a number or a decimal string (the schema's)
    if not factor > 0:
        raise BadRequest(f"Invalid input for field/attribute flavor.rxtx_factor. Value: {value!r}. Not > 0.")
    return factor


class _Flavors:
    def __init__(
        self,
        bus: MessageBus,
        read_model: ReadModel,
        validators: dict[str, Draft202012Validator],
        max_body_bytes: int,
        new_flavor_id: Callable[[], str],
    ) -> None:
        self._bus = bus
        self._read = read_model
        self._create_validator = validators["flavors.create"]
        self._update_validator = validators["flavors.update"]
        self._max_body = max_body_bytes
        self._new_flavor_id = new_flavor_id

    def _list(self, req: falcon.Request, path: str, view: Callable[[Any], dict[str, Any]]) -> Any:
        _check_params(req, _LIST_PARAMS | ({"name"} if at_least(req, 102) else set()), 75)
        limit, marker = page_params(req)
        include_private, only = _visibility(req, auth.is_admin(req.context.actor))
        sort_key = req.get_param("sort_key") or "flavorid"
        sort_dir = (req.get_param("sort_dir") or "asc").lower()
        if sort_key not in queries.FLAVOR_SORT_KEYS or (sort_key == "rxtx_factor" and at_least(req, 102)):
            raise BadRequest(f"Invalid input for query parameters sort_key. Value: {sort_key[:64]}.")
        if sort_dir not in _SORT_DIRS:
            raise BadRequest(f"Invalid input for query parameters sort_dir. Value: {sort_dir[:64]}.")
        with self._read.connection(req, concerning=(FLAVORS,)) as conn:
            rows = queries.list_flavors(
                conn,
                limit=limit,
                marker=marker,
                include_private=include_private,
                project_id=req.context.actor.project_id,
                min_ram=int_filter(req, "minRam"),
                min_disk=int_filter(req, "minDisk"),
                name=req.get_param("name"),
                sort_key=sort_key,
                descending=sort_dir == "desc",
            )
        shown = rows if only is None else [r for r in rows if r.is_public == only]
        body: dict[str, Any] = {"flavors": [view(r) for r in shown]}
        links = next_links(req, path, rows, limit, id_key="flavorid")
        if links:
            body["flavors_links"] = links
        return body


class FlavorCollection(_Flavors):
    """``GET /v2.1/flavors`` (id, name, links) and ``POST /v2.1/flavors`` (admin)."""

    read_beside_check = auth.READ_BESIDE_CHECK  # a list: read beside its token's check

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = self._list(req, "flavors", brief_view_of(req))

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:os-flavor-manage:create")
        body = read_json(req, self._create_validator, self._max_body)
        spec = body["flavor"]
        flavorid = spec.get("id")
        command = CreateFlavor(
            flavorid=self._new_flavor_id() if flavorid is None else str(flavorid),
            name=spec["name"],
            vcpus=as_int(spec["vcpus"], "flavor.vcpus", 1),
            ram=as_int(spec["ram"], "flavor.ram", 1),
            disk=as_int(spec["disk"], "flavor.disk", 0),
            ephemeral=as_int(spec.get("OS-FLV-EXT-DATA:ephemeral", 0), "flavor.OS-FLV-EXT-DATA:ephemeral", 0),
            swap=as_int(spec.get("swap", 0), "flavor.swap", 0),
            rxtx_factor=_rxtx(spec.get("rxtx_factor", 1.0)),
            is_public=as_bool(spec.get("os-flavor-access:is_public", True)),
            description=_description(req, spec),
        )
        if "rxtx_factor" in spec and at_least(req, 102):
            raise BadRequest(
                "Invalid input for field/attribute flavor. Additional properties are not allowed "
                "('rxtx_factor' was unexpected)"
            )
        with acting(req.context.command):
            result = self._bus.handle(command)
        resp.set_header(POSITION_HEADER, str(result.position))
        self._read.note(FLAVORS, result.position)
        resp.media = {"flavor": detail_view(req, {**vars(command), "flavorid": result.id, "extra_specs": {}})}


class FlavorDetailCollection(_Flavors):
    """``GET /v2.1/flavors/detail``."""

    read_beside_check = auth.READ_BESIDE_CHECK  # a list: read beside its token's check

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = self._list(req, "flavors/detail", detail_view_of(req, listed=True))


class FlavorItem(_Flavors):
    """``GET /v2.1/flavors/{flavor_id}``: deleted flavors still show (servers keep naming them)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, flavor_id: str) -> None:
        _check_params(req, frozenset(), 102)
        with self._read.connection(req, concerning=(FLAVORS,)) as conn:
            row = queries.get_flavor(conn, flavor_id)
            if row is None and self._in_log(flavor_id):
                # Created a moment ago (SDKs read right after POST without a position): wait once
                # for the read model to reach the log's head rather than answer 404 for it.
                head = self._bus.app.recorder.max_notification_id() or 0
                if queries.wait_for_position(conn, head, UPDATE_READ_WAIT_SECONDS):
                    row = queries.get_flavor(conn, flavor_id)
        if row is None or not can_see(req.context.actor, row):
            raise ItemNotFound(f"Flavor {flavor_id} could not be found.")
        resp.media = {"flavor": detail_view(req, row)}

    @falcon.before(since(55))
    def on_put(self, req: falcon.Request, resp: falcon.Response, flavor_id: str) -> None:
        """Change a flavor's description, its only mutable field (2.55); the answer is the flavor."""
        auth.require_admin(req.context.actor, "os_compute_api:os-flavor-manage:update")
        spec = read_json(req, self._update_validator, self._max_body)["flavor"]
        with acting(req.context.command):
            result = self._bus.handle(DescribeFlavor(flavor_id, spec["description"]))
        resp.set_header(POSITION_HEADER, str(result.position))
        self._read.note(FLAVORS, result.position)
        with self._read.connection(req, concerning=(FLAVORS,)) as conn:
            if not queries.wait_for_position(conn, result.position, UPDATE_READ_WAIT_SECONDS):
                raise ReadModelBehind(result.position, UPDATE_READ_WAIT_SECONDS)
            row = queries.get_flavor(conn, flavor_id)
        if row is None:
            raise ItemNotFound(f"Flavor {flavor_id} could not be found.")
        resp.media = {"flavor": detail_view(req, row)}

    def _in_log(self, flavor_id: str) -> bool:
        try:
            loaders.flavor(self._bus.uow, flavor_id)
        except DomainError:
            return False
        return True

    def on_delete(self, req: falcon.Request, resp: falcon.Response, flavor_id: str) -> None:
        """Deleting a flavor keeps the servers built from it as they are (they hold a copy)."""
        auth.require_admin(req.context.actor, "os_compute_api:os-flavor-manage:delete")
        with acting(req.context.command):
            result = self._bus.handle(DeleteFlavor(flavor_id))
        resp.status = falcon.HTTP_202
        resp.set_header(POSITION_HEADER, str(result.position))
        self._read.note(FLAVORS, result.position)
