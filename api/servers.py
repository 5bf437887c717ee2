"""``/v2.1/servers``: create, list (brief and detail), show and delete servers, in Nova's 2.1 shapes.

Creating and deleting are commands on the event log: the answer is 202/204 at once, with the log
position of the last event in ``X-Stratus-Position``; building and tearing down happen afterwards
in the workers. Reads come from the read model.

A create names an image (resolved in the image service's log: it must exist, be visible to the
project and be active), a key pair, networks (``auto``: an address on the fixed network, ``none``,
or networks by uuid), user data (kept off the log: only its digest is recorded), tags, and
``min_count``/``max_count`` for several servers in one atomic append. What Stratus does not do yet,
and therefore refuses rather than ignores: security groups, volumes, personality files. It never
sets an admin password: ``adminPass`` is accepted and discarded (never recorded), and is not in the
answer, as Nova with ``enable_instance_password = False``. ``accessIPv4``/``accessIPv6``, the disk
configuration and (2.90) the hostname are recorded as the owner gives them.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
import logging
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import falcon
from jsonschema import Draft202012Validator

from api import auth, policy
from api.body import read_json
from api.errors import BadRequest, Forbidden, ItemNotFound, ReadModelBehind, ServiceUnavailable
from api.links import bookmark, next_links, page_params, resource_links, time_param
from api.readmodel import POSITION_HEADER, ReadModel
from api.versions import at_least
from commands.errors import NotFound
from commands.handlers import CreateServer, DeleteServer, Handlers
from commands.host_aggregate import DEFAULT_ZONE
from commands.lifecycle import LifecycleHandlers, PinZone
from commands.server_fields import ServerFieldHandlers, UpdateServer
from commands.states import PowerState
from projections import admin_queries, queries
from stratus.context import Actor, acting
from stratus.imagestore import BlobStore, StoreError

log = logging.getLogger("stratus.api")

IDEMPOTENCY_HEADER = "Idempotency-Key"
# The image properties a server keeps from its image (``Image.boot_snapshot``) that Nova's image
# metadata knows; shown under ``image.properties`` from 2.98.
IMAGE_PROPERTIES = ("os_command_line",)
DISK_CONFIG = "MANUAL"  # Stratus never resizes a guest's root partition.
# Statuses in which Nova shows `progress`, and in which it shows the `fault`.
_PROGRESS_STATUSES = ("ACTIVE", "BUILD", "REBUILD", "RESIZE", "VERIFY_RESIZE", "MIGRATING")
_FAULT_STATUSES = ("ERROR", "DELETED")
_TRUE = ("1", "true", "t", "yes", "y", "on")
_FALSE = ("0", "false", "f", "no", "n", "off")
# The statuses Nova's list filter knows; from 2.38 any other is a 400 (before: an empty list).
_NOVA_STATUSES = frozenset(
    (
        "ACTIVE", "BUILD", "DELETED", "ERROR", "HARD_REBOOT", "MIGRATING", "PASSWORD", "PAUSED", "REBOOT",
        "REBUILD", "RESCUE", "RESIZE", "REVERT_RESIZE", "SHELVED", "SHELVED_OFFLOADED", "SHUTOFF",
        "SOFT_DELETED", "SUSPENDED", "UNKNOWN", "VERIFY_RESIZE",
    )
)  # fmt: skip
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


def detail_view(
    req: falcon.Request,
    row: dict[str, Any],
    actor: Actor,
    extras: ServerExtras | None = None,
    *,
    group: str | None = None,
    single: bool = False,
    basic: bool = False,
) -> dict[str, Any]:
    """The server as Nova shows it at the request's microversion (``versions.at_least``).

    ``group`` is the server group it belongs to; ``single`` marks a show, update or rebuild answer
    (2.71's ``server_groups`` is in those only); ``basic`` marks an update or rebuild answer, which
    before 2.75 leaves out the extended attributes, as Nova's."""
    sid = str(row["id"])
    status = row["status"]
    flavor = row["flavor"] or {}
    host = row["host"]
    admin = auth.is_admin(actor)
    server: dict[str, Any] = {
        "id": sid,
        "name": row["name"],
        "status": status,
        "tenant_id": row["project_id"],
        "user_id": row["user_id"],
        "metadata": row["metadata"] or {},
        "hostId": host_id(row["project_id"], host),
        "image": image_view(req, row),
        "flavor": flavor_view(req, flavor),
        "created": isotime(row["created_at"]),
        "updated": isotime(row["updated_at"]),
        # update's and rebuild's addresses lack the extension keys before 2.75, as their other fields
        "addresses": addresses_view(row.get("ports") or [], extended=not basic or at_least(req, 75)),
        "accessIPv4": row.get("access_ip_v4") or "",
        "accessIPv6": row.get("access_ip_v6") or "",
        "links": resource_links(req, "servers", sid),
        "OS-DCF:diskConfig": row.get("disk_config") or DISK_CONFIG,
    }
    if status in _PROGRESS_STATUSES:
        server["progress"] = 100 if status == "ACTIVE" else 0
    if not basic or at_least(req, 75):
        server.update(_extended_view(req, row, admin, extras))
    if at_least(req, 9):
        server["locked"] = row.get("locked_by") is not None
    if at_least(req, 19):
        server["description"] = row.get("description")
    if at_least(req, 26):
        server["tags"] = list(row.get("tags") or [])
    if at_least(req, 63):
        server["trusted_image_certificates"] = None  # Stratus verifies no image signatures
    if at_least(req, 71) and single:
        server["server_groups"] = [group] if group else []
    if at_least(req, 73):
        server["locked_reason"] = row.get("locked_reason")
    if at_least(req, 96):
        server["pinned_availability_zone"] = row["availability_zone"] or None
    if at_least(req, 100):
        server["scheduler_hints"] = {"group": group} if group else {}
    fault = row["fault"]
    if fault and status in _FAULT_STATUSES:
        server["fault"] = fault_view(fault, row, actor)
    return server


def _extended_view(
    req: falcon.Request, row: dict[str, Any], admin: bool, extras: ServerExtras | None
) -> dict[str, Any]:
    """The extension attributes of Nova's show and list (update and rebuild too from 2.75)."""
    sid = str(row["id"])
    host = row["host"]
    view: dict[str, Any] = {
        "key_name": row.get("key_name"),
        "config_drive": "",
        "OS-EXT-AZ:availability_zone": _zone(row),
        "OS-EXT-STS:vm_state": row["vm_state"],
        "OS-EXT-STS:task_state": row["task_state"],
        "OS-EXT-STS:power_state": row["power_state"],
        "OS-SRV-USG:launched_at": _usage_time(row["launched_at"]),
        "OS-SRV-USG:terminated_at": _usage_time(row["deleted_at"]),
        "os-extended-volumes:volumes_attached": [],
    }
    if admin:
        view["OS-EXT-SRV-ATTR:host"] = host
        view["OS-EXT-SRV-ATTR:hypervisor_hostname"] = host
        view["OS-EXT-SRV-ATTR:instance_name"] = f"instance-{sid}"  # the libvirt domain's name
        if at_least(req, 3):
            view.update(_extended_attributes(row, extras))
    elif at_least(req, 90):  # from 2.90 every user sees the hostname
        view["OS-EXT-SRV-ATTR:hostname"] = server_hostname(row)
    if at_least(req, 16) and admin:
        view["host_status"] = extras.host_status(host) if extras is not None else ""
    return view


def image_view(req: falcon.Request, row: dict[str, Any]) -> dict[str, Any] | str:
    """The image as a link ("" for a server without one); from 2.98 with the properties it kept."""
    image_ref = row["image_ref"] or ""
    if not image_ref:
        return ""
    view: dict[str, Any] = {"id": image_ref, "links": bookmark(req, "images", image_ref)}
    if at_least(req, 98):
        kept = row.get("image") or {}
        view["properties"] = {k: str(kept[k]) for k in IMAGE_PROPERTIES if kept.get(k) is not None}
    return view


def _zone(row: dict[str, Any]) -> str:
    """The zone asked for; else, once placed, the zone of its host (the default zone when the host
    is in none); "" before placement, as Nova."""
    if row["availability_zone"]:
        return str(row["availability_zone"])
    if not row["host"]:
        return ""
    return str(row.get("host_zone") or DEFAULT_ZONE)


def flavor_view(req: falcon.Request, flavor: dict[str, Any]) -> dict[str, Any]:
    """A link to the flavor before 2.47; from 2.47 the flavor as the server was built with it."""
    if not at_least(req, 47):
        flavor_id = str(flavor.get("id", ""))
        return {"id": flavor_id, "links": bookmark(req, "flavors", flavor_id)}
    return {
        "vcpus": flavor.get("vcpus", 0),
        "ram": flavor.get("ram", 0),
        "disk": flavor.get("disk", 0),
        "ephemeral": flavor.get("ephemeral", 0),
        "swap": flavor.get("swap", 0),
        "original_name": flavor.get("name", ""),
        "extra_specs": dict(flavor.get("extra_specs") or {}),
    }


def _extended_attributes(row: dict[str, Any], extras: ServerExtras | None) -> dict[str, Any]:
    """2.3's extended server attributes (admins): reservation, launch index, hostname, boot files."""
    image = row.get("image") or {}
    return {
        "OS-EXT-SRV-ATTR:reservation_id": row.get("reservation_id"),
        "OS-EXT-SRV-ATTR:launch_index": row.get("launch_index") or 0,
        "OS-EXT-SRV-ATTR:hostname": server_hostname(row),
        "OS-EXT-SRV-ATTR:kernel_id": image.get("kernel_id") or "",
        "OS-EXT-SRV-ATTR:ramdisk_id": image.get("ramdisk_id") or "",
        # guests boot their kernel directly, with no root disk device
        "OS-EXT-SRV-ATTR:root_device_name": None,
        "OS-EXT-SRV-ATTR:user_data": extras.user_data(row.get("user_data")) if extras is not None else None,
    }


def server_hostname(row: dict[str, Any]) -> str:
    """The hostname asked for (2.90), else the one Nova derives from the name."""
    return str(row.get("hostname") or hostname_for(row["name"]))


def hostname_for(name: str) -> str:
    """Nova's ``sanitize_hostname``: lower case, runs of other characters as one dash, at most 63."""
    text = re.sub(r"[ _.]", "-", name.lower())
    text = re.sub(r"[^\w-]+", "", text, flags=re.ASCII).strip("-.")
    return text[:63].rstrip("-") or "server"


class ServerExtras:
    """What a page of servers needs beyond its rows, fetched once per request: the state of the
    hosts they run on (2.16's ``host_status``) and their user data (2.3, admins)."""

    def __init__(
        self,
        services: dict[str, dict[str, Any]],
        alive: Callable[[list[str]], dict[str, bool]] | None,
        blobs: BlobStore | None,
    ) -> None:
        self._services = services
        self._alive = alive
        self._up: dict[str, bool] = {}
        self._blobs = blobs

    def host_status(self, host: str | None) -> str:
        """Nova's values: "" without a host; DOWN, MAINTENANCE (disabled) or UP; UNKNOWN if unknown."""
        if not host:
            return ""
        service = self._services.get(host)
        if service is None:
            return "UNKNOWN"
        if service["forced_down"]:
            return "DOWN"
        if self._alive is not None:
            if host not in self._up:
                self._up.update(self._alive([host]))
            if not self._up.get(host, False):
                return "DOWN"
        return "MAINTENANCE" if service["disabled"] else "UP"

    def user_data(self, filed: dict[str, Any] | None) -> str | None:
        return read_user_data(self._blobs, filed)


def read_user_data(blobs: BlobStore | None, filed: dict[str, Any] | None) -> str | None:
    """The user data filed at ``filed``, base64 as Nova shows it (None if there is none)."""
    if not filed or blobs is None:
        return None
    blob = filed.get("id") or filed.get("sha256")  # rows projected before version 5: "sha256"
    try:
        return base64.b64encode(blobs.get(str(blob))).decode()
    except StoreError as e:  # an API node without the blob (e.g. no shared data directory)
        log.warning("user data %s not shown: %s", blob, e)
        return None


def addresses_view(ports: list[dict[str, Any]], *, extended: bool = True) -> dict[str, list[dict[str, Any]]]:
    """Nova's ``addresses``: per network name, the fixed addresses (``extended``: with their type
    and MAC, the extension keys)."""
    addresses: dict[str, list[dict[str, Any]]] = {}
    for port in ports:
        address: dict[str, Any] = {"addr": port["address"], "version": 4}
        if extended:
            address.update({"OS-EXT-IPS:type": "fixed", "OS-EXT-IPS-MAC:mac_addr": port["mac"]})
        addresses.setdefault(port["network_name"], []).append(address)
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

    def _extras(self, req: falcon.Request, conn: Any, rows: list[dict[str, Any]]) -> ServerExtras | None:
        """What the admin-only fields of these rows need (None when the request shows none)."""
        if not (auth.is_admin(req.context.actor) and at_least(req, 3)):
            return None
        hosts = sorted({r["host"] for r in rows if r["host"]})
        services = admin_queries.compute_services_of(conn, hosts) if at_least(req, 16) else {}
        return ServerExtras(services, self._liveness, self._user_data)

    def _list(
        self,
        req: falcon.Request,
        path: str,
        view: Callable[[dict[str, Any], ServerExtras | None, str | None], dict[str, Any]],
        alive: dict[str, bool] | None = None,
    ) -> Any:
        """A page of servers through ``view``; ``alive``, when given, is filled with the liveness of
        the page's hosts in one call (``_as_known`` then asks nothing per row)."""
        actor: Actor = req.context.actor
        admin = auth.is_admin(actor)
        _check_list_params(req)
        limit, marker = page_params(req)
        all_tenants = _flag(req, "all_tenants")
        project_id = auth.project_scope(actor, all_tenants)
        if all_tenants:
            # An admin listing every project may narrow it to one (Nova: project_id / tenant_id).
            project_id = req.get_param("project_id") or req.get_param("tenant_id") or None
        status = req.get_param("status")
        if status is not None and at_least(req, 38) and status.upper() not in _NOVA_STATUSES:
            raise BadRequest(f"Invalid status value: {status[:64]}")
        include_deleted = admin and (_flag(req, "deleted") or (status or "").upper() == "DELETED")
        with self._read.connection(req) as conn:
            rows = queries.list_servers(
                conn,
                project_id=project_id,
                limit=limit,
                marker=marker,
                name=req.get_param("name") or req.get_param("display_name") or None,
                status=status or None,
                host=req.get_param("host") if admin else None,
                include_deleted=include_deleted,
                **_field_filters(req),
                **_column_filters(req, admin),
            )
            extras = self._extras(req, conn, rows)
            groups = _groups(req, conn, rows)
        hosts = sorted({r["host"] for r in rows if r["host"] and not r["deleted"]})
        if alive is not None and self._liveness is not None and hosts:
            alive.update(self._liveness(hosts))
        body: dict[str, Any] = {"servers": [view(r, extras, groups.get(str(r["id"]))) for r in rows]}
        links = next_links(req, path, rows, limit)
        if links:
            body["servers_links"] = links
        return body


class ServerCollection(_Servers):
    """``GET /v2.1/servers`` (id, name, links) and ``POST /v2.1/servers``."""

    @falcon.before(policy.require("os_compute_api:servers:index"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = self._list(req, "servers", lambda row, _, __: brief_view(req, row))

    @falcon.before(policy.require("os_compute_api:servers:create"))
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        actor: Actor = req.context.actor
        body = read_json(req, self._create_validator, self._max_body)
        server = body["server"]
        _check_create_version(req, server)
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
            user_data=store_user_data(self._user_data, server.get("user_data")),
            networks=_networks(server.get("networks", "auto")),
            tags=tuple(server.get("tags", ())),
            count=max_count,
            reservation_id=reservation_id,
            any_image=auth.is_admin(actor),
            any_flavor=auth.is_admin(actor),
            group=body.get("os:scheduler_hints", {}).get("group"),
            requested_host=requested_destination(req, server),
            **_described(req, server),
        )
        if command.hostname is not None and max_count > 1:
            raise BadRequest("Unable to set hostname for more than one server; use max_count 1.")
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
        resp.media = {"server": {"id": result.id, "links": links, "OS-DCF:diskConfig": command.disk_config}}

    def _check_zone(self, req: falcon.Request, zone: str | None) -> None:
        check_zone(self._read, req, zone)


def check_zone(read: ReadModel, req: falcon.Request, zone: str | None) -> None:
    """A zone must be one that hosts are in, or that a host aggregate defines (Nova: 400)."""
    if zone is None:
        return
    with read.connection(req) as conn:
        zones = admin_queries.availability_zones(conn, DEFAULT_ZONE)
    if zone not in zones:
        raise BadRequest("The requested availability zone is not available")


def requested_destination(req: falcon.Request, body: dict[str, Any]) -> str | None:
    """2.74's ``host``/``hypervisor_hostname`` (a Stratus host is its own node): admins only."""
    refuse_before(req, body, {"host": 74, "hypervisor_hostname": 74})
    host, node = body.get("host"), body.get("hypervisor_hostname")
    if host is None and node is None:
        return None
    auth.require_admin(req.context.actor, "compute:servers:create:requested_destination")
    if host is not None and node is not None and host != node:
        raise BadRequest(f"Compute host {host} has no node {node}.")
    return str(host or node)


class ServerDetailCollection(_Servers):
    """``GET /v2.1/servers/detail``: every field of each server."""

    @falcon.before(policy.require("os_compute_api:servers:detail"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        actor = req.context.actor
        alive: dict[str, bool] = {}
        known = self._as_known(alive)
        resp.media = self._list(
            req,
            "servers/detail",
            lambda row, extras, group: detail_view(req, known(row), actor, extras, group=group),
            alive,
        )


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
            extras = self._extras(req, conn, [row])
            group = _groups(req, conn, [row]).get(server_id)
        view = detail_view(req, self._as_known({})(row), actor, extras, group=group, single=True)
        resp.media = {"server": view}

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
        refuse_before(req, changes, {"description": 19, "pinned_availability_zone": 104})
        pin = changes.pop("pinned_availability_zone", ...)
        command = UpdateServer(
            server_id,
            auth.server_scope(actor),
            name=changes.get("name"),
            description=changes.get("description"),
            clear_description="description" in changes and changes["description"] is None,
            fields=_described(req, changes, defaults=False),
        )
        with acting(req.context.command):
            result = ServerFieldHandlers(self._handlers).update_server(command)
            if pin is not ...:  # 2.104: unpin (null), or pin again to the zone it is in (else 409)
                pinned = PinZone(server_id, auth.server_scope(actor), pin)
                result = max(
                    result, LifecycleHandlers(self._handlers).pin_zone(pinned), key=lambda r: r.position
                )
        resp.set_header(POSITION_HEADER, str(result.position))
        with self._read.connection(req) as conn:
            if not queries.wait_for_position(conn, result.position, UPDATE_READ_WAIT_SECONDS):
                raise ReadModelBehind(result.position, UPDATE_READ_WAIT_SECONDS)
            row = queries.get_server(conn, server_id, auth.server_scope(actor))
            if row is None or row["deleted"]:
                raise ItemNotFound(f"Instance {server_id} could not be found.")
            extras = self._extras(req, conn, [row])
            group = _groups(req, conn, [row]).get(server_id)
        req.context.written_project = row["project_id"]  # its project's users read it at once
        view = detail_view(req, row, actor, extras, group=group, single=True, basic=True)
        resp.media = {"server": view}

    @falcon.before(policy.require("os_compute_api:servers:delete"))
    def on_delete(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        actor: Actor = req.context.actor
        with acting(req.context.command):
            result = self._handlers.delete_server(DeleteServer(server_id, auth.server_scope(actor)))
        if auth.is_admin(actor):  # the server's project's users read its deletion at once
            req.context.written_project = self._handlers.instance(server_id, deleted_too=True).project_id
        resp.status = falcon.HTTP_204
        resp.set_header(POSITION_HEADER, str(result.position))


_HOSTNAME_290 = re.compile(r"^[a-zA-Z0-9]+[a-zA-Z0-9-]*[a-zA-Z0-9]+$")
_DESCRIBED = {"accessIPv4": "access_ip_v4", "accessIPv6": "access_ip_v6", "OS-DCF:diskConfig": "disk_config"}


def _described(req: falcon.Request, body: dict[str, Any], *, defaults: bool = True) -> dict[str, Any]:
    """The access addresses, disk configuration and hostname a create or update carries, as the
    command's fields (the IPv6 address canonical, as Nova stores it); with ``defaults``, all of them."""
    refuse_before(req, body, {"hostname": 90})
    fields: dict[str, Any] = {}
    for key, name in _DESCRIBED.items():
        if key in body:
            fields[name] = str(ipaddress.ip_address(body[key])) if name == "access_ip_v6" else body[key]
    hostname = body.get("hostname")
    if hostname is not None:
        if not at_least(req, 94) and (len(hostname) > 63 or not _HOSTNAME_290.match(hostname)):
            raise BadRequest(
                f"Invalid input for field/attribute hostname. Value: {hostname[:64]}. "
                "Before microversion 2.94 a hostname is 2 to 63 letters, digits and dashes "
                "(2.94 allows an FQDN)."
            )
        fields["hostname"] = hostname
    if defaults:
        fields = {
            "access_ip_v4": None,
            "access_ip_v6": None,
            "disk_config": DISK_CONFIG,
            "hostname": None,
            **fields,
        }
    return fields


def store_user_data(blobs: BlobStore | None, encoded: str | None) -> dict[str, Any] | None:
    """Decode and file user data; commands carry only where it is filed (it may hold secrets)."""
    if encoded is None:
        return None
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        # Never echo the value: user data often carries secrets.
        raise BadRequest(
            "Invalid input for field/attribute user_data. The value is not valid base64."
        ) from None
    if blobs is None:
        raise BadRequest("This deployment does not accept user_data.")
    try:
        blob = blobs.put(data)
    except StoreError as e:
        raise ServiceUnavailable("User data cannot be stored right now; retry.") from e
    return {"id": blob, "size": len(data)}


def described(req: falcon.Request, body: dict[str, Any]) -> dict[str, Any]:
    """An update's or a rebuild's described fields (``_described`` without defaults)."""
    return _described(req, body, defaults=False)


def _groups(req: falcon.Request, conn: Any, rows: list[dict[str, Any]]) -> dict[str, str]:
    """The server groups of ``rows`` when the microversion shows them (2.71, 2.100), else none."""
    if not at_least(req, 71):
        return {}
    return admin_queries.groups_of(conn, [str(r["id"]) for r in rows])


def refuse_before(
    req: falcon.Request, body: dict[str, Any], since: dict[str, int], name: str = "server"
) -> None:
    """A field a later microversion introduced is unknown at the requested one (Nova: 400)."""
    for field, minor in since.items():
        if field in body and not at_least(req, minor):
            raise BadRequest(
                f"Invalid input for field/attribute {name}. Additional properties are not allowed "
                f"('{field}' was unexpected; it needs microversion 2.{minor})"
            )


def _check_create_version(req: falcon.Request, server: dict[str, Any]) -> None:
    """What a create may carry at its microversion: ``description`` from 2.19, ``tags`` from 2.52,
    and from 2.37 ``networks`` is required and may be ``auto`` or ``none`` (before: a list)."""
    refuse_before(req, server, {"description": 19, "tags": 52})
    networks = server.get("networks")
    if at_least(req, 37):
        if networks is None:
            raise BadRequest("Invalid input for field/attribute server. 'networks' is a required property")
    elif isinstance(networks, str):
        raise BadRequest(
            f"Invalid input for field/attribute networks. Value: {networks[:16]}. "
            f"'{networks[:16]}' is not of type 'array' (auto and none need microversion 2.37)"
        )


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


# Nova's list query parameters (its ``index_query``), by the microversion that added them; unknown
# ones are ignored before 2.75 and refused from it.
_LIST_PARAMS: dict[int, frozenset[str]] = {
    1: frozenset((
        "user_id", "project_id", "tenant_id", "launch_index", "image_ref", "image", "kernel_id", "ramdisk_id",
        "hostname", "key_name", "power_state", "vm_state", "task_state", "host", "node", "flavor",
        "reservation_id", "launched_at", "terminated_at", "availability_zone", "name", "display_name",
        "description", "display_description", "locked_by", "uuid", "root_device_name", "config_drive",
        "access_ip_v4", "access_ip_v6", "auto_disk_config", "progress", "sort_key", "sort_dir", "all_tenants",
        "soft_deleted", "deleted", "status", "changes-since", "ip", "ip6", "created_at", "limit", "marker",
        "block_device_mapping", "services", "metadata", "system_metadata", "info_cache", "security_groups",
        "pci_devices",
    )),
    26: frozenset(("tags", "tags-any", "not-tags", "not-tags-any")),
    66: frozenset(("changes-before",)),
    73: frozenset(("locked",)),
}  # fmt: skip
# Filters on joined tables: Nova refuses them (400) at every version.
_JOINED = ("block_device_mapping", "services", "metadata", "system_metadata", "info_cache", "security_groups",
           "pci_devices")  # fmt: skip
# What a member may filter on (Nova removes the others for non-admins); from 2.83 also these.
_MEMBER_FILTERS = frozenset((
    "reservation_id", "name", "display_name", "status", "image", "image_ref", "flavor", "ip", "changes-since",
    "changes-before", "ip6", "tags", "tags-any", "not-tags", "not-tags-any", "locked", "all_tenants",
))  # fmt: skip
_MEMBER_FILTERS_283 = frozenset((
    "availability_zone", "config_drive", "key_name", "created_at", "launched_at", "terminated_at",
    "power_state", "task_state", "vm_state", "progress", "user_id",
))  # fmt: skip


def _check_list_params(req: falcon.Request) -> None:
    joined = [p for p in _JOINED if p in req.params]
    if joined:
        raise BadRequest(f"Invalid filter field: {joined[0]}.")
    if not at_least(req, 75):
        return
    known = set().union(*(names for minor, names in _LIST_PARAMS.items() if at_least(req, minor)))
    unknown = sorted(set(req.params) - known)
    if unknown:
        raise BadRequest(
            f"Invalid input for query parameters {unknown[0][:64]}. Additional properties are not allowed."
        )


# Sort keys Nova ignores rather than refuse (its SERVER_LIST_IGNORE_SORT_KEY); locked counts from 2.73.
_IGNORED_SORT_KEYS = frozenset((
    "architecture", "cell_name", "cleaned", "default_ephemeral_device", "default_swap_device", "deleted",
    "deleted_at", "disable_terminate", "ephemeral_gb", "ephemeral_key_uuid", "id", "key_data", "launched_on",
    "memory_mb", "os_type", "reservation_id", "root_gb", "shutdown_terminate", "user_data", "vcpus",
    "vm_mode",
))  # fmt: skip


def _sort(req: falcon.Request, admin: bool) -> list[tuple[str, bool]]:
    """Nova's ``sort_key``/``sort_dir`` pairs (repeatable; a key without a direction sorts
    descending); ``host`` and ``node`` are admins' keys (403), an unknown key a 400."""
    keys = req.get_param_as_list("sort_key") or []
    dirs = [d.lower() for d in req.get_param_as_list("sort_dir") or []]
    sort: list[tuple[str, bool]] = []
    for i, key in enumerate(keys):
        direction = dirs[i] if i < len(dirs) else "desc"
        if direction not in ("asc", "desc"):
            raise BadRequest(f"Invalid input for query parameters sort_dir. Value: {direction[:16]}.")
        if key in _IGNORED_SORT_KEYS or (key == "locked" and not at_least(req, 73)):
            continue
        if key not in queries.SORT_KEYS:
            raise BadRequest(f"Invalid input for query parameters sort_key. Value: {key[:64]}.")
        if key in ("host", "node") and not admin:
            raise Forbidden(f"Only administrators can sort servers by {key}")
        sort.append((key, direction == "desc"))
    return sort


def _column_filters(req: falcon.Request, admin: bool) -> dict[str, Any]:
    """Nova's filters on a server's columns, as far as the caller may use them (Nova drops the
    others for members: before 2.83 nearly all of them)."""
    allowed = None if admin else _MEMBER_FILTERS | (_MEMBER_FILTERS_283 if at_least(req, 83) else frozenset())
    given = {k: v for k, v in req.params.items() if isinstance(v, str)}
    equal = {k: given[k] for k in queries.LIST_EQUAL if k in given}
    matching = {k: given[k] for k in queries.LIST_MATCHING if k in given}
    if "display_description" in given and "description" not in matching:
        matching["description"] = given["display_description"]
    if allowed is not None:
        equal = {k: v for k, v in equal.items() if k in allowed}
        matching = {k: v for k, v in matching.items() if k in allowed}
    if "power_state" in matching and not matching["power_state"].isdigit():
        names = {"nostate": 0, "running": 1, "paused": 3, "shutdown": 4, "crashed": 6, "suspended": 7}
        matching["power_state"] = str(names.get(matching["power_state"].lower(), -1))
    filters: dict[str, Any] = {"equal": equal, "matching": matching, "sort": _sort(req, admin)}
    before = time_param(req, "changes-before") if at_least(req, 66) else None
    if before is not None:
        filters["changes_before"] = before
    return filters


def _field_filters(req: falcon.Request) -> dict[str, Any]:
    """Nova's list filters on a server's own fields: ``changes-since``, ``tags``, ``ip``, reservations."""
    filters: dict[str, Any] = {}
    since = time_param(req, "changes-since")
    if since is not None:
        filters["changes_since"] = since
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
    for param in ("flavor", "image"):  # Nova takes an id or a link ending in it
        value = req.get_param(param) or (req.get_param("image_ref") if param == "image" else None)
        if value:
            filters[param] = _id_from_ref(value)
    locked = req.get_param("locked")
    if locked is not None and at_least(req, 73):
        if locked.strip().lower() not in (*_TRUE, *_FALSE):
            raise BadRequest(f"Invalid input for query parameters locked. Value: {locked[:16]}.")
        filters["locked"] = locked.strip().lower() in _TRUE
    return filters
