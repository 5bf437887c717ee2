"""Per-request context: a request id, the negotiated microversion and the acting identity.

Every response carries Nova's request id headers, errors included. The identity is the request's
verified token (``api/auth.py``), checked once the route is known: a resource may open some methods
to anyone (``public``). Compute paths (``/v2.1``) negotiate a microversion; identity paths do not.
The command context built here (actor, request id, correlation id) is what the resources install
with ``stratus.context.acting`` around a command, so the events it appends name who asked and in
which request.

A resource that reads beside its token's check (``api/auth.py``) is answered by ``CheckedApp``: its
response is held until the check is confirmed, and the request answered again, the check first,
when it is not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import falcon

from api import auth, query_params, versions
from api.body import unstorable
from api.errors import BadRequest, Forbidden
from stratus.context import CommandContext

REQUEST_ID_HEADERS = ("x-openstack-request-id", "x-compute-request-id")
# A calling OpenStack service's request id (oslo.middleware's global request id), kept as correlation.
GLOBAL_REQUEST_ID_HEADER = "X-OpenStack-Request-ID"
# Writes a project reader may still make: Keystone's own routes (a user revokes their own token;
# the identity resources check their rules per route) and key pairs, which Nova lets their owner
# manage whatever the role.
_READER_WRITABLE = ("/identity/", "/v2.1/os-keypairs")
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_GLOBAL_ID_RE = re.compile(r"^req-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
# In a request's WSGI environ: its answer is dropped (its token's check beside it did not confirm what
# it acted on), and then it is being answered again with the check first.
UNCONFIRMED = "stratus_api.unconfirmed"
CHECK_FIRST = "stratus_api.check_first"


class CheckedApp(falcon.App):
    """falcon's app, holding each response until its request's token check is confirmed: a request
    whose check beside it (``RequestContext``) did not confirm is answered again, its check first,
    and only that answer leaves (its metrics and access line too)."""

    def __call__(self, env: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        held: list[tuple[Any, ...]] = []

        def hold(status: str, headers: list[Any], exc_info: Any = None) -> Callable[[bytes], None]:
            held.append((status, headers, exc_info))
            return _no_write

        body = super().__call__(env, hold)
        if env.pop(UNCONFIRMED, False):
            getattr(body, "close", _nothing)()
            env[CHECK_FIRST] = True
            return super().__call__(env, start_response)
        start_response(*held[0])
        return body


def _no_write(data: bytes) -> None:
    raise RuntimeError("falcon answers through the body it returns, never start_response's write")


def _nothing() -> None:
    pass


def _refuse_unstorable_url(req: falcon.Request) -> None:
    """A 400 for a path or query parameter that no read model could look up (NUL, lone surrogate)."""
    why = unstorable(req.path)
    if why:
        raise BadRequest(f"Invalid URL path: {why}.")
    query = req.query_string
    if query.isascii() and "%" not in query and "\x00" not in query:
        return  # its parameters are its own characters: none a NUL, none a surrogate
    for name, value in req.params.items():
        for text in (name, *(value if isinstance(value, list) else [value])):
            why = unstorable(str(text))
            if why:
                raise BadRequest(f"Invalid query parameter {name[:40]!r}: {why}.")


class RequestContext:
    """Middleware: the request's id, its microversion, its actor (from the token) and command context."""

    def __init__(self, authenticator: auth.Authenticator, new_request_id: Callable[[], str]) -> None:
        self._auth = authenticator
        self._new_request_id = new_request_id

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        request_id = self._new_request_id()
        req.context.request_id = request_id
        req.context.microversion = None
        req.context.actor = None
        req.context.auth = None
        _refuse_unstorable_url(req)
        # The version list is outside any microversion, as in Nova; so is Keystone's API.
        if req.path == "/v2.1" or req.path.startswith("/v2.1/"):
            req.context.microversion = versions.negotiate(req)

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict[str, object]
    ) -> None:
        if resource is not None and auth.is_public(resource, req.method):
            return
        if auth.reads_beside_check(resource, req.method) and not req.env.get(CHECK_FIRST):
            authenticated = self._auth.speculate(req)
        else:
            authenticated = self._auth.authenticate(req)
        req.context.auth = authenticated
        req.context.actor = actor = authenticated.actor
        writes = req.method in _WRITES and not req.path.startswith(_READER_WRITABLE)
        if writes and "member" not in actor.roles:
            # The default under every route's own rule: readers read, members act (roles imply the
            # ones below them, so an admin or manager holds member too).
            raise Forbidden(
                f"Policy doesn't allow {req.method} {req.path} to a reader: the member role is needed."
            )
        inbound = req.get_header(GLOBAL_REQUEST_ID_HEADER) or ""
        correlation = inbound if _GLOBAL_ID_RE.match(inbound) else ""
        req.context.command = CommandContext(
            actor=actor, request_id=req.context.request_id, correlation_id=correlation
        )
        if req.context.microversion is not None:
            query_params.check(req)  # 2.102: unknown query parameters refused

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        authenticated = getattr(req.context, "auth", None)
        if authenticated is not None and not self._auth.confirmed(authenticated):
            req.env[UNCONFIRMED] = True  # CheckedApp drops this answer and asks again, checking first
        request_id = getattr(req.context, "request_id", None)
        if request_id:
            for name in REQUEST_ID_HEADERS:
                resp.set_header(name, request_id)
        microversion = getattr(req.context, "microversion", None)
        if microversion is not None:
            versions.echo(resp, microversion)
