"""The OpenAPI 3.1 document of the HTTP API (``schemas/openapi.json``), generated from the live route table.

``python -m api.openapi --write`` regenerates it for a new route; tests/integration/test_openapi.py fails
until it is. ``GET /openapi.json`` serves the committed file (public, no token).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import falcon
import falcon.inspect
import orjson

from api.dashboard import PREFIX as DASHBOARD
from stratus.health import READYZ

DOCUMENT = Path(__file__).resolve().parent.parent / "schemas" / "openapi.json"
REGENERATE = "regenerate it: python -m api.openapi --write"
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")

# Request bodies a route validates against schemas/api/<name>.json, mapped by hand: (path, method) -> name.
REQUEST_BODIES: dict[tuple[str, str], tuple[str, ...]] = {
    ("/identity/v3/auth/tokens", "POST"): ("identity.auth",),
    ("/identity/v3/projects", "POST"): ("identity.projects.create",),
    ("/identity/v3/projects/{project_id}", "PATCH"): ("identity.projects.update",),
    ("/identity/v3/users", "POST"): ("identity.users.create",),
    ("/identity/v3/users/{user_id}", "PATCH"): ("identity.users.update",),
    ("/identity/v3/users/{user_id}/password", "POST"): ("identity.users.password",),
    ("/identity/v3/users/{user_id}/application_credentials", "POST"): (
        "identity.application_credentials.create",
    ),
    ("/identity/v3/domains", "POST"): ("identity.domains.create",),
    ("/identity/v3/domains/{domain_id}", "PATCH"): ("identity.domains.update",),
    ("/identity/v3/groups", "POST"): ("identity.groups.create",),
    ("/identity/v3/groups/{group_id}", "PATCH"): ("identity.groups.update",),
    ("/identity/v3/roles", "POST"): ("identity.roles.create",),
    ("/identity/v3/roles/{role_id}", "PATCH"): ("identity.roles.update",),
    ("/identity/v3/regions", "POST"): ("identity.regions.create",),
    ("/identity/v3/regions/{region_id}", "PUT"): ("identity.regions.create",),
    ("/identity/v3/regions/{region_id}", "PATCH"): ("identity.regions.update",),
    ("/identity/v3/services", "POST"): ("identity.services.create",),
    ("/identity/v3/services/{service_id}", "PATCH"): ("identity.services.update",),
    ("/identity/v3/endpoints", "POST"): ("identity.endpoints.create",),
    ("/identity/v3/endpoints/{endpoint_id}", "PATCH"): ("identity.endpoints.update",),
    ("/image/v2/images", "POST"): ("images.create",),
    ("/v2.1/flavors", "POST"): ("flavors.create",),
    ("/v2.1/flavors/{flavor_id}/action", "POST"): ("flavors.action",),
    ("/v2.1/flavors/{flavor_id}/os-extra_specs", "POST"): ("flavors.extra_specs.create",),
    ("/v2.1/flavors/{flavor_id}/os-extra_specs/{key}", "PUT"): ("flavors.extra_specs.update",),
    ("/v2.1/os-aggregates", "POST"): ("aggregates.create",),
    ("/v2.1/os-aggregates/{aggregate_id}", "PUT"): ("aggregates.update",),
    ("/v2.1/os-aggregates/{aggregate_id}/action", "POST"): ("aggregates.action",),
    ("/v2.1/os-hosts/{host_name}", "PUT"): ("hosts.update",),
    ("/v2.1/os-keypairs", "POST"): ("keypairs.create",),
    ("/v2.1/os-quota-sets/{project_id}", "PUT"): ("quota_sets.update",),
    ("/v2.1/os-server-groups", "POST"): ("server_groups.create",),
    # The {action} segment picks the schema (api/services.py).
    ("/v2.1/os-services/{action}", "PUT"): (
        "services.enable",
        "services.disable_log_reason",
        "services.force_down",
        "services.update",
    ),
    ("/v2.1/servers", "POST"): ("servers.create",),
    ("/v2.1/servers/{server_id}", "PUT"): ("servers.update",),
    ("/v2.1/servers/{server_id}/action", "POST"): ("servers.action",),
    # One schema per microversion range (api/consoles/remote.py).
    ("/v2.1/servers/{server_id}/remote-consoles", "POST"): (
        "servers.remote_consoles.v2_6",
        "servers.remote_consoles.v2_8",
        "servers.remote_consoles.v2_99",
    ),
    ("/v2.1/servers/{server_id}/metadata", "POST"): ("servers.metadata",),
    ("/v2.1/servers/{server_id}/metadata", "PUT"): ("servers.metadata",),
    ("/v2.1/servers/{server_id}/metadata/{key}", "PUT"): ("servers.metadata_item",),
    ("/v2.1/servers/{server_id}/tags", "PUT"): ("servers.tags",),
}
_PARAM = re.compile(r"{(\w+)}")

# What a create answers, so that a client (a fuzzer's stateful phase) can follow it to the resource:
# (collection, create method) -> (success statuses, the item's path, its parameter, where the new id is).
CREATES: dict[tuple[str, str], tuple[tuple[str, ...], str, str, str]] = {
    ("/v2.1/servers", "POST"): (("202",), "/v2.1/servers/{server_id}", "server_id", "/server/id"),
    ("/v2.1/flavors", "POST"): (("200",), "/v2.1/flavors/{flavor_id}", "flavor_id", "/flavor/id"),
    ("/v2.1/os-keypairs", "POST"): (("200", "201"), "/v2.1/os-keypairs/{name}", "name", "/keypair/name"),
    ("/v2.1/os-server-groups", "POST"): (
        ("200",), "/v2.1/os-server-groups/{group_id}", "group_id", "/server_group/id"
    ),
    ("/v2.1/os-aggregates", "POST"): (
        ("200",), "/v2.1/os-aggregates/{aggregate_id}", "aggregate_id", "/aggregate/id"
    ),
    ("/image/v2/images", "POST"): (("201",), "/image/v2/images/{image_id}", "image_id", "/id"),
    ("/image/v2/metadefs/namespaces", "POST"): (
        ("201",), "/image/v2/metadefs/namespaces/{namespace}", "namespace", "/namespace"
    ),
    ("/identity/v3/projects", "POST"): (
        ("201",), "/identity/v3/projects/{project_id}", "project_id", "/project/id"
    ),
    ("/identity/v3/users", "POST"): (("201",), "/identity/v3/users/{user_id}", "user_id", "/user/id"),
    ("/identity/v3/domains", "POST"): (
        ("201",), "/identity/v3/domains/{domain_id}", "domain_id", "/domain/id"
    ),
    ("/identity/v3/groups", "POST"): (("201",), "/identity/v3/groups/{group_id}", "group_id", "/group/id"),
    ("/identity/v3/roles", "POST"): (("201",), "/identity/v3/roles/{role_id}", "role_id", "/role/id"),
    ("/identity/v3/regions", "POST"): (
        ("201",), "/identity/v3/regions/{region_id}", "region_id", "/region/id"
    ),
    ("/identity/v3/services", "POST"): (
        ("201",), "/identity/v3/services/{service_id}", "service_id", "/service/id"
    ),
    ("/identity/v3/endpoints", "POST"): (
        ("201",), "/identity/v3/endpoints/{endpoint_id}", "endpoint_id", "/endpoint/id"
    ),
    # from placement 1.20 (201 without a body before)
    ("/placement/resource_providers", "POST"): (
        ("200",), "/placement/resource_providers/{uuid}", "uuid", "/uuid"
    ),
}  # fmt: skip

# Answers without a body: 204 anywhere (Keystone's grant checks, Glance's data of an image that has
# none, deletes), 202 for an accepted write (Nova's actions and deletes), any status to a HEAD, and
# the few 200s Nova answers empty.
_NO_BODY = {"description": "No body"}
_EMPTY_200 = {
    ("/v2.1/os-aggregates/{aggregate_id}", "DELETE"),
    ("/v2.1/flavors/{flavor_id}/os-extra_specs/{key}", "DELETE"),
}
_EMPTY_201 = {
    ("/v2.1/servers/{server_id}/tags/{tag}", "PUT"),
    ("/placement/resource_classes/{name}", "PUT"),
    ("/placement/traits/{name}", "PUT"),
    ("/placement/resource_providers", "POST"),  # before placement 1.20
}
_OCTETS = {("/image/v2/images/{image_id}/file", "GET")}
# Nova's own answer where its libvirt driver has no such feature: 501 (documented, not a failure).
NOT_IMPLEMENTED = {("/v2.1/os-hosts/{host_name}", "PUT"), ("/v2.1/os-hosts/{host_name}/{action}", "GET")}

_FAULT = {
    "description": 'A Nova fault body: {"<fault name>": {"code": int, "message": str}}',
    "content": {"application/json": {"schema": {"type": "object"}}},
}


def routes(app: falcon.App) -> dict[str, list[str]]:
    """Every path template of ``app`` and the HTTP methods its resource implements; not the
    dashboard's pages (``api/dashboard``), which are HTML and modules for browsers, not the API."""
    table: dict[str, list[str]] = {}
    for route in falcon.inspect.inspect_routes(app):
        if route.path == DASHBOARD or route.path.startswith(f"{DASHBOARD}/"):
            continue
        methods = sorted(m.method for m in route.methods if m.method in _METHODS and not m.internal)
        if methods:
            table[route.path] = methods
    return dict(sorted(table.items()))


def document(app: falcon.App) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for path, methods in routes(app).items():
        item: dict[str, Any] = {}
        params = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in _PARAM.findall(path)
        ]
        if params:
            item["parameters"] = params
        for method in methods:
            op: dict[str, Any] = {
                "operationId": _operation_id(path, method),
                "summary": f"{method} {path}",
                "security": [] if path in ("/openapi.json", READYZ) else [{"token": []}],
                "responses": _responses(path, method),
            }
            created = CREATES.get((path, method))
            if created is not None:
                op["responses"] = {**_created(created, routes(app)), **op["responses"]}
            names = REQUEST_BODIES.get((path, method), ())
            if names:
                refs = [{"$ref": f"api/{name}.json"} for name in names]
                schema = refs[0] if len(refs) == 1 else {"oneOf": refs}
                op["requestBody"] = {"required": True, "content": {"application/json": {"schema": schema}}}
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


def _responses(path: str, method: str) -> dict[str, Any]:
    if method == "HEAD":
        return {"default": _NO_BODY}
    responses: dict[str, Any] = {"204": _NO_BODY}
    if method != "GET":
        responses["202"] = _NO_BODY
    if (path, method) in _EMPTY_200:
        responses["200"] = _NO_BODY
    if (path, method) in _EMPTY_201:
        responses["201"] = _NO_BODY
    if (path, method) in NOT_IMPLEMENTED:
        responses["501"] = {"$ref": "#/components/responses/Fault"}
    if (path, method) in _OCTETS:
        responses["200"] = {"description": "The data", "content": {"application/octet-stream": {}}}
    return {**responses, "default": {"$ref": "#/components/responses/Fault"}}


def _created(created: tuple[tuple[str, ...], str, str, str], table: dict[str, list[str]]) -> dict[str, Any]:
    """A create's success responses, with OpenAPI links to every operation on the new resource."""
    statuses, item, param, pointer = created
    links = {
        f"{method}{_link_name(path[len(item) :])}": {
            "operationId": _operation_id(path, method),
            "parameters": {param: f"$response.body#{pointer}"},
        }
        for path, methods in table.items()
        if path == item or path.startswith(item + "/")
        if _PARAM.findall(path) == [param]  # operations that need nothing but the new resource
        for method in methods
    }
    return {
        status: {
            "description": "Created: the new resource (and links to what can be done with it)",
            "content": {"application/json": {"schema": {"type": "object"}}},
            "links": links,
        }
        for status in statuses
    }


def _link_name(rest: str) -> str:
    return "".join(part.title() for part in re.split(r"[^A-Za-z0-9]+", rest) if part) or "Item"


def _operation_id(path: str, method: str) -> str:
    return f"{method.lower()} {path}"


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
