"""``POST /v2.1/servers/{id}/action`` and ``/v2.1/servers/{id}/os-instance-actions``.

Power actions (``os-start``, ``os-stop``, ``reboot``, ``pause``, ``unpause``, ``suspend``,
``resume``) and ``lock``/``unlock`` are commands on the log: 202 at once, the hypervisor worker of
the server's host carries the power action out afterwards. An action illegal in the server's
current state is refused at once with Nova's 409 (``Cannot 'stop' instance <id> while it is in
vm_state stopped``); a locked server refuses everyone but admins (``Instance <id> is locked``).

``os-getConsoleOutput`` asks the server's host over core NATS (``stratus.hostrpc``): the answer is
the tail of the guest's serial console log, read by the worker from its disk.

Instance actions are folded from the server's events on the log (``projections.instance_actions``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import falcon
from jsonschema import Draft202012Validator

from api import auth, policy, server_views, servers
from api import error_codes as codes
from api.body import load_validators, read_json
from api.consoles import remote as remote_consoles
from api.consoles.remote import ConsoleIssuer
from api.errors import ApiError, BadRequest, ItemNotFound, ReadModelBehind
from api.links import next_links, page_params, time_param
from api.metadata.passwords import PasswordStore
from api.readmodel import POSITION_HEADER, ReadModel
from api.server_password import ServerPassword, forget_on_delete
from api.versions import at_least
from commands import loaders
from commands.bus import MessageBus
from commands.errors import ConflictingState, InvalidState, NotFound
from commands.servers.actions import (
    LockServer,
    RebuildServer,
    RequestAction,
    ResetServerState,
    UnlockServer,
    UnshelveServer,
)
from commands.servers.delete import DeleteServer
from commands.servers.moves import ConfirmResize, MigrateServer, ResizeServer, RevertResize
from projections import admin_queries, instance_actions, queries
from projections.queries import decode_json
from stratus import hostrpc
from stratus.audit import history
from stratus.context import Actor, acting
from stratus.imagestore import BlobStore
from stratus.liveness import SCHEDULER_BINARY, LivenessReader

# The body's member → our action key (``reboot`` picks soft or hard from its ``type``).
_POWER_ACTIONS = {
    "shelve": "shelve",
    "os-start": "start",
    "os-stop": "stop",
    "pause": "pause",
    "unpause": "unpause",
    "suspend": "suspend",
    "resume": "resume",
}
CONSOLE_TIMEOUT = 5.0
REBUILD_READ_WAIT_SECONDS = 5.0  # how long a rebuild waits for the read model to show its answer


class ConsoleNotAvailable(ApiError, error=codes.CONSOLE_NOT_AVAILABLE):
    """The server's host did not answer for its console output (404)."""


class ServerAction:
    """``POST /v2.1/servers/{id}/action``: every server action, by the body's one key."""

    def __init__(
        self,
        bus: MessageBus,
        validators: dict[str, Draft202012Validator],
        max_body_bytes: int,
        *,
        read: ReadModel | None = None,
        console_timeout: float = CONSOLE_TIMEOUT,
        user_data: BlobStore | None = None,
        host_rpc: hostrpc.HostRPC,
        consoles: ConsoleIssuer | None = None,
        passwords: PasswordStore | None = None,
    ) -> None:
        """``read``: the read model a rebuild's answer (the server, as Nova answers) is read from;
        ``user_data``: where a rebuild's new user data is filed; ``host_rpc``: how a console's output
        is asked of its host; ``consoles``: what issues the remote consoles' URLs (the older
        ``os-get*Console`` actions; without it they are unknown actions); ``passwords``: the posted
        passwords a ``forceDelete`` removes."""
        self._passwords = passwords
        self._bus = bus
        self._consoles = consoles
        self._host_rpc = host_rpc
        self._read = read
        self._user_data = user_data
        self._validator = validators["servers.action"]
        self._max_body = max_body_bytes
        self._console_timeout = console_timeout
        self._actions: dict[str, Callable[[falcon.Request, falcon.Response, str, Any], None]] = {
            **{name: self._power for name in _POWER_ACTIONS},
            "reboot": self._power,
            "lock": self._lock,
            "unlock": self._unlock,
            "os-getConsoleOutput": self._console_output,
            "rebuild": self._rebuild,
            "unshelve": self._unshelve,
            "shelveOffload": self._shelve_offload,
            "resize": self._resize,
            "migrate": self._migrate,
            "confirmResize": self._confirm_resize,
            "revertResize": self._revert_resize,
            "os-resetState": self._reset_state,
            "restore": self._restore,
            "forceDelete": self._force_delete,
        }
        if consoles is not None:
            self._actions.update(dict.fromkeys(remote_consoles.ACTIONS, self._remote_console))

    @falcon.before(policy.require("os_compute_api:servers:action"))
    def on_post(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        body = read_json(req, self._validator, self._max_body)
        ((name, value),) = body.items()
        act = self._actions.get(name)
        if act is None:
            raise BadRequest(f"There is no such action: {name[:100]}")
        act(req, resp, server_id, {"name": name, "value": value})
        if auth.is_admin(req.context.actor):  # its project's users read an admin's action at once
            server = loaders.instance(self._bus.uow, server_id, deleted_too=True)
            req.context.written_project = server.project_id

    def _handle(self, req: falcon.Request, command: object) -> Any:
        """Run ``command`` as the request's caller; the use case's result."""
        with acting(req.context.command):
            return self._bus.handle(command)

    def _power(self, req: falcon.Request, resp: falcon.Response, server_id: str, body: Any) -> None:
        actor: Actor = req.context.actor
        if body["name"] == "reboot":
            key = "reboot_hard" if body["value"]["type"].upper() == "HARD" else "reboot"
        else:
            key = _POWER_ACTIONS[body["name"]]
        command = RequestAction(server_id, auth.server_scope(actor), key, admin=auth.is_admin(actor))
        result = self._handle(req, command)
        _accepted(resp, result.position)

    def _reset_state(self, req: falcon.Request, resp: falcon.Response, server_id: str, body: Any) -> None:
        """Nova's os-resetState (admins): the server ``active`` or ``error``, its task dropped."""
        auth.require_admin(req.context.actor, "os_compute_api:os-admin-actions:reset_state")
        loaders.instance(self._bus.uow, server_id)  # 404 first, as Nova
        result = self._handle(req, ResetServerState(server_id, body["value"]["state"]))
        _accepted(resp, result.position)

    def _restore(self, req: falcon.Request, resp: falcon.Response, server_id: str, body: Any) -> None:
        """Stratus deletes at once (Nova's ``reclaim_instance_interval = 0``): no server is ever
        SOFT_DELETED, so a restore is Nova's 409 for a server in any other state."""
        inst = loaders.instance(self._bus.uow, server_id, auth.server_scope(req.context.actor))
        raise InvalidState(f"Cannot 'restore' instance {server_id} while it is in vm_state {inst.vm_state}")

    def _force_delete(self, req: falcon.Request, resp: falcon.Response, server_id: str, body: Any) -> None:
        """Nova's forceDelete: the delete, at once, in any state (there is no soft delete to skip)."""
        actor: Actor = req.context.actor
        with acting(req.context.command):
            result = self._bus.handle(DeleteServer(server_id, auth.server_scope(actor)))
        forget_on_delete(self._passwords, server_id)
        _accepted(resp, result.position)

    def _lock(self, req: falcon.Request, resp: falcon.Response, server_id: str, body: Any) -> None:
        actor: Actor = req.context.actor
        reason = (body["value"] or {}).get("locked_reason")
        if reason is not None and not at_least(req, 73):
            raise BadRequest(
                "Invalid input for field/attribute lock. Additional properties are not allowed "
                "('locked_reason' was unexpected; it needs microversion 2.73)"
            )
        command = LockServer(server_id, auth.server_scope(actor), admin=auth.is_admin(actor), reason=reason)
        result = self._handle(req, command)
        _accepted(resp, result.position)

    def _unlock(self, req: falcon.Request, resp: falcon.Response, server_id: str, body: Any) -> None:
        actor: Actor = req.context.actor
        command = UnlockServer(server_id, auth.server_scope(actor), admin=auth.is_admin(actor))
        result = self._handle(req, command)
        _accepted(resp, result.position)

    def _rebuild(self, req: falcon.Request, resp: falcon.Response, server_id: str, body: Any) -> None:
        """202 with the server (status REBUILD, the new image), as Nova answers; the host redefines
        the guest from the new image afterwards."""
        actor: Actor = req.context.actor
        scope = auth.server_scope(actor)
        loaders.instance(self._bus.uow, server_id, scope)  # 404 for a server the caller cannot see
        spec = body["value"]
        image_ref = str(spec["imageRef"]).rstrip("/").rsplit("/", 1)[-1]
        servers.refuse_before(req, spec, {"description": 19, "key_name": 54, "user_data": 57}, "rebuild")
        command = RebuildServer(
            server_id,
            scope,
            image_ref,
            admin=auth.is_admin(actor),
            name=spec.get("name"),
            description=spec.get("description"),
            clear_description="description" in spec and spec["description"] is None,
            metadata=dict(spec["metadata"]) if "metadata" in spec else None,
            fields=servers.described(req, spec),
            key_name=(spec["key_name"] or "") if "key_name" in spec else None,
            user_data=(servers.store_user_data(self._user_data, spec["user_data"]),)
            if "user_data" in spec
            else None,
            user_id=actor.user_id,
        )
        try:
            result = self._handle(req, command)
        except NotFound as e:  # the image: the request's fault (Nova: 400)
            raise BadRequest(e.message) from e
        _accepted(resp, result.position)
        if self._read is None:
            return
        with self._read.connection(req) as conn:
            if not queries.wait_for_position(conn, result.position, REBUILD_READ_WAIT_SECONDS):
                raise ReadModelBehind(result.position, REBUILD_READ_WAIT_SECONDS)
            row = queries.server_view_row(conn, server_id, scope)
            group = admin_queries.groups_of(conn, [server_id]).get(server_id) if row is not None else None
        if row is not None:
            view = server_views.server_view(req, actor, single=True, basic=True)(row, group)
            # a rebuild's answer also has the key pair from 2.54 and the user data from 2.57
            if at_least(req, 54):
                view["key_name"] = row.key_name
            if at_least(req, 57):  # in place of the admins' OS-EXT-SRV-ATTR:user_data
                view.pop("OS-EXT-SRV-ATTR:user_data", None)
                view["user_data"] = server_views.read_user_data(self._user_data, decode_json(row.user_data))
            resp.media = {"server": view}

    def _unshelve(self, req: falcon.Request, resp: falcon.Response, server_id: str, body: Any) -> None:
        """Unshelve; from 2.77 into a zone, from 2.91 unpinned (null) or onto a host (admins)."""
        actor: Actor = req.context.actor
        spec = body["value"] or {}
        servers.refuse_before(req, spec, {"availability_zone": 77, "host": 91}, "unshelve")
        zone: tuple[str | None] | None = None
        if "availability_zone" in spec:
            if spec["availability_zone"] is None and not at_least(req, 91):
                raise BadRequest(
                    "Invalid input for field/attribute availability_zone: null needs microversion 2.91"
                )
            if self._read is not None:
                servers.check_zone(self._read, req, spec["availability_zone"])
            zone = (spec["availability_zone"],)
        if "host" in spec:
            auth.require_admin(actor, "os_compute_api:os-shelve:unshelve_to_host")
        command = UnshelveServer(
            server_id, auth.server_scope(actor), admin=auth.is_admin(actor), zone=zone, host=spec.get("host")
        )
        result = self._handle(req, command)
        _accepted(resp, result.position)

    def _shelve_offload(self, req: falcon.Request, resp: falcon.Response, server_id: str, body: Any) -> None:
        """Nova's shelveOffload of a SHELVED server. Stratus offloads at shelve (Nova's
        ``shelved_offload_time = 0``), so a server is never left SHELVED: Nova's 409 for any other state."""
        actor: Actor = req.context.actor
        auth.require_admin(actor, "os_compute_api:os-shelve:shelve_offload")
        loaders.instance(self._bus.uow, server_id).request_shelve_offload()

    # -- resize and cold migration (commands.servers.moves) -----------------------------------------
    def _resize(self, req: falcon.Request, resp: falcon.Response, server_id: str, body: Any) -> None:
        actor: Actor = req.context.actor
        scope = auth.server_scope(actor)
        loaders.instance(self._bus.uow, server_id, scope)  # 404 for a server the caller cannot see
        flavor_ref = str(body["value"]["flavorRef"]).rstrip("/").rsplit("/", 1)[-1]
        command = ResizeServer(server_id, scope, flavor_ref, admin=auth.is_admin(actor))
        try:
            result = self._handle(req, command)
        except NotFound as e:  # the flavor: the request's fault (Nova: 400)
            raise BadRequest(e.message) from e
        _accepted(resp, result.position)

    def _migrate(self, req: falcon.Request, resp: falcon.Response, server_id: str, body: Any) -> None:
        actor: Actor = req.context.actor
        auth.require_admin(actor, "os_compute_api:os-migrate-server:migrate")
        host = (body["value"] or {}).get("host")
        if "host" in (body["value"] or {}) and not at_least(req, 56):
            raise BadRequest(
                "Invalid input for field/attribute migrate. Additional properties are not allowed "
                "('host' was unexpected; it needs microversion 2.56)"
            )
        loaders.instance(self._bus.uow, server_id)
        try:
            result = self._handle(req, MigrateServer(server_id, host))
        except NotFound as e:  # the target host (Nova: 400)
            raise BadRequest(e.message) from e
        _accepted(resp, result.position)

    def _confirm_resize(self, req: falcon.Request, resp: falcon.Response, server_id: str, body: Any) -> None:
        actor: Actor = req.context.actor
        command = ConfirmResize(server_id, auth.server_scope(actor), admin=auth.is_admin(actor))
        result = self._handle(req, command)
        resp.status = falcon.HTTP_204
        resp.set_header(POSITION_HEADER, str(result.position))

    def _revert_resize(self, req: falcon.Request, resp: falcon.Response, server_id: str, body: Any) -> None:
        actor: Actor = req.context.actor
        command = RevertResize(server_id, auth.server_scope(actor), admin=auth.is_admin(actor))
        result = self._handle(req, command)
        _accepted(resp, result.position)

    def _console_output(self, req: falcon.Request, resp: falcon.Response, server_id: str, body: Any) -> None:
        actor: Actor = req.context.actor
        inst = loaders.instance(self._bus.uow, server_id, auth.server_scope(actor))
        if inst.host is None:
            raise ConflictingState(f"Instance {server_id} is not ready")
        raw = (body["value"] or {}).get("length")
        length = int(raw) if raw is not None else None
        question = {"server_id": server_id, "length": None if length in (None, -1) else length}
        try:
            answer = self._host_rpc.ask(inst.host, hostrpc.CONSOLE, question, self._console_timeout)
        except hostrpc.HostUnavailable as e:
            raise ConflictingState(f"Instance {server_id} is not ready: {e}") from e
        except hostrpc.HostRefused as e:
            if e.code == hostrpc.NOT_FOUND:
                raise ConsoleNotAvailable("Guest does not have a console available.") from e
            raise ConflictingState(f"Instance {server_id} is not ready: {e.message}") from e
        resp.media = {"output": answer["output"]}

    def _remote_console(self, req: falcon.Request, resp: falcon.Response, server_id: str, body: Any) -> None:
        assert self._consoles is not None
        name, value = body["name"], body["value"]
        resp.media = remote_consoles.answer_action(self._consoles, req, server_id, name, value)


def host_liveness(heartbeats: LivenessReader, down_after: float) -> Callable[[list[str]], dict[str, bool]]:
    """Which hosts are alive, from their heartbeats beside the log (``stratus.liveness``)."""
    return lambda hosts: heartbeats.up(hosts, down_after)


def scheduler_beats(heartbeats: LivenessReader, down_after: float) -> Callable[[], list[dict[str, Any]]]:
    """The schedulers that beat, each up or down by the deployment's ``host_down_after_seconds``."""
    return lambda: heartbeats.services(SCHEDULER_BINARY, down_after)


def add_routes(
    app: falcon.App,
    bus: MessageBus,
    max_body_bytes: int,
    read: ReadModel | None = None,
    user_data: BlobStore | None = None,
    *,
    host_rpc: hostrpc.HostRPC,
    log: history.LogReader,
    consoles: ConsoleIssuer | None = None,
    passwords: PasswordStore | None = None,
) -> None:
    """The action and instance-action routes of ``/v2.1/servers/{server_id}``; ``log``: where a
    server's actions are read from (its events); ``passwords``: the guests' posted passwords
    (``os-server-password``; a ``forceDelete`` removes the server's)."""
    validators = load_validators(("servers.action",))
    action = ServerAction(
        bus,
        validators,
        max_body_bytes,
        read=read,
        user_data=user_data,
        host_rpc=host_rpc,
        consoles=consoles,
        passwords=passwords,
    )
    app.add_route("/v2.1/servers/{server_id}/action", action)
    if consoles is not None:
        remote = remote_consoles.RemoteConsoles(consoles, max_body_bytes)
        app.add_route("/v2.1/servers/{server_id}/remote-consoles", remote)
    if passwords is not None:
        app.add_route("/v2.1/servers/{server_id}/os-server-password", ServerPassword(bus.uow, passwords))
    actions = (bus, log)
    app.add_route("/v2.1/servers/{server_id}/os-instance-actions", InstanceActionCollection(*actions))
    app.add_route("/v2.1/servers/{server_id}/os-instance-actions/{request_id}", InstanceActionItem(*actions))


def _accepted(resp: falcon.Response, position: int) -> None:
    resp.status = falcon.HTTP_202
    resp.set_header(POSITION_HEADER, str(position))


# -- os-instance-actions --------------------------------------------------------------------------
def _action_view(
    req: falcon.Request, action: instance_actions.InstanceAction, server_id: str
) -> dict[str, Any]:
    view = {
        "action": action.action,
        "instance_uuid": server_id,
        "message": action.message,
        "project_id": action.project_id,
        "request_id": action.request_id,
        "start_time": action.start_time,
        "user_id": action.user_id,
    }
    if at_least(req, 58):
        view["updated_at"] = action.updated_at
    return view


def _event_view(
    req: falcon.Request, event: instance_actions.ActionEvent, admin: bool, project_id: str
) -> dict[str, Any]:
    """An action's event: the traceback and (2.62) the host for admins, the obfuscated hostId for
    everyone (2.62), the fault's message (2.84)."""
    view: dict[str, Any] = {
        "event": event.event,
        "start_time": event.start_time,
        "finish_time": event.finish_time,
        "result": event.result,
    }
    if admin:
        view["traceback"] = event.traceback
    if at_least(req, 62):
        if admin:
            view["host"] = event.host or ""
        view["hostId"] = server_views.host_id(project_id, event.host)
    if at_least(req, 84):
        view["details"] = event.message
    return view


class _Actions:
    def __init__(self, bus: MessageBus, log: history.LogReader) -> None:
        self._bus = bus
        self._reader = log

    def _actions(
        self, req: falcon.Request, server_id: str
    ) -> tuple[str, list[instance_actions.InstanceAction]]:
        """The server's project and its actions, oldest first."""
        # 404 for another project's server; from 2.21 a deleted server's actions are still shown
        scope = auth.server_scope(req.context.actor)
        inst = loaders.instance(self._bus.uow, server_id, scope, deleted_too=at_least(req, 21))
        entries = history.all_entries(self._reader, UUID(server_id))
        return inst.project_id, instance_actions.fold([e.envelope for e in entries])


class InstanceActionCollection(_Actions):
    """``GET /v2.1/servers/{id}/os-instance-actions``: newest first, as Nova lists them."""

    @falcon.before(policy.require("os_compute_api:os-instance-actions:list"))
    def on_get(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        """Newest first; from 2.58 paged (``limit``, ``marker``: a request id) and filtered by
        ``changes-since`` (2.66 ``changes-before``) on the action's last update."""
        actions = list(reversed(self._actions(req, server_id)[1]))
        limit: int | None = None
        if at_least(req, 58):
            limit, marker = page_params(req)
            if marker is not None:
                ids = [a.request_id for a in actions]
                if marker not in ids:
                    raise BadRequest(f"Marker {marker[:64]} could not be found.")
                actions = actions[ids.index(marker) + 1 :]
            since = time_param(req, "changes-since")
            before = time_param(req, "changes-before") if at_least(req, 66) else None
            actions = [a for a in actions if _within(a.updated_at, since, before)][:limit]
        body: dict[str, Any] = {"instanceActions": [_action_view(req, a, server_id) for a in actions]}
        links = next_links(
            req,
            f"servers/{server_id}/os-instance-actions",
            [{"id": a.request_id} for a in actions],
            limit or 0,
        )
        if links:
            body["links"] = links
        resp.media = body


class InstanceActionItem(_Actions):
    """``GET /v2.1/servers/{id}/os-instance-actions/{request_id}``: one action with its events."""

    @falcon.before(policy.require("os_compute_api:os-instance-actions:show"))
    def on_get(self, req: falcon.Request, resp: falcon.Response, server_id: str, request_id: str) -> None:
        actor: Actor = req.context.actor
        project_id, actions = self._actions(req, server_id)
        found = [a for a in actions if a.request_id == request_id]
        if not found:
            raise ItemNotFound(f"Action for request_id {request_id} on instance {server_id} not found")
        action = found[-1]
        view = _action_view(req, action, server_id)
        admin = auth.is_admin(actor)
        view["events"] = [_event_view(req, e, admin, project_id) for e in reversed(action.events)]
        resp.media = {"instanceAction": view}


def _within(updated_at: str, since: datetime | None, before: datetime | None) -> bool:
    when = datetime.fromisoformat(updated_at).replace(tzinfo=UTC)
    return (since is None or when >= since) and (before is None or when <= before)
