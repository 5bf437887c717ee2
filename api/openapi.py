"""The OpenAPI 3.1 document of the HTTP API (``schemas/openapi.json``), generated from the live route table.

``python -m api.openapi --write`` regenerates it after a route is added; tests/test_openapi.py fails
until it is. ``GET /openapi.json`` serves the committed file (public, no token).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import falcon
import falcon.inspect
import orjson

DOCUMENT = Path(__file__).resolve().parent.parent / "schemas" / "openapi.json"
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")

# Request bodies a route validates against schemas/api/<name>.json, mapped by hand: (path, method) -> name.
REQUEST_BODIES: dict[tuple[str, str], str] = {
    ("/v2.1/servers", "POST"): "servers.create",
    ("/v2.1/servers/{server_id}", "PUT"): "servers.update",
    ("/v2.1/flavors", "POST"): "flavors.create",
}

_FAULT = {
    "description": 'A Nova fault body: {"<fault name>": {"code": int, "message": str}}',
    "content": {"application/json": {"schema": {"type": "object"}}},
}


def routes(app: falcon.App) -> dict[str, list[str]]:
    """Every path template of ``app`` and the HTTP methods its resource implements."""
    table: dict[str, list[str]] = {}
    for route in falcon.inspect.inspect_routes(app):
        methods = sorted(m.method for m in route.methods if m.method in _METHODS and not m.internal)
        if methods:
            table[route.path] = methods
    return dict(sorted(table.items()))


def document(app: falcon.App) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for path, methods in routes(app).items():
        item: dict[str, Any] = {}
        for method in methods:
            op: dict[str, Any] = {
                "summary": f"{method} {path}",
                "responses": {"default": {"$ref": "#/components/responses/Fault"}},
            }
            name = REQUEST_BODIES.get((path, method))
            if name:
                op["requestBody"] = {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": f"api/{name}.json"}}},
                }
            item[method.lower()] = op
        paths[path] = item
    return {
        "openapi": "3.1.0",
        "info": {"title": "Stratus Compute API", "version": "2.1"},
        "security": [{"token": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"token": {"type": "apiKey", "in": "header", "name": "X-Auth-Token"}},
            "responses": {"Fault": _FAULT},
        },
    }


class OpenAPIDocument:
    """``GET /openapi.json``: the committed document, open to anyone."""

    public = frozenset({"GET", "HEAD"})

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.content_type = falcon.MEDIA_JSON
        resp.data = DOCUMENT.read_bytes()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="write schemas/openapi.json")
    args = parser.parse_args(argv)
    from api.app import build, create_app  # composing the app opens pools: only when asked
    from stratus.config import Settings

    deps, close = build(Settings.from_env())
    try:
        body = orjson.dumps(document(create_app(deps)), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    finally:
        close()
    if args.write:
        DOCUMENT.write_bytes(body + b"\n")
    else:
        sys.stdout.buffer.write(body + b"\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
