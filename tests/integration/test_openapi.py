"""schemas/openapi.json against the real app: same paths and methods, served as committed, valid OpenAPI 3.1.

After adding or removing a route, regenerate with ``python -m api.openapi --write``.
"""

from __future__ import annotations

from typing import Any

import orjson

from api.openapi import DOCUMENT, REGENERATE, REQUEST_BODIES, routes
from tests.fixtures.api import Stack


def _committed() -> dict[str, Any]:
    return orjson.loads(DOCUMENT.read_bytes())


def test_the_document_lists_exactly_the_apps_routes(stack: Stack) -> None:
    committed = {
        path: sorted(m.upper() for m in item if m != "parameters")
        for path, item in _committed()["paths"].items()
    }
    live = routes(stack.app)
    missing = {p: m for p, m in live.items() if committed.get(p) != m}
    stale = {p: m for p, m in committed.items() if live.get(p) != m}
    assert not missing and not stale, (
        f"schemas/openapi.json is out of date ({REGENERATE}): {missing=} {stale=}"
    )


def test_the_api_serves_the_committed_document_without_a_token(stack: Stack) -> None:
    r = stack.client.simulate_get("/openapi.json")
    assert r.status_code == 200, r.text
    assert r.json == _committed()


def test_every_mapped_request_body_names_a_live_route_and_a_schema(stack: Stack) -> None:
    live = routes(stack.app)
    for (path, method), names in REQUEST_BODIES.items():
        assert method in live.get(path, []), (
            f"REQUEST_BODIES names {method} {path}, which the app has no more"
        )
        for name in names:
            assert (DOCUMENT.parent / "api" / f"{name}.json").is_file(), name
