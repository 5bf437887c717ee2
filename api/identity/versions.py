"""``GET /identity`` and ``GET /identity/v3``: Keystone's version discovery (no token needed)."""

from __future__ import annotations

from typing import Any

import falcon

from api.identity.common import V3

_UPDATED = "2024-04-03T00:00:00Z"


def _v3_doc(req: falcon.Request) -> dict[str, Any]:
    return {
        "id": "v3.14",
        "status": "stable",
        "updated": _UPDATED,
        "links": [{"rel": "self", "href": f"{req.prefix}{V3}/"}],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}],
    }


class Versions:
    """``GET /identity``: Keystone's version list (300 Multiple Choices, as Keystone answers)."""

    public = frozenset({"GET", "HEAD"})

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.status = falcon.HTTP_300
        resp.media = {"versions": {"values": [_v3_doc(req)]}}


class Version:
    """``GET /identity/v3``."""

    public = frozenset({"GET", "HEAD"})

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"version": _v3_doc(req)}
