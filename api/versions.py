"""Version documents (``GET /``, ``GET /v2.1``) and microversion negotiation.

Clients name a microversion with ``OpenStack-API-Version: compute 2.x`` (or the legacy
``X-OpenStack-Nova-API-Version: 2.x``); the answer echoes the version served in both headers. A
request that names none gets 2.1, as in Nova; ``latest`` gets ``MAX_VERSION``; a version outside
the range is answered 406, as Nova answers a version above its maximum.

Stratus serves 2.1 to 2.104, Nova 34's range. Every shape that changes inside that range follows
the requested version (docs/api.md lists them, and ``tests/integration/test_nova_shapes.py`` holds them to
tempest's schemas at each microversion where one changes). Where a change concerns a service
Stratus does not have (volumes, ports, shares), it answers as Nova without that service. Call sites
ask ``at_least(req, minor)``, never parse the header themselves.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import falcon

from api.errors import BadRequest, ItemNotFound, NotAcceptable

MIN_VERSION = (2, 1)
MAX_VERSION = (2, 104)
UPDATED = "2013-07-23T11:33:21Z"  # Nova's date for v2.1; clients only display it.
UPDATED_V20 = "2011-01-21T11:33:21Z"  # and for the legacy v2.0 it still lists first

HEADER = "OpenStack-API-Version"
LEGACY_HEADER = "X-OpenStack-Nova-API-Version"
SERVICE_TYPE = "compute"
_VERSION_RE = re.compile(r"^([1-9]\d*)\.([1-9]\d*|0)$")


@dataclass(frozen=True, order=True)
class Microversion:
    """A compute microversion (``2.x``), ordered."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


def at_least(req: falcon.Request, minor: int) -> bool:
    """Whether the request's compute microversion is 2.``minor`` or later (False outside /v2.1)."""
    version = getattr(req.context, "microversion", None)
    # (major, minor) compared as Microversion's order does, without building one per call (a
    # server's detail view asks a dozen times a row)
    return version is not None and (version.major, version.minor) >= (2, minor)


def minor_of(req: falcon.Request) -> int:
    """The request's compute microversion as the ``minor`` that ``at_least`` compares: ``minor_of(req)
    >= n`` is ``at_least(req, n)`` (-1 outside /v2.1; a later major version passes every check).
    For a view that asks a dozen times a row."""
    version = getattr(req.context, "microversion", None)
    if version is None or version.major < 2:
        return -1
    return version.minor if version.major == 2 else sys.maxsize


def since(minor: int) -> Callable[..., None]:
    """A ``falcon.before`` hook for a route a later microversion added: 404 before it, as Nova."""

    def hook(req: falcon.Request, resp: falcon.Response, resource: object, params: dict[str, Any]) -> None:
        if not at_least(req, minor):
            raise ItemNotFound("The resource could not be found.")

    return hook


def _fmt(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def negotiate(req: falcon.Request) -> Microversion:
    """The microversion a request asks for (2.1 when it names none); 400 if malformed, 406 if unserved."""
    return _negotiated(req.get_header(HEADER), req.get_header(LEGACY_HEADER))


# The headers' values clients send are few (each client asks for one version): parsed once each.
@functools.lru_cache(maxsize=256)
def _negotiated(value: str | None, legacy: str | None) -> Microversion:
    requested: str | None = None
    if value:
        # "compute 2.1", possibly among other services' versions: "compute 2.1, placement 1.2".
        for part in value.split(","):
            service, _, version = part.strip().partition(" ")
            if service.lower() == SERVICE_TYPE:
                requested = version.strip()
    if requested is None:
        requested = legacy
    if not requested:
        return Microversion(*MIN_VERSION)
    if requested.lower() == "latest":
        return Microversion(*MAX_VERSION)
    match = _VERSION_RE.match(requested)
    if match is None:
        raise BadRequest(
            f"API Version String {requested} is of invalid format. Must be of format MajorNum.MinorNum."
        )
    asked = Microversion(int(match.group(1)), int(match.group(2)))
    if not (Microversion(*MIN_VERSION) <= asked <= Microversion(*MAX_VERSION)):
        raise NotAcceptable(
            f"Version {asked} is not supported by the API. "
            f"Minimum is {_fmt(MIN_VERSION)} and maximum is {_fmt(MAX_VERSION)}."
        )
    return asked


_VARY = f"{HEADER}, {LEGACY_HEADER}"


def echo(resp: falcon.Response, version: Microversion) -> None:
    served, legacy = _echoed(version)
    resp.set_header(HEADER, served)
    resp.set_header(LEGACY_HEADER, legacy)
    resp.append_header("Vary", _VARY)


@functools.lru_cache(maxsize=256)
def _echoed(version: Microversion) -> tuple[str, str]:
    return f"{SERVICE_TYPE} {version}", str(version)


def _v21(base_url: str) -> dict[str, Any]:
    return {
        "id": "v2.1",
        "status": "CURRENT",
        "version": _fmt(MAX_VERSION),
        "min_version": _fmt(MIN_VERSION),
        "updated": UPDATED,
        "links": [{"rel": "self", "href": f"{base_url}/v2.1/"}],
    }


def _v20(base_url: str) -> dict[str, Any]:
    return {
        "id": "v2.0",
        "status": "SUPPORTED",
        "version": "",
        "min_version": "",
        "updated": UPDATED_V20,
        "links": [{"rel": "self", "href": f"{base_url}/v2/"}],
    }


def _document(doc: dict[str, Any], media_version: str) -> dict[str, Any]:
    doc["links"].append({"rel": "describedby", "type": "text/html", "href": "https://docs.openstack.org/"})
    media_type = f"application/vnd.openstack.compute+json;version={media_version}"
    doc["media-types"] = [{"base": "application/json", "type": media_type}]
    return {"version": doc}


class Versions:
    """``GET /``: the API versions this endpoint serves (no identity needed, as in Nova).

    Nova lists the legacy v2.0 first and v2.1 last; clients and tempest rely on that order."""

    public = frozenset({"GET", "HEAD"})

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"versions": [_v20(req.prefix), _v21(req.prefix)]}


class LegacyVersion:
    """``GET /v2``: the v2.0 version document, as Nova answers it (no microversions: empty range)."""

    public = frozenset({"GET", "HEAD"})

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = _document(_v20(req.prefix), "2")


class Version:
    """``GET /v2.1``: the v2.1 version document with its microversion range."""

    public = frozenset({"GET", "HEAD"})

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = _document(_v21(req.prefix), "2.1")
