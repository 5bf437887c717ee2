"""``/v2.1/servers``: create, list (brief and detail), show and delete servers, in Nova's 2.1 shapes.

Creating and deleting are commands on the event log: the answer is 202/204 at once, with the log
position of the last event in ``X-Stratus-Position``; building and tearing down happen afterwards
in the workers. Reads come from the read model.

A create names an image (resolved in the image service's log: it must exist, be visible to the
project and be active), a key pair, networks (``auto``: an address on the fixed network, ``none``,
or networks by uuid), user data (kept off the log: only its digest is recorded), tags, and
``min_count``/``max_count`` for several servers in one atomic append. What Stratus does not do yet,
and therefore refuses rather than ignores: security groups, volumes, personality files. It never
sets an admin password, so ``adminPass`` is not in the answer (as Nova with
``enable_instance_password = False``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import falcon
from jsonschema import Draft202012Validator

from api import auth, policy
from api.body import read_json
from api.errors import BadRequest, ItemNotFound, ReadModelBehind, ServiceUnavailable
from api.links import bookmark, next_links, page_params, resource_links
from api.readmodel import POSITION_HEADER, ReadModel
from commands.errors import NotFound
from commands.handlers import CreateServer, DeleteServer, Handlers
from commands.host_aggregate import DEFAULT_ZONE
from commands.server_fields import ServerFieldHandlers, UpdateServer
from commands.states import PowerState
from projections import admin_queries, queries
from stratus.context import Actor, acting
from stratus.imagestore import BlobStore, StoreError

IDEMPOTENCY_HEADER = "Idempotency-Key"
DISK_CONFIG = "MANUAL"  # Stratus never resizes a guest's root partition.
# Statuses in which Nova shows `progress`, and in which it shows the `fault`.
_PROGRESS_STATUSES = ("ACTIVE", "BUILD", "REBUILD", "RESIZE", "VERIFY_RESIZE", "MIGRATING")
_FAULT_STATUSES = ("ERROR", "DELETED")
_TRUE = ("1", "true", "t", "yes", "y", "on")
# How long PUT /servers/{id} waits for the read model to show the change it answers with.
UPDATE_READ_WAIT_SECONDS = 5.0


def host_id(project_id: str, host: str | None) -> str:
    """Nova's ``hostId``: the same for two servers of one project on one host, opaque across projects."""
    if not host:
        return ""
    return hashlib.sha224((project_id + host).encode()).hexdigest()


def isotime(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _usage_time(value: datetime | None) -> str | None:
    """OS-SRV-USG timestamps are naive ISO 8601 in UTC with microseconds, as Nova prints them."""
    if value is None:
        return None
    return value.astimezone(UTC).replace(tzinfo=None).isoformat()


def brief_view(req: falcon.Request, row: dict[str, Any]) -> dict[str, Any]:
    sid = str(row["id"])
    return {"id": sid, "name": row["name"], "links": resource_links(req, "servers", sid)}


def detail_view(req: falcon.Request, row: dict[str, Any], actor: Actor) -> dict[str, Any]:
    sid = str(row["id"])
    status = row["status"]
    flavor = row["flavor"] or {}
    flavor_id = str(flavor.get("id", ""))
    image_ref = row["image_ref"] or ""
    host = row["host"]
    server: dict[str, Any] = {
        "id": sid,
        "name": row["name"],
        "status": status,
        "tenant_id": row["project_id"],
        "user_id": row["user_id"],
        "metadata": row["metadata"] or {},
        "hostId": host_id(row["project_id"], host),
        "image": {"id": image_ref, "links": bookmark(req, "images", image_ref)} if image_ref else "",
        "flavor": {"id": flavor_id, "links": bookmark(req, "flavors", flavor_id)},
        "created": isotime(row["created_at"]),
        "updated": isotime(row["updated_at"]),
        "addresses": addresses_view(row.get("ports") or []),
        "accessIPv4": "",
        "accessIPv6": "",
        "links": resource_links(req, "servers", sid),
        "OS-DCF:diskConfig": DISK_CONFIG,
        "key_name": row.get("key_name"),
        "description": row.get("description"),
        "config_drive": "",
        "OS-EXT-AZ:availability_zone": row["availability_zone"] or ("nova" if host else ""),
        "OS-EXT-STS:vm_state": row["vm_state"],
        "OS-EXT-STS:task_state": row["task_state"],
        "OS-EXT-STS:power_state": row["power_state"],
        "OS-SRV-USG:launched_at": _usage_time(row["launched_at"]),
        "OS-SRV-USG:terminated_at": _usage_time(row["deleted_at"]),
        "os-extended-volumes:volumes_attached": [],
    }
    if status in _PROGRESS_STATUSES:
        server["progress"] = 100 if status == "ACTIVE" else 0
    if auth.is_admin(actor):
        server["OS-EXT-SRV-ATTR:host"] = host
        server["OS-EXT-SRV-ATTR:hypervisor_hostname"] = host
    fault = row["fault"]
    if fault and status in _FAULT_STATUSES:
        server["fault"] = fault_view(fault, row, actor)
    return server


def addresses_view(ports: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Nova's ``addresses``: per network name, the fixed addresses with their MACs."""
    addresses: dict[str, list[dict[str, Any]]] = {}
    for port in ports:
        addresses.setdefault(port["network_name"], []).append(
            {
                "addr": port["address"],
                "version": 4,
                "OS-EXT-IPS:type": "fixed",
                "OS-EXT-IPS-MAC:mac_addr": port["mac"],
            }
        )
    return addresses


def fault_view(fault: dict[str, Any], row: dict[str, Any], actor: Actor) -> dict[str, Any]:
    """Nova's fault: an HTTP-like code (500 for a failed build), details only for admins at 500."""
    code = fault.get("code")
    status_code = code if isinstance(code, int) else 500
    view: dict[str, Any] = {
        "code": status_code,
        "message": fault.get("message", ""),
        "created": _fault_time(fault.get("created")) or isotime(row["updated_at"]),
    }
    details = fault.get("details")
    if details and (auth.is_admin(actor) or status_code != 500):
        view["details"] = details
    return view


def _fault_time(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    try:
        return isotime(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return None


class _Servers:
    def __init__(
        self,
        handlers: Handlers,
        read_model: ReadModel,
        validators: dict[str, Draft202012Validator],
        max_body_bytes: int,
        user_data: BlobStore | None = None,
        *,
        liveness: Callable[[list[str]], dict[str, bool]] | None = None,
    ) -> None:
        self._liveness = liveness  # which hosts send heartbeats (None: not tracked)
        self._handlers = handlers
        self._read = read_model
        self._create_validator = validators["servers.create"]
        self._validators = validators
        self._max_body = max_body_bytes
        self._user_data = user_data

    def _as_known(self, alive: dict[str, bool]) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """The row as far as we know: on a host that stopped sending heartbeats the guest's power
        state is unknown (NOSTATE), not the last one recorded (``alive`` caches hosts per request)."""

        def known(row: dict[str, Any]) -> dict[str, Any]:
            host = row["host"]
            if self._liveness is None or not host or row["deleted"]:
                return row
            if host not in alive:
                alive.update(self._liveness([host]))
            return row if alive.get(host, False) else {**row, "power_state": PowerState.NOSTATE}

        return known

    def _list(self, req: falcon.Request, path: str, view: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
        actor: Actor = req.context.actor
        admin = auth.is_admin(actor)
        limit, marker = page_params(req)
        all_tenants = _flag(req, "all_tenants")
        project_id = auth.project_scope(actor, all_tenants)
        if all_tenants:
            # An admin listing every project may narrow it to one (Nova: project_id / tenant_id).
            project_id = req.get_param("project_id") or req.get_param("tenant_id") or None
        status = req.get_param("status")
        include_deleted = admin and (_flag(req, "deleted") or (status or "").upper() == "DELETED")
        with self._read.connection(req) as conn:
            rows = queries.list_servers(
                conn,
                project_id=project_id,
                limit=limit,
                marker=marker,
                name=req.get_param("name") or None,
                status=status or None,
                host=req.get_param("host") if admin else None,
                include_deleted=include_deleted,
                **_field_filters(req),
            )
        body: dict[str, Any] = {"servers": [view(r) for r in rows]}
        links = next_links(req, path, rows, limit)
        if links:
            body["servers_links"] = links
        return body


class ServerCollection(_Servers):
    """``GET /v2.1/servers`` (id, name, links) and ``POST /v2.1/servers``."""

    @falcon.before(policy.require("os_compute_api:servers:index"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = self._list(req, "servers", lambda row: brief_view(req, row))

    @falcon.before(policy.require("os_compute_api:servers:create"))
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        actor: Actor = req.context.actor
        body = read_json(req, self._create_validator, self._max_body)
        server = body["server"]
        key = req.get_header(IDEMPOTENCY_HEADER)
        if key is not None and not 1 <= len(key) <= 255:
            raise BadRequest(f"{IDEMPOTENCY_HEADER} must be 1 to 255 characters.")
        min_count = server.get("min_count", 1)
        max_count = server.get("max_count", min_count)
        if min_count > max_count:
            raise BadRequest("min_count must be <= max_count")
        reservation_id = f"r-{uuid.uuid4().hex[:8]}"
        self._check_zone(req, server.get("availability_zone"))
        command = CreateServer(
            name=server["name"],
            project_id=actor.project_id,
            user_id=actor.user_id,
            flavor_ref=_id_from_ref(server["flavorRef"]),
            image_ref=_image_ref(server),
            metadata=dict(server.get("metadata", {})),
            availability_zone=server.get("availability_zone"),
            idempotency_key=key,
            description=server.get("description"),
            key_name=server.get("key_name"),
            user_data=self._stored_user_data(server.get("user_data")),
            networks=_networks(server.get("networks", "auto")),
            tags=tuple(server.get("tags", ())),
            count=max_count,
            reservation_id=reservation_id,
            any_image=auth.is_admin(actor),
            any_flavor=auth.is_admin(actor),
            group=body.get("os:scheduler_hints", {}).get("group"),
        )
        try:
            with acting(req.context.command):
                result = self._handlers.create_server(command)
        except NotFound as e:
            # A reference in the body that names nothing is the request's fault (Nova: 400).
            raise BadRequest(e.message) from e
        resp.status = falcon.HTTP_202
        resp.set_header(POSITION_HEADER, str(result.position))
        if server.get("return_reservation_id"):
            resp.media = {"reservation_id": result.reservation_id}
            return
        links = resource_links(req, "servers", result.id)
        resp.location = links[0]["href"]
        resp.media = {"server": {"id": result.id, "links": links, "OS-DCF:diskConfig": DISK_CONFIG}}

    def _stored_user_data(self, encoded: str | None) -> dict[str, Any] | None:
        """Decode and file the user data; the command carries only its digest (it may hold secrets)."""
        if encoded is None:
            return None
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            # Never echo the value: user data often carries secrets.
            raise BadRequest(
                "Invalid input for field/attribute user_data. The value is not valid base64."
            ) from None
        if self._user_data is None:
            raise BadRequest("This deployment does not accept user_data.")
        try:
            digest = self._user_data.put(data)
        except StoreError as e:
            raise ServiceUnavailable("User data cannot be stored right now; retry.") from e
        return {"sha256": digest, "size": len(data)}

    def _check_zone(self, req: falcon.Request, zone: str | None) -> None:
        """A zone must be one that hosts are in, or that a host aggregate defines (Nova: 400)."""
        if zone is None:
            return
        with self._read.connection(req) as conn:
            zones = admin_queries.availability_zones(conn, DEFAULT_ZONE)
        if zone not in zones:
            raise BadRequest("The requested availability zone is not available")


class ServerDetailCollection(_Servers):
    """``GET /v2.1/servers/detail``: every field of each server."""

    @falcon.before(policy.require("os_compute_api:servers:detail"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        actor = req.context.actor
        known = self._as_known({})
        resp.media = self._list(req, "servers/detail", lambda row: detail_view(req, known(row), actor))


class ServerItem(_Servers):
    """``GET``, ``PUT`` and ``DELETE /v2.1/servers/{server_id}``."""

    @falcon.before(policy.require("os_compute_api:servers:show"))
    def on_get(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        actor: Actor = req.context.actor
        scope = auth.server_scope(actor)
        with self._read.connection(req) as conn:
            row = queries.get_server(conn, server_id, scope)
            if row is None and self._in_log(server_id, scope):
                # Created a moment ago (clients read right after POST): wait for the read model to
                # reach the log's head, once, instead of answering 404 for a server that exists.
                head = self._handlers.app.recorder.max_notification_id() or 0
                if queries.wait_for_position(conn, head, UPDATE_READ_WAIT_SECONDS):
                    row = queries.get_server(conn, server_id, scope)
        if row is None or row["deleted"]:
            raise ItemNotFound(f"Instance {server_id} could not be found.")
        resp.media = {"server": detail_view(req, self._as_known({})(row), actor)}

    def _in_log(self, server_id: str, scope: str | None) -> bool:
        try:
            self._handlers.instance(server_id, scope)
        except NotFound:
            return False
        return True

    @falcon.before(policy.require("os_compute_api:servers:update"))
    def on_put(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        """Rename the server or change its description; the answer is the server after the change."""
        actor: Actor = req.context.actor
        changes = read_json(req, self._validators["servers.update"], self._max_body)["server"]
        command = UpdateServer(
            server_id,
            auth.server_scope(actor),
            name=changes.get("name"),
            description=changes.get("description"),
            clear_description="description" in changes and changes["description"] is None,
        )
        with acting(req.context.command):
            result = ServerFieldHandlers(self._handlers).update_server(command)
        resp.set_header(POSITION_HEADER, str(result.position))
        with self._read.connection(req) as conn:
            if not queries.wait_for_position(conn, result.position, UPDATE_READ_WAIT_SECONDS):
                raise ReadModelBehind(result.position, UPDATE_READ_WAIT_SECONDS)
            row = queries.get_server(conn, server_id, auth.server_scope(actor))
        if row is None or row["deleted"]:
            raise ItemNotFound(f"Instance {server_id} could not be found.")
        resp.media = {"server": detail_view(req, row, actor)}

    @falcon.before(policy.require("os_compute_api:servers:delete"))
    def on_delete(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        actor: Actor = req.context.actor
        with acting(req.context.command):
            result = self._handlers.delete_server(DeleteServer(server_id, auth.server_scope(actor)))
        resp.status = falcon.HTTP_204
        resp.set_header(POSITION_HEADER, str(result.position))


def _flag(req: falcon.Request, name: str) -> bool:
    value = req.get_param(name)
    if value is None:
        return False
    # Nova treats a bare ``?all_tenants`` as true.
    return value == "" or value.strip().lower() in _TRUE


def _id_from_ref(ref: str | int) -> str:
    """Nova accepts an id or a URL ending in it (``http://.../flavors/1``) for flavorRef and imageRef."""
    text = str(ref).strip()
    return text.rstrip("/").rsplit("/", 1)[-1] if "/" in text else text


def _networks(value: str | list[dict[str, str]]) -> str | tuple[str, ...]:
    if isinstance(value, str):
        return value
    if not value:
        return "auto"  # before 2.37 an empty list means "the networks available", as no list does
    return tuple(item["uuid"].lower() for item in value)


def _image_ref(server: dict[str, Any]) -> str:
    """The image to boot: ``imageRef``, or the image of the one local-boot block device mapping
    (openstackclient sends both; Nova accepts either)."""
    image_ref = _id_from_ref(server.get("imageRef", ""))
    for mapping in server.get("block_device_mapping_v2", ()):
        if image_ref and mapping["uuid"] != image_ref:
            raise BadRequest("The block device mapping's image must be the server's imageRef.")
        image_ref = mapping["uuid"]
    return image_ref


def _field_filters(req: falcon.Request) -> dict[str, Any]:
    """Nova's list filters on a server's own fields: ``changes-since``, ``tags``, ``ip``, reservations."""
    filters: dict[str, Any] = {}
    since = req.get_param("changes-since")
    if since is not None:
        try:
            when = datetime.fromisoformat(since.strip().replace("Z", "+00:00"))
        except ValueError:
            raise BadRequest(
                f"Invalid input for query parameters changes-since. Value: {since[:64]}."
            ) from None
        filters["changes_since"] = when if when.tzinfo else when.replace(tzinfo=UTC)
    for param, key in (
        ("tags", "tags"),
        ("tags-any", "tags_any"),
        ("not-tags", "not_tags"),
        ("not-tags-any", "not_tags_any"),
    ):
        value = req.get_param(param)
        if value:
            filters[key] = [t for t in value.split(",") if t]
    ip = req.get_param("ip")
    if ip:
        filters["ip"] = ip
    reservation = req.get_param("reservation_id")
    if reservation:
        filters["reservation_id"] = reservation
    return filters
