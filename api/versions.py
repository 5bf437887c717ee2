"""Version documents (``GET /``, ``GET /v2.1``) and microversion negotiation.

Clients name a microversion with ``OpenStack-API-Version: compute 2.x`` (or the legacy
``X-OpenStack-Nova-API-Version: 2.x``); the answer echoes the version served in both headers.
Stratus serves the 2.1 shapes only, so it advertises 2.1 as its maximum: a client that negotiates
(openstacksdk, novaclient, openstackclient) settles on 2.1, and a request for a later version is
answered 406, as Nova answers a version above its maximum, rather than with a body of the wrong shape.
Raising ``MAX_VERSION`` is a per-feature decision: every response shape that changes must follow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import falcon

from api.errors import BadRequest, NotAcceptable

MIN_VERSION = (2, 1)
MAX_VERSION = (2, 1)
UPDATED = "2013-07-23T11:33:21Z"  # Nova's date for v2.1; clients only display it.

HEADER = "OpenStack-API-Version"
LEGACY_HEADER = "X-OpenStack-Nova-API-Version"
SERVICE_TYPE = "compute"
_VERSION_RE = re.compile(r"^([1-9]\d*)\.([1-9]\d*|0)$")


@dataclass(frozen=True, order=True)
class Microversion:
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


def _fmt(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def negotiate(req: falcon.Request) -> Microversion:
    """The microversion a request asks for (2.1 when it names none); 400 if malformed, 406 if unserved."""
    requested: str | None = None
    value = req.get_header(HEADER)
    if value:
        # "compute 2.1", possibly among other services' versions: "compute 2.1, placement 1.2".
        for part in value.split(","):
            service, _, version = part.strip().partition(" ")
            if service.lower() == SERVICE_TYPE:
                requested = version.strip()
    if requested is None:
        requested = req.get_header(LEGACY_HEADER)
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


def echo(resp: falcon.Response, version: Microversion) -> None:
    resp.set_header(HEADER, f"{SERVICE_TYPE} {version}")
    resp.set_header(LEGACY_HEADER, str(version))
    resp.append_header("Vary", f"{HEADER}, {LEGACY_HEADER}")


def _v21(base_url: str) -> dict[str, Any]:
    return {
        "id": "v2.1",
        "status": "CURRENT",
        "version": _fmt(MAX_VERSION),
        "min_version": _fmt(MIN_VERSION),
        "updated": UPDATED,
        "links": [{"rel": "self", "href": f"{base_url}/v2.1/"}],
    }


class Versions:
    """``GET /``: the API versions this endpoint serves (no identity needed, as in Nova)."""

    public = frozenset({"GET", "HEAD"})

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"versions": [_v21(req.prefix)]}


class Version:
    """``GET /v2.1``: the v2.1 version document with its microversion range."""

    public = frozenset({"GET", "HEAD"})

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        doc = _v21(req.prefix)
        doc["links"].append(
            {"rel": "describedby", "type": "text/html", "href": "https://docs.openstack.org/"}
        )
        doc["media-types"] = [
            {"base": "application/json", "type": "application/vnd.openstack.compute+json;version=2.1"}
        ]
        resp.media = {"version": doc}
