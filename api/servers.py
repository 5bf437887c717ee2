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
import ipaddress
import logging
import re
import uuid
from collections.abc import Callable
from typing import Any

import falcon
from jsonschema import Draft202012Validator

from api import auth, policy, server_list
from api.body import as_bool, read_json
from api.errors import BadRequest, ItemNotFound, ReadModelBehind, ServiceUnavailable
from api.links import id_from_ref, next_links, page_params, resource_links
from api.metadata.passwords import PasswordStore
from api.readmodel import POSITION_HEADER, ReadModel
from api.server_list import TRUE
from api.server_password import forget_on_delete
from api.server_views import (
    DISK_CONFIG,
    ServerExtras,
    ServerView,
    brief_view_of,
    server_view,
)
from api.versions import at_least
from commands import loaders
from commands.bus import MessageBus
from commands.errors import NotFound
from commands.host_aggregate import DEFAULT_ZONE
from commands.servers.actions import PinZone
from commands.servers.create import CreateServer
from commands.servers.delete import DeleteServer
from commands.servers.fields import UpdateServer
from projections import admin_queries, queries
from projections.queries import ServerRow
from stratus.context import Actor, acting
from stratus.imagestore import BlobStore, StoreError

log = logging.getLogger("stratus.api")

IDEMPOTENCY_HEADER = "Idempotency-Key"
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


class _Servers:
    def __init__(
        self,
        bus: MessageBus,
        read_model: ReadModel,
        validators: dict[str, Draft202012Validator],
        max_body_bytes: int,
        user_data: BlobStore | None = None,
        *,
        liveness: Callable[[list[str]], dict[str, bool]] | None = None,
        passwords: PasswordStore | None = None,
    ) -> None:
        """``passwords``: the posted passwords a delete removes (``api/server_password.py``)."""
        self._passwords = passwords
        self._liveness = liveness  # which hosts send heartbeats (None: not tracked)
        self._bus = bus
        self._read = read_model
        self._create_validator = validators["servers.create"]
        self._validators = validators
        self._max_body = max_body_bytes
        self._user_data = user_data

    def _down(self, rows: list[ServerRow]) -> frozenset[str]:
        """The hosts of ``rows``' servers that stopped sending heartbeats, asked in one call: their
        guests' power state is unknown (``server_view``'s ``down``), not the last one recorded."""
        hosts = sorted({r.host for r in rows if r.host and not r.deleted})
        if self._liveness is None or not hosts:
            return frozenset()
        alive = self._liveness(hosts)
        return frozenset(host for host in hosts if not alive.get(host, False))

    def _extras(self, req: falcon.Request, conn: Any, rows: list[ServerRow]) -> ServerExtras | None:
        """What the admin-only fields of these rows need (None when the request shows none)."""
        if not (auth.is_admin(req.context.actor) and at_least(req, 3)):
            return None
        hosts = sorted({r.host for r in rows if r.host})
        services = admin_queries.compute_services_of(conn, hosts) if at_least(req, 16) else {}
        return ServerExtras(services, self._liveness, self._user_data)

    def _list(
        self,
        req: falcon.Request,
        path: str,
        view: Callable[
            [list[ServerRow], ServerExtras | None], Callable[[ServerRow, str | None], dict[str, Any]]
        ],
        *,
        detailed: bool = False,
    ) -> Any:
        """A page of servers, each shown by ``view(rows, extras)`` (made once for the page). Only the
        ``detailed`` view shows what the extras (admins' host status, user data) and the servers'
        groups (2.100's scheduler_hints; 2.71's server_groups are a single server's only) are read
        for: the brief one is not given them."""
        actor: Actor = req.context.actor
        admin = auth.is_admin(actor)
        server_list.check_params(req)
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
                **server_list.field_filters(req),
                **server_list.column_filters(req, admin),
            )
            extras = self._extras(req, conn, rows) if detailed else None
            groups = _groups(req, conn, rows) if detailed and at_least(req, 100) else {}
        shown = view(rows, extras)
        servers = [shown(r, groups.get(r.id)) for r in rows] if groups else [shown(r, None) for r in rows]
        body: dict[str, Any] = {"servers": servers}
        links = next_links(req, path, rows, limit)
        if links:
            body["servers_links"] = links
        return body


class ServerCollection(_Servers):
    """``GET /v2.1/servers`` (id, name, links) and ``POST /v2.1/servers``."""

    read_beside_check = auth.READ_BESIDE_CHECK  # a list: read beside its token's check

    @falcon.before(policy.require("os_compute_api:servers:index"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        brief = brief_view_of(req)
        resp.media = self._list(req, "servers", lambda _, __: brief)

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
            flavor_ref=id_from_ref(server["flavorRef"]),
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
            group=scheduler_hints(body).get("group"),
            requested_host=requested_destination(req, server),
            config_drive=as_bool(server.get("config_drive", False)),
            **_described(req, server),
        )
        if command.hostname is not None and max_count > 1:
            raise BadRequest("Unable to set hostname for more than one server; use max_count 1.")
        try:
            with acting(req.context.command):
                result = self._bus.handle(command)
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


def scheduler_hints(body: dict[str, Any]) -> dict[str, Any]:
    """The request's scheduler hints: Nova reads ``os:scheduler_hints``, else
    ``OS-SCH-HNT:scheduler_hints`` (the key openstacksdk and the ``openstack`` CLI send)."""
    hints = body.get("os:scheduler_hints", body.get("OS-SCH-HNT:scheduler_hints"))
    return hints or {}


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

    read_beside_check = auth.READ_BESIDE_CHECK  # a list: read beside its token's check

    @falcon.before(policy.require("os_compute_api:servers:detail"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        actor = req.context.actor

        def shown(rows: list[ServerRow], extras: ServerExtras | None) -> ServerView:
            return server_view(req, actor, extras, down=self._down(rows), listed=True)

        resp.media = self._list(req, "servers/detail", shown, detailed=True)


class ServerItem(_Servers):
    """``GET``, ``PUT`` and ``DELETE /v2.1/servers/{server_id}``."""

    @falcon.before(policy.require("os_compute_api:servers:show"))
    def on_get(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        actor: Actor = req.context.actor
        scope = auth.server_scope(actor)
        with self._read.connection(req) as conn:
            row = queries.server_view_row(conn, server_id, scope)
            if row is None and self._in_log(server_id, scope):
                # Created a moment ago (clients read right after POST): wait for the read model to
                # reach the log's head, once, instead of answering 404 for a server that exists.
                head = self._bus.app.recorder.max_notification_id() or 0
                if queries.wait_for_position(conn, head, UPDATE_READ_WAIT_SECONDS):
                    row = queries.server_view_row(conn, server_id, scope)
            if row is None or row.deleted:
                raise ItemNotFound(f"Instance {server_id} could not be found.")
            extras = self._extras(req, conn, [row])
            group = _groups(req, conn, [row]).get(server_id)
        view = server_view(req, actor, extras, single=True, down=self._down([row]))
        resp.media = {"server": view(row, group)}

    def _in_log(self, server_id: str, scope: str | None) -> bool:
        try:
            loaders.instance(self._bus.uow, server_id, scope)
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
            result = self._bus.handle(command)
            if pin is not ...:  # 2.104: unpin (null), or pin again to the zone it is in (else 409)
                pinned = PinZone(server_id, auth.server_scope(actor), pin)
                result = max(result, self._bus.handle(pinned), key=lambda r: r.position)
        resp.set_header(POSITION_HEADER, str(result.position))
        with self._read.connection(req) as conn:
            if not queries.wait_for_position(conn, result.position, UPDATE_READ_WAIT_SECONDS):
                raise ReadModelBehind(result.position, UPDATE_READ_WAIT_SECONDS)
            row = queries.server_view_row(conn, server_id, auth.server_scope(actor))
            if row is None or row.deleted:
                raise ItemNotFound(f"Instance {server_id} could not be found.")
            extras = self._extras(req, conn, [row])
            group = _groups(req, conn, [row]).get(server_id)
        req.context.written_project = row.project_id  # its project's users read it at once
        view = server_view(req, actor, extras, single=True, basic=True)
        resp.media = {"server": view(row, group)}

    @falcon.before(policy.require("os_compute_api:servers:delete"))
    def on_delete(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        actor: Actor = req.context.actor
        with acting(req.context.command):
            result = self._bus.handle(DeleteServer(server_id, auth.server_scope(actor)))
        forget_on_delete(self._passwords, server_id)
        if auth.is_admin(actor):  # the server's project's users read its deletion at once
            server = loaders.instance(self._bus.uow, server_id, deleted_too=True)
            req.context.written_project = server.project_id
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


def _groups(req: falcon.Request, conn: Any, rows: list[ServerRow]) -> dict[str, str]:
    """The server groups of ``rows`` when the microversion shows them (2.71, 2.100), else none."""
    if not at_least(req, 71):
        return {}
    return admin_queries.groups_of(conn, [r.id for r in rows])


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
    return value == "" or value.strip().lower() in TRUE


def _networks(value: str | list[dict[str, str]]) -> str | tuple[str, ...]:
    if isinstance(value, str):
        return value
    if not value:
        return "auto"  # before 2.37 an empty list means "the networks available", as no list does
    return tuple(item["uuid"].lower() for item in value)


def _image_ref(server: dict[str, Any]) -> str:
    """The image to boot: ``imageRef``, or the image of the one local-boot block device mapping
    (openstackclient sends both; Nova accepts either)."""
    image_ref = id_from_ref(server.get("imageRef", ""))
    for mapping in server.get("block_device_mapping_v2", ()):
        if image_ref and mapping["uuid"] != image_ref:
            raise BadRequest("The block device mapping's image must be the server's imageRef.")
        image_ref = mapping["uuid"]
    return image_ref
