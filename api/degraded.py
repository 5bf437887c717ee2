"""Degrading clearly: what the API still does while PostgreSQL or JetStream is away.

Writes go to the log, reads to the read models, so each outage takes half the API away, never all:

- PostgreSQL away: reads answer 503 with ``Retry-After`` (``api/readmodel.py`` translates the pool's
  failures); writes are still accepted, their caller's roles read from the log
  (``api/log_identity.py``) when the identity read model cannot be.
- JetStream away: writes answer 503 with ``Retry-After`` (``api/errors.py``), reads still answer.

``Degraded`` is the middleware for both: a write while the API's connection to the log is down
answers 503 at once (rather than after the recorder's timeouts); every 503 says when to retry; and
under ``/placement`` Nova's fault body becomes Placement's ``{"errors": [...]}``, as
``KeystoneErrors`` does Keystone's under ``/identity``. Nothing here answers 500.
"""

from __future__ import annotations

from collections.abc import Callable

import falcon

from api import auth
from api import error_codes as codes
from api.identity.common import PREFIX as IDENTITY_PREFIX
from api.placement import PREFIX as PLACEMENT_PREFIX
from api.placement.common import error_body
from stratus.eventstore.errors import EventStoreUnavailable

RETRY_AFTER_SECONDS = "5"
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Writes that append nothing: issuing a token is a signature and a password check (PostgreSQL).
_NOT_TO_THE_LOG = frozenset({("POST", IDENTITY_PREFIX + "/v3/auth/tokens")})
# Reads that read the log, not a read model: Placement's providers, the audit routes.
_READS_FROM_THE_LOG = (
    PLACEMENT_PREFIX + "/",
    "/v2.1/stratus/history/",
    "/v2.1/stratus/state/",
    "/v2.1/stratus/usage/",
    "/v2.1/stratus/audit/",
)


class Degraded:
    """Middleware: a write (or a read of the log itself) answers 503 at once while the log is
    unreachable; every 503 says when to retry; under ``/placement``, Nova's fault body becomes Placement's
    ``{"errors": [{"status", "title", "detail", "code", "request_id"}]}``.

    Put it before the authenticating middleware: with the log away, a write is refused before its
    token is checked (which, with PostgreSQL away too, would ask the log). A request with no token
    to a route that needs one is left to authentication: 401 whatever is away, as Nova answers it."""

    def __init__(self, log_reachable: Callable[[], bool]) -> None:
        self._log_reachable = log_reachable

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict[str, object]
    ) -> None:
        if resource is None or not self._needs_the_log(req):
            return
        if not auth.is_public(resource, req.method) and not req.get_header(auth.TOKEN_HEADER):
            return  # no token at all: authentication answers 401, with nothing to ask of anyone
        if not self._log_reachable():
            raise EventStoreUnavailable("the API is not connected to NATS")

    @staticmethod
    def _needs_the_log(req: falcon.Request) -> bool:
        if req.path.startswith(_READS_FROM_THE_LOG):
            return True
        return req.method in _WRITES and (req.method, req.path) not in _NOT_TO_THE_LOG

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        status = falcon.http_status_to_code(resp.status)
        if status == 503 and resp.get_header("Retry-After") is None:
            resp.set_header("Retry-After", RETRY_AFTER_SECONDS)
        if not (req.path == PLACEMENT_PREFIX or req.path.startswith(PLACEMENT_PREFIX + "/")):
            return
        media = resp.media
        if status < 400 or not isinstance(media, dict) or len(media) != 1:
            return
        (fault,) = media.values()
        if not isinstance(fault, dict) or set(fault) != {"code", "message"}:
            return
        request_id = str(getattr(req.context, "request_id", "") or "")
        resp.media = error_body(status, str(fault["message"]), codes.PLACEMENT_DEFAULT.code, request_id)
