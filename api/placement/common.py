"""What every Placement resource shares: microversions, Placement's error body, admin policy, links.

Placement's errors are ``{"errors": [{"status", "title", "detail", "code", "request_id"}]}`` with a
stable ``code`` (``placement.concurrent_update`` on a generation conflict); ``@placement_call``
turns the domain's and the API's errors into that shape for the wrapped responder, so the Compute
API's Nova-shaped error handlers never see them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import falcon

from api import auth
from api import error_codes as codes
from api.body import refuse_unstorable
from api.errors import ApiError, BadRequest
from commands import errors as domain
from commands.placement import ConsumerGenerationConflict
from commands.resource_provider import CapacityExceeded, InventoryInUse, ProviderGenerationConflict
from stratus import serialization
from stratus.context import acting

MIN_VERSION = (1, 0)
MAX_VERSION = (1, 39)
HEADER = "OpenStack-API-Version"
_VERSION_RE = re.compile(r"^placement\s+(latest|\d+\.\d+)$", re.IGNORECASE)

_STATUS: dict[type[domain.DomainError], int] = {
    ProviderGenerationConflict: 409,
    ConsumerGenerationConflict: 409,
    InventoryInUse: 409,
    CapacityExceeded: 409,
    domain.Conflict: 409,
    domain.ConflictingState: 409,
    domain.InsufficientResources: 409,
    domain.InvalidInput: 400,
    domain.NotFound: 404,
    domain.Forbidden: 403,
}
_TITLES = {
    400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 406: "Not Acceptable",
    409: "Conflict", 500: "Internal Server Error", 503: "Service Unavailable",
}  # fmt: skip


@dataclass(frozen=True, order=True)
class Version:
    """A Placement microversion (``1.x``)."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    def at_least(self, minor: int) -> bool:
        return self.minor >= minor


class PlacementError(Exception):
    """A failure answered in Placement's error shape, with its status and Placement code."""

    def __init__(self, status: int, detail: str, code: str = codes.PLACEMENT_DEFAULT.code) -> None:
        super().__init__(detail)
        self.status, self.detail, self.code = status, detail, code


def negotiate(req: falcon.Request) -> Version:
    header = req.get_header(HEADER) or ""
    wanted = None
    for part in header.split(","):
        m = _VERSION_RE.match(part.strip())
        if m:
            wanted = m.group(1)
    if wanted is None:
        return Version(*MIN_VERSION)
    if wanted.lower() == "latest":
        return Version(*MAX_VERSION)
    major, minor = (int(x) for x in wanted.split("."))
    if not MIN_VERSION <= (major, minor) <= MAX_VERSION:
        raise PlacementError(
            406,
            f"Unacceptable version header: {wanted}; "
            f"this API serves {Version(*MIN_VERSION)} to {Version(*MAX_VERSION)}",
            codes.PLACEMENT_VERSION_UNSUPPORTED.code if major == 1 else codes.PLACEMENT_DEFAULT.code,
        )
    return Version(major, minor)


def error_body(status: int, detail: str, code: str, request_id: str) -> dict[str, Any]:
    title = _TITLES.get(status, "Error")
    return {
        "errors": [
            {"status": status, "title": title, "detail": detail, "code": code, "request_id": request_id}
        ]
    }


def _status_of(e: domain.DomainError) -> int:
    for cls in type(e).__mro__:
        if cls in _STATUS:
            return _STATUS[cls]  # type: ignore[index]
    return 500


R = TypeVar("R")
Responder = Callable[..., None]


def placement_call(admin: bool = True) -> Callable[[Responder], Responder]:
    """Wrap a responder: negotiate the microversion (``req.context.placement_version``), require the
    admin role, run it under the request's command context, and answer errors in Placement's shape."""

    def wrap(fn: Responder) -> Responder:
        @functools.wraps(fn)
        def responder(self: Any, req: falcon.Request, resp: falcon.Response, **params: Any) -> None:
            resp.set_header("Vary", HEADER)
            try:
                version = negotiate(req)
                req.context.placement_version = version
                resp.set_header(HEADER, f"placement {version}")
                if admin:
                    auth.require_admin(req.context.actor, "placement:" + fn.__name__)
                context = getattr(req.context, "command", None)
                if context is not None:
                    with acting(context):
                        fn(self, req, resp, **params)
                else:
                    fn(self, req, resp, **params)
            except PlacementError as e:
                _fail(req, resp, e.status, e.detail, e.code)
            except domain.DomainError as e:
                status = _status_of(e)
                code = e.code if e.code.startswith("placement.") else codes.PLACEMENT_DEFAULT.code
                _fail(req, resp, status, e.message, code)
            except ApiError as e:
                _fail(req, resp, e.status, e.message, codes.PLACEMENT_DEFAULT.code)

        return responder

    return wrap


def _fail(req: falcon.Request, resp: falcon.Response, status: int, detail: str, code: str) -> None:
    resp.status = falcon.code_to_http_status(status)
    resp.content_type = falcon.MEDIA_JSON
    resp.data = serialization.dumps(error_body(status, detail, code, getattr(req.context, "request_id", "")))


def json_body(req: falcon.Request) -> Any:
    try:
        doc = serialization.loads(req.bounded_stream.read() or b"null")
    except ValueError as e:
        raise PlacementError(400, f"Malformed JSON: {e}") from e
    try:
        refuse_unstorable(doc)
    except BadRequest as e:
        raise PlacementError(400, e.message) from None
    return doc


def body(req: falcon.Request) -> dict[str, Any]:
    doc = json_body(req)
    if not isinstance(doc, dict):
        raise PlacementError(400, "JSON body must be an object")
    return doc


def generation_of(doc: dict[str, Any]) -> int:
    generation = doc.get("resource_provider_generation")
    if not isinstance(generation, int) or isinstance(generation, bool):
        raise PlacementError(400, "'resource_provider_generation' is a required property")
    return generation


def params(req: falcon.Request, name: str) -> list[str]:
    """Every value of a repeated query parameter, commas kept (``member_of=in:a,b&member_of=c``)."""
    value = req.params.get(name)
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def ok(resp: falcon.Response, doc: Any, status: int = 200) -> None:
    resp.status = falcon.code_to_http_status(status)
    resp.content_type = falcon.MEDIA_JSON
    resp.data = serialization.dumps(doc)


def link(rel: str, href: str) -> dict[str, str]:
    return {"rel": rel, "href": href}
