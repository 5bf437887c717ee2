"""``POST /v2.1/servers/{id}/remote-consoles`` (2.6+) and the older actions ``os-getSerialConsole``,
``os-getVNCConsole`` and ``os-getSPICEConsole`` (2.1 to 2.5): a console's URL with a new token.

As Nova: the server must be the caller's (or the caller an admin: 404 otherwise) and on a host
(409 ``Instance <id> is not ready``); a console type Stratus does not open is 400 ``Unavailable
console type <type>.``, a type that is not the protocol's 400 ``Invalid console type <type>``; a
server that is not running is 409. The answer has exactly Nova's keys; the token is in the URL only.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import falcon
from jsonschema import Draft202012Validator

from api import auth, policy
from api.body import load_validators, read_json
from api.consoles.tokens import ConsoleTokens
from api.errors import BadRequest, ItemNotFound
from api.versions import at_least
from commands import loaders
from commands.errors import ConflictingState
from commands.states import PowerState, VmState
from commands.unit_of_work import UnitOfWork
from stratus.config import Settings
from stratus.context import Actor

# (protocol, type) → the console Stratus opens; the relay's kind follows from the type.
OPENED = {("serial", "serial"): "serial", ("vnc", "novnc"): "vnc"}
KIND_OF_TYPE = {"serial": "serial", "novnc": "vnc"}
# Each type's protocol (a type given with another protocol is Nova's ConsoleTypeInvalid).
PROTOCOL_OF_TYPE = {
    "novnc": "vnc", "xvpvnc": "vnc", "spice-html5": "spice", "spice-direct": "spice", "serial": "serial",
    "webmks": "mks",
}  # fmt: skip
SCHEMAS = ("servers.remote_consoles.v2_6", "servers.remote_consoles.v2_8", "servers.remote_consoles.v2_99")


class ConsoleIssuer:
    """Issues console URLs: checks the server as Nova's compute API does, then stores a token."""

    def __init__(self, uow: UnitOfWork, tokens: ConsoleTokens, settings: Settings) -> None:
        self._uow = uow
        self._tokens = tokens
        self._settings = settings

    def url(self, actor: Actor, server_id: str, protocol: str, console_type: str) -> str:
        inst = loaders.instance(self._uow, server_id, auth.server_scope(actor))
        if inst.host is None:
            raise ConflictingState(f"Instance {server_id} is not ready")
        if PROTOCOL_OF_TYPE.get(console_type) != protocol:
            raise BadRequest(f"Invalid console type {console_type}")
        if (protocol, console_type) not in OPENED:
            raise BadRequest(f"Unavailable console type {console_type}.")
        if inst.vm_state != VmState.ACTIVE or inst.power_state != PowerState.RUNNING or inst.task_state:
            raise ConflictingState(f"Instance {server_id} is not ready")
        ttl = self._settings.console_token_ttl_seconds
        token = self._tokens.issue(server_id, console_type, inst.host, ttl)
        if console_type == "novnc":
            # Nova's access_url: noVNC takes the websocket's path (with the token) from ``path``.
            return f"{self._settings.novncproxy_base_url}?{urlencode({'path': f'?token={token}'})}"
        return f"{self._settings.serialproxy_base_url}?token={token}"


class RemoteConsoles:
    """``POST /v2.1/servers/{server_id}/remote-consoles``."""

    def __init__(self, issuer: ConsoleIssuer, max_body_bytes: int) -> None:
        self._issuer = issuer
        self._max_body = max_body_bytes
        self._validators: dict[str, Draft202012Validator] = load_validators(SCHEMAS)

    @falcon.before(policy.require("os_compute_api:os-remote-consoles"))
    def on_post(self, req: falcon.Request, resp: falcon.Response, server_id: str) -> None:
        if not at_least(req, 6):
            raise ItemNotFound("The resource could not be found.")
        version = "v2_99" if at_least(req, 99) else "v2_8" if at_least(req, 8) else "v2_6"
        body = read_json(req, self._validators[f"servers.remote_consoles.{version}"], self._max_body)
        protocol, console_type = body["remote_console"]["protocol"], body["remote_console"]["type"]
        url = self._issuer.url(req.context.actor, server_id, protocol, console_type)
        resp.media = {"remote_console": {"protocol": protocol, "type": console_type, "url": url}}


# The older actions (2.1 to 2.5): action name → protocol.
ACTIONS = {"os-getSerialConsole": "serial", "os-getVNCConsole": "vnc", "os-getSPICEConsole": "spice"}


def answer_action(issuer: ConsoleIssuer, req: falcon.Request, server_id: str, name: str, value: Any) -> Any:
    """The body of an ``os-get*Console`` action: ``{"console": {"type", "url"}}``; 404 from 2.6 on,
    where Nova has no such action."""
    if at_least(req, 6):
        raise ItemNotFound("The resource could not be found.")
    console_type = value["type"]
    url = issuer.url(req.context.actor, server_id, ACTIONS[name], console_type)
    return {"console": {"type": console_type, "url": url}}
