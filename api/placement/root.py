"""``GET /placement``: the version document (no authentication, as in Placement)."""

from __future__ import annotations

import falcon

from api.placement.common import HEADER, MAX_VERSION, MIN_VERSION, Version, ok


class Root:
    """``GET /placement``: the version document (no authentication, as in Placement)."""

    public = frozenset({"GET"})

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.set_header(HEADER, f"placement {Version(*MIN_VERSION)}")
        resp.set_header("Vary", HEADER)
        version = {
            "id": "v1.0",
            "max_version": str(Version(*MAX_VERSION)),
            "min_version": str(Version(*MIN_VERSION)),
            "status": "CURRENT",
            "links": [{"rel": "self", "href": ""}],
        }
        ok(resp, {"versions": [version]})
