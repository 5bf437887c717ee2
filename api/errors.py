"""Every failure becomes Nova's fault body here, and only here: ``{"itemNotFound": {"code": 404, ...}}``.

Resources raise domain errors (``commands.errors``), read-model errors (``projections.queries``) or
the API's own ``ApiError`` subclasses; ``install`` maps each kind to a status and a Nova fault name
with one ``add_error_handler`` per kind. An exception nobody anticipated is a bug: it is logged with
the request id and answered with a 500 that names the request id and nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import falcon
from eventsourcing.persistence import IntegrityError

from api import error_codes as codes
from commands import errors as domain
from commands import idempotency
from projections import queries
from stratus.eventstore.errors import EventStoreUnavailable
from stratus.eventstore.signing import UntrustedEvent

log = logging.getLogger("stratus.api")

# Nova's fault element per status (nova/api/openstack/wsgi.py Fault._fault_names); others: computeFault.
FAULT_NAMES = {
    400: "badRequest",
    401: "unauthorized",
    403: "forbidden",
    404: "itemNotFound",
    405: "badMethod",
    409: "conflictingRequest",
    413: "overLimit",
    415: "badMediaType",
    429: "overLimit",
    501: "notImplemented",
    503: "serviceUnavailable",
}

# Domain errors: the status each one answers with, as the table of codes has it (the first class the
# error is an instance of wins). Stable codes travel in the ``X-Stratus-Error-Code`` header: Nova's,
# Keystone's and Glance's error bodies have exactly their keys, nothing of ours.
DOMAIN_STATUS: Mapping[type[domain.DomainError], int] = {
    cls: codes.CODES[cls.code].status
    for cls in (
        domain.InvalidInput,
        domain.NotFound,
        domain.Conflict,
        domain.InvalidState,
        domain.AlreadyExists,
        domain.InsufficientResources,
        domain.NoValidHost,
        domain.QuotaExceeded,
        domain.Forbidden,
        domain.NoMoreFixedIps,
        domain.ConflictingState,
        idempotency.KeyReused,
    )
}


class ApiError(Exception):
    """A failure the API itself detects (bad parameters, policy, body size, read-your-writes...)."""

    status = codes.BAD_REQUEST.status
    code = codes.BAD_REQUEST.code

    def __init_subclass__(cls, error: codes.ErrorCode | None = None, **kwargs: Any) -> None:
        """``class Gone(ApiError, error=codes.GONE)``: the status and code come from the one table."""
        super().__init_subclass__(**kwargs)
        if error is not None:
            cls.status = error.status
            cls.code = error.code

    def __init__(self, message: str, *, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = dict(headers or {})


class BadRequest(ApiError):
    """The request is malformed: its body, a parameter or a header (400)."""

    pass


class Unauthorized(ApiError, error=codes.UNAUTHORIZED):
    """No valid token (missing, malformed, expired, revoked, or its user disabled)."""


class Forbidden(ApiError, error=codes.FORBIDDEN):
    """Policy does not allow the caller's roles to do this (403)."""


class ItemNotFound(ApiError, error=codes.NOT_FOUND):
    """No such resource, or one the caller may not see (404)."""


class NotAcceptable(ApiError, error=codes.VERSION_NOT_SUPPORTED):
    """The requested microversion is outside the range this API serves."""


class Conflict(ApiError, error=codes.CONFLICT):
    """The request contradicts the resource's state (Glance: a property that is or is not there)."""


class TooManyRequests(ApiError, error=codes.TOO_MANY_REQUESTS):
    """Too many attempts (failed logins, open event streams): retry after ``Retry-After`` seconds."""


class Gone(ApiError, error=codes.GONE):
    """What went with nova-network (Nova answers 410 with its generic compute fault)."""


class PayloadTooLarge(ApiError, error=codes.REQUEST_TOO_LARGE):
    """The request body is over the size limit (413)."""


class UnsupportedMediaType(ApiError, error=codes.UNSUPPORTED_MEDIA_TYPE):
    """The body's ``Content-Type`` is not one the route accepts (415)."""


class ReadModelBehind(ApiError, error=codes.READ_MODEL_BEHIND):
    """The read model did not reach the position the client asked to read after, in time."""

    def __init__(self, position: int, waited: float) -> None:
        super().__init__(
            f"The read model has not caught up with position {position} after {waited:g} s; retry.",
            headers={"Retry-After": "1"},
        )
        self.position = position


class ServiceUnavailable(ApiError, error=codes.SERVICE_UNAVAILABLE):
    """A service the API needs is unreachable; the client may retry after ``Retry-After`` (503)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"Retry-After": "5"})


ERROR_CODE_HEADER = "X-Stratus-Error-Code"


def fault_body(status: int, message: str) -> dict[str, Any]:
    """Nova's fault body: ``{"itemNotFound": {"code": 404, "message": ...}}``, exactly those keys."""
    return {FAULT_NAMES.get(status, "computeFault"): {"code": status, "message": message}}


def _render(resp: falcon.Response, status: int, message: str, code: str | None = None) -> None:
    resp.status = status
    resp.media = fault_body(status, message)
    if code:
        resp.set_header(ERROR_CODE_HEADER, code)


def _fault(resp: falcon.Response, error: codes.ErrorCode, message: str) -> None:
    _render(resp, error.status, message, error.code)


def _api_error(req: falcon.Request, resp: falcon.Response, ex: ApiError, params: Any) -> None:
    resp.set_headers(ex.headers)
    _render(resp, ex.status, ex.message, ex.code)


def _domain_error(req: falcon.Request, resp: falcon.Response, ex: domain.DomainError, params: Any) -> None:
    status = next((s for cls, s in DOMAIN_STATUS.items() if isinstance(ex, cls)), 400)
    _render(resp, status, ex.message, ex.code)


def _query_error(req: falcon.Request, resp: falcon.Response, ex: queries.QueryError, params: Any) -> None:
    if isinstance(ex, queries.ReadModelUnavailable):
        log.error("read model unavailable (request %s): %s", _request_id(req), ex)
        resp.set_header("Retry-After", "5")
        _fault(resp, codes.READ_MODEL_UNAVAILABLE, "The read model is not available yet; retry.")
    elif isinstance(ex, queries.MarkerNotFound):
        _fault(resp, codes.MARKER_NOT_FOUND, str(ex))
    else:
        _fault(resp, codes.INVALID_FILTER, str(ex))


def _event_store_unavailable(
    req: falcon.Request, resp: falcon.Response, ex: EventStoreUnavailable, params: Any
) -> None:
    # The command's outcome is unknown (nothing was acknowledged); a retry is safe (appends are idempotent).
    log.error("event store unavailable (request %s): %s", _request_id(req), ex)
    resp.set_header("Retry-After", "5")
    message = "The event log is unreachable; the request may be retried."
    _fault(resp, codes.EVENT_LOG_UNAVAILABLE, message)


def _untrusted_history(req: falcon.Request, resp: falcon.Response, ex: UntrustedEvent, params: Any) -> None:
    # The reason names hosts and identities: the log has it, the caller gets the position only.
    log.error("request %s refused, untrusted history: %s", _request_id(req), ex)
    where = f" at log position {ex.position}" if ex.position is not None else ""
    message = (
        f"The history of this resource holds an event refused by the trust check{where}; "
        "no request can change it until an operator excludes that event."
    )
    _fault(resp, codes.UNTRUSTED_HISTORY, message)


def _integrity_error(req: falcon.Request, resp: falcon.Response, ex: IntegrityError, params: Any) -> None:
    _fault(resp, codes.CONCURRENT_UPDATE, "Another request changed this resource at the same time; retry.")


def _http_error(req: falcon.Request, resp: falcon.Response, ex: falcon.HTTPError, params: Any) -> None:
    """Falcon's own errors (no route: 404, no responder: 405, bad query parameters...)."""
    if ex.headers:
        resp.set_headers(ex.headers)
    status = ex.status_code
    if isinstance(ex, falcon.HTTPMethodNotAllowed):
        message = f"The method {req.method} is not allowed on {req.path}."
    elif isinstance(ex, falcon.HTTPRouteNotFound):
        message = f"The resource {req.path} could not be found."
    else:
        message = ex.description or ex.title or "Error"
    _render(resp, status, message)


def _unexpected(req: falcon.Request, resp: falcon.Response, ex: Exception, params: Any) -> None:
    request_id = _request_id(req)
    # The traceback goes to the log (never request headers or bodies: they may carry secrets).
    log.exception("unexpected error handling %s %s (request %s)", req.method, req.path, request_id)
    message = (
        f"Unexpected API Error (request {request_id}). It has been logged; please report it with this id."
    )
    _fault(resp, codes.UNEXPECTED, message)


def _request_id(req: falcon.Request) -> str:
    return str(getattr(req.context, "request_id", "") or "-")


def install(app: falcon.App) -> None:
    """Register the one mapping from exceptions to Nova faults (the most specific handler wins)."""
    app.add_error_handler(Exception, _unexpected)
    app.add_error_handler(falcon.HTTPError, _http_error)
    app.add_error_handler(ApiError, _api_error)
    app.add_error_handler(domain.DomainError, _domain_error)
    app.add_error_handler(queries.QueryError, _query_error)
    app.add_error_handler(EventStoreUnavailable, _event_store_unavailable)
    app.add_error_handler(IntegrityError, _integrity_error)
    app.add_error_handler(UntrustedEvent, _untrusted_history)
