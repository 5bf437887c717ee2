"""No-auth stand-ins for Keystone, Glance and Neutron, for a Nova run against the fake driver.

Nova's services ask other services a few questions even when the hypervisor is fake: the API shows
the image a server boots from (Glance ``GET /v2/images/{id}``, and glanceclient first reads the
image schema), lists ports for ``security_groups`` in server views and on delete (Neutron
``GET /v2.0/ports``), and Nova 34 has no ``noauth2`` any more: its API runs keystonemiddleware's
``auth_token``, which logs in as its service user and validates each user token with Keystone. This
server answers all of it from memory, on one port, with no authentication: Keystone under
``/identity/`` (any password logs in, any token is valid and is the admin's, in project
``PROJECT_ID``, with a catalog pointing here and at Placement), Glance under ``/v2/``, Neutron under
``/v2.0/``. Every other GET under ``/v2.0/`` answers an empty list
(``/v2.0/security-groups`` → ``{"security_groups": []}``). It counts the requests it answered by
method and path shape, and prints them when stopped (SIGTERM), so a run shows what Nova asked.

Standard library only, so that it runs in Nova's venv or in any Python:
``python stub.py --port 19292``.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

IMAGE_ID = "155d900f-4e14-4e4c-a73d-069cbf4541e6"  # the one image; the bench boots from it

IMAGE: dict[str, Any] = {
    "id": IMAGE_ID,
    "name": "cirros-0.6.2-x86_64-disk",
    "status": "active",
    "visibility": "public",
    "protected": False,
    "os_hidden": False,
    "container_format": "bare",
    "disk_format": "qcow2",
    "size": 21430272,
    "virtual_size": 117440512,
    "min_disk": 0,
    "min_ram": 0,
    "checksum": "c8fc807773e5354afe61636071771906",
    "os_hash_algo": "sha512",
    "os_hash_value": "1103b92ce8ad966e41235a4de260deb791ff571670c0342666c8582fbb9caefe"
    "6af07ebb11d34f44f8414b609b29c1bdf1d72ffa6faa39c88e8721d09847952b",
    "owner": "admin",
    "tags": [],
    "created_at": "2026-11-01T00:00:00Z",
    "updated_at": "2026-11-01T00:00:00Z",
    "self": f"/v2/images/{IMAGE_ID}",
    "file": f"/v2/images/{IMAGE_ID}/file",
    "schema": "/v2/schemas/image",
}

# glanceclient builds its image model from this schema: every property above, any extra allowed.
IMAGE_SCHEMA: dict[str, Any] = {
    "name": "image",
    "properties": {
        key: {"type": ["null", "string", "integer", "boolean", "array", "object"]} for key in IMAGE
    },
    "additionalProperties": {"type": "string"},
    "links": [
        {"href": "{self}", "rel": "self"},
        {"href": "{file}", "rel": "enclosure"},
        {"href": "{schema}", "rel": "describedby"},
    ],
}

PROJECT_ID = "3d5b4e8a0f6c4b1e9a2d7c6f5e4b3a21"  # the admin's project, whatever the token
USER_ID = "8b1e2f3a4c5d4e6f8091a2b3c4d5e6f7"
SERVICE_PROJECT_ID = "c0ffee00c0ffee00c0ffee00c0ffee00"
FAR = "2099-12-31T00:00:00.000000Z"


def _version_v3(base: str) -> dict[str, Any]:
    return {
        "id": "v3.14",
        "status": "stable",
        "updated": "2020-04-07T00:00:00Z",
        "links": [{"rel": "self", "href": f"{base}/identity/v3/"}],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}],
    }


def _catalog(base: str, placement: str) -> list[dict[str, Any]]:
    services = [
        ("identity", "keystone", f"{base}/identity"),
        ("image", "glance", base),
        ("network", "neutron", base),
        ("placement", "placement", placement),
    ]
    return [
        {
            "type": kind,
            "name": name,
            "id": f"{kind}-service",
            "endpoints": [
                {
                    "id": f"{kind}-{i}",
                    "interface": i,
                    "region": "RegionOne",
                    "region_id": "RegionOne",
                    "url": url,
                }
                for i in ("public", "internal", "admin")
            ],
        }
        for kind, name, url in services
    ]


def token(base: str, placement: str, service: bool = False) -> dict[str, Any]:
    """Keystone's v3 token body: every token is the admin's (or the service user's), roles and all."""
    domain = {"id": "default", "name": "Default"}
    project = (
        {"id": SERVICE_PROJECT_ID, "name": "service"} if service else {"id": PROJECT_ID, "name": "admin"}
    )
    user = {"id": "nova", "name": "nova"} if service else {"id": USER_ID, "name": "admin"}
    return {
        "token": {
            "methods": ["password"],
            "user": {**user, "domain": domain, "password_expires_at": None},
            "audit_ids": ["c3Rhc3R1c2Jl"],
            "expires_at": FAR,
            "issued_at": "2026-11-01T00:00:00.000000Z",
            "project": {**project, "domain": domain},
            "is_domain": False,
            "roles": [{"id": f"role-{r}", "name": r} for r in ("admin", "member", "reader", "service")],
            "catalog": _catalog(base, placement),
        }
    }


def answer(method: str, path: str, base: str, placement: str) -> tuple[int, Any]:
    """(status, body) for one request; body None means no content. ``base`` is this server's URL."""
    bare = path.split("?", 1)[0].rstrip("/")
    if bare in ("", "/identity"):
        return 200, {"versions": {"values": [_version_v3(base)]}}
    if bare == "/identity/v3":
        return 200, {"version": _version_v3(base)}
    if bare == "/identity/v3/auth/tokens":
        return (201 if method == "POST" else 200), token(base, placement, service=method == "POST")
    if bare.startswith("/identity/") and "/projects/" in bare:
        project = bare.rsplit("/", 1)[1]
        return 200, {
            "project": {
                "id": project,
                "name": project,
                "domain_id": "default",
                "enabled": True,
                "is_domain": False,
                "parent_id": "default",
                "description": "",
                "tags": [],
            }
        }
    if bare == "/v2/schemas/image":
        return 200, IMAGE_SCHEMA
    if bare == "/v2/images":
        return 200, {"images": [IMAGE], "schema": "/v2/schemas/images", "first": "/v2/images"}
    if bare.startswith("/v2/images/"):
        return (200, IMAGE) if bare.split("/")[3] == IMAGE_ID else (404, {"message": "no such image"})
    if bare.startswith("/v2.0/"):
        if method == "DELETE":
            return 204, None
        if method == "GET":
            collection = bare.split("/")[2].removesuffix(".json")
            if len(bare.split("/")) > 3:
                return 404, {"NeutronError": {"type": "NotFound", "message": "not found", "detail": ""}}
            return 200, {collection.replace("-", "_"): []}
    return 404, {"error": {"code": 404, "message": f"the stub does not answer {method} {bare}"}}


class Handler(BaseHTTPRequestHandler):
    """One request: answered from ``answer``, counted by its shape."""

    protocol_version = "HTTP/1.1"
    placement = "http://127.0.0.1:18778"  # set from --placement
    verbose = False  # set from --verbose: print each request
    seen: ClassVar[collections.Counter[str]] = collections.Counter()
    lock = threading.Lock()

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        base = f"http://{self.headers.get('Host') or '127.0.0.1'}"
        status, body = answer(self.command, self.path, base, self.placement)
        shape = re.sub(r"[0-9a-f]{8}-?[0-9a-f-]{24,27}", "{id}", self.path.split("?", 1)[0])
        with self.lock:
            self.seen[f"{self.command} {shape} -> {status}"] += 1
        if self.verbose:
            print(f"{self.command} {self.path} -> {status}", flush=True)
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.path.startswith("/identity/v3/auth/tokens"):
            self.send_header("X-Subject-Token", self.headers.get("X-Subject-Token") or "stub-service-token")
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the counts are printed at the end instead."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=19292)
    parser.add_argument(
        "--placement", default="http://127.0.0.1:18778", help="Placement's URL, for the catalog"
    )
    parser.add_argument("--verbose", action="store_true", help="print each request")
    args = parser.parse_args(argv)
    Handler.placement, Handler.verbose = args.placement, args.verbose
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True

    def stop(_signum: int, _frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"stub listening on {args.host}:{args.port}", flush=True)
    server.serve_forever()
    for line, count in sorted(Handler.seen.items()):
        print(f"{count:7d}  {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
