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

from commands import errors as domain
from projections import queries
from stratus.eventstore.errors import EventStoreUnavailable

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

# Domain errors: the status each one answers with. Stable codes travel in the ``X-Stratus-Error-Code``
# header: Nova's, Keystone's and Glance's error bodies have exactly their keys, nothing of ours.
DOMAIN_STATUS: Mapping[type[domain.DomainError], int] = {
    domain.InvalidInput: 400,
    domain.NotFound: 404,
    domain.Conflict: 409,
    domain.InvalidState: 409,
    domain.AlreadyExists: 409,
    domain.InsufficientResources: 409,
    domain.NoValidHost: 400,
    domain.QuotaExceeded: 403,
    domain.Forbidden: 403,
    domain.NoMoreFixedIps: 409,
    domain.ConflictingState: 409,
}


class ApiError(Exception):
    """A failure the API itself detects (bad parameters, policy, body size, read-your-writes...)."""

    status = 400
    code = "api.bad_request"

    def __init__(self, message: str, *, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.headers = dict(headers or {})


class BadRequest(ApiError):
    pass


class Unauthorized(ApiError):
    """No valid token (missing, malformed, expired, revoked, or its user disabled)."""

    status = 401
    code = "api.unauthorized"


class Forbidden(ApiError):
    status = 403
    code = "api.forbidden"


class ItemNotFound(ApiError):
    status = 404
    code = "api.not_found"


class NotAcceptable(ApiError):
    """The requested microversion is outside the range this API serves."""

    status = 406
    code = "api.version_not_supported"


class Conflict(ApiError):
    """The request contradicts the resource's state (Glance: a property that is or is not there)."""

    status = 409
    code = "api.conflict"


class TooManyRequests(ApiError):
    """Too many attempts (failed logins, open event streams): retry after ``Retry-After`` seconds."""

    status = 429
    code = "api.too_many_requests"


class Gone(ApiError):
    """What went with nova-network (Nova answers 410 with its generic compute fault)."""

    status = 410
    code = "api.gone"


class PayloadTooLarge(ApiError):
    status = 413
    code = "api.request_too_large"


class UnsupportedMediaType(ApiError):
    status = 415
    code = "api.unsupported_media_type"


class ReadModelBehind(ApiError):
    """The read model did not reach the position the client asked to read after, in time."""

    status = 503
    code = "api.read_model_behind"

    def __init__(self, position: int, waited: float) -> None:
        super().__init__(
            f"The read model has not caught up with position {position} after {waited:g} s; retry.",
            headers={"Retry-After": "1"},
        )
        self.position = position


class ServiceUnavailable(ApiError):
    status = 503
    code = "api.service_unavailable"

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
        _render(resp, 503, "The read model is not available yet; retry.", "api.read_model_unavailable")
    elif isinstance(ex, queries.MarkerNotFound):
        _render(resp, 400, str(ex), "api.marker_not_found")
    else:
        _render(resp, 400, str(ex), "api.invalid_filter")


def _event_store_unavailable(
    req: falcon.Request, resp: falcon.Response, ex: EventStoreUnavailable, params: Any
) -> None:
    # The command's outcome is unknown (nothing was acknowledged); a retry is safe (appends are idempotent).
    log.error("event store unavailable (request %s): %s", _request_id(req), ex)
    resp.set_header("Retry-After", "5")
    message = "The event log is unreachable; the request may be retried."
    _render(resp, 503, message, "api.event_log_unavailable")


def _integrity_error(req: falcon.Request, resp: falcon.Response, ex: IntegrityError, params: Any) -> None:
    _render(resp, 409, "Another request changed this resource at the same time; retry.", domain.Conflict.code)


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
    _render(
        resp,
        500,
        f"Unexpected API Error (request {request_id}). It has been logged; please report it with this id.",
        "api.unexpected",
    )


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
