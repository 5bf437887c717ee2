"""The API's other lists through gunicorn, each against the same SQL in a raw psycopg loop.

Run: ``python -m tests.bench.bench_lists [--servers 1000] [--items 1000] [--rounds 3] [--walks 5]`` (~2 min).
The cloud is ``bench_servers_detail``'s (its own nats-server and database, servers through their
events, read models rebuilt), with ``--items`` flavors, key pairs, images and server groups of the
admin added through their aggregates' events and the read models rebuilt again. The API runs as
deployed (``stratus api``'s gunicorn command line, ``processes.api.api_argv``: threaded workers,
keep-alive); the bench's client keeps its connection alive, as openstacksdk's session does.

Each list is walked page by page (``limit=100``, following its ``next`` link where the API gives one),
over HTTP and as its floor, ``--walks`` times a measurement (one walk of 11 pages took ~25 ms, short
enough for one scheduling hiccup on the shared cores to move a round's ratio). **The floor is the same
statements**: the bench walks the list once in this process through the composed API
(``api.app.build``/``create_app``, falcon's test client), records every statement the request ran on
PostgreSQL except the token's identity lookup (which the servers' floor leaves out too), and replays
them with their parameters on one connection, rows as tuples. So a list's ratio is what the API adds to
its queries: HTTP, the token, falcon, the views, JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import pickle
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import falcon.testing
import psycopg
from cryptography.hazmat.primitives import serialization as keys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from api.app import build, create_app
from commands.flavor import Flavor
from commands.image import Image
from commands.keypair import KeyPair
from commands.server_group import ServerGroup
from projections import identity_queries
from projections.rebuild import rebuild
from tests.bench.bench_rebuild import LogBuilder
from tests.bench.bench_servers_detail import PASSWORD, ServersCloud, http_get, login, servers_cloud
from tests.bench.harness import Bench, CpuMeter, TreeCpu, deployed_api, loadavg, machine_lines
from tests.fixtures.processes import free_port

PAGE = 100


@dataclass(frozen=True)
class Listing:
    """One list of the API: its first page's path, the key of its items, how it links the next."""

    name: str
    path: str
    key: str
    next_of: Callable[[dict[str, Any]], str | None]
    microversion: str | None = None

    def headers(self, token: str) -> dict[str, str]:
        h = {"X-Auth-Token": token}
        if self.microversion:
            h["OpenStack-API-Version"] = f"compute {self.microversion}"
        return h


def _nova_next(key: str) -> Callable[[dict[str, Any]], str | None]:
    def next_of(doc: dict[str, Any]) -> str | None:
        links = [link for link in doc.get(f"{key}_links") or [] if link.get("rel") == "next"]
        return links[0]["href"] if links else None

    return next_of


def _glance_next(doc: dict[str, Any]) -> str | None:
    nxt = doc.get("next")  # Glance's is relative to the image endpoint (``/image``)
    return f"/image{nxt}" if nxt else None


def _one_page(doc: dict[str, Any]) -> str | None:
    return None


def _nova(path: str, key: str, microversion: str | None = None) -> Listing:
    return Listing(f"GET {path}", f"{path}?limit={PAGE}", key, _nova_next(key), microversion)


LISTINGS = (
    _nova("/v2.1/servers/detail", "servers"),
    _nova("/v2.1/servers", "servers"),
    _nova("/v2.1/flavors/detail", "flavors"),
    _nova("/v2.1/os-keypairs", "keypairs", "2.35"),
    Listing("GET /image/v2/images", f"/image/v2/images?limit={PAGE}", "images", _glance_next),
    Listing("GET /v2.1/os-server-groups", f"/v2.1/os-server-groups?limit={PAGE}", "server_groups", _one_page),
    Listing(
        "GET /v2.1/os-hypervisors/detail", "/v2.1/os-hypervisors/detail", "hypervisors", _one_page, "2.33"
    ),
)


def _text(conn: psycopg.Connection[Any], query: Any) -> str:
    return query if isinstance(query, str) else query.as_string(conn)  # type: ignore[no-any-return]


def _relative(href: str) -> str:
    """A link's path and query (the API's links are absolute)."""
    rest = href.split("://", 1)[-1]
    return rest[rest.index("/") :]


def walk(get: Callable[[str, dict[str, str]], dict[str, Any]], listing: Listing, token: str) -> int:
    """Every page of ``listing``; the number of items listed."""
    path: str | None = listing.path
    total = 0
    while path is not None:
        doc = get(path, listing.headers(token))
        total += len(doc[listing.key])
        nxt = listing.next_of(doc)
        path = _relative(nxt) if nxt else None
    return total


# -- the floor: the statements a walk ran ---------------------------------------------------------
# per page: (query, params, whether it is the token's identity lookup) in the order the API ran them
Statements = list[list[tuple[Any, Any, bool]]]


@contextlib.contextmanager
def recording() -> Iterator[Statements]:
    """Records the statements this process runs, a list per page, the token's identity lookup
    (``identity_queries.subject``) marked as such."""
    pages: Statements = []
    identity = threading.local()
    execute = psycopg.Cursor.execute
    names = ("subject", "system_subject", "send_subject")  # send_subject: the lookup in a read's pipeline
    lookups = {name: getattr(identity_queries, name) for name in names if hasattr(identity_queries, name)}

    def recorded_execute(cur: Any, query: Any, params: Any = None, **kw: Any) -> Any:
        if pages and not _bookkeeping(query):
            pages[-1].append((query, params, getattr(identity, "inside", False)))
        return execute(cur, query, params, **kw)

    def outside(lookup: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kw: Any) -> Any:
            identity.inside = True
            try:
                return lookup(*args, **kw)
            finally:
                identity.inside = False

        return wrapped

    psycopg.Cursor.execute = recorded_execute  # type: ignore[method-assign,assignment]
    for name, lookup in lookups.items():
        setattr(identity_queries, name, outside(lookup))
    try:
        yield pages
    finally:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        for name, lookup in lookups.items():
            setattr(identity_queries, name, lookup)


def _bookkeeping(query: Any) -> bool:
    """Statements of the pool's own (a connection's check and reset), not of the list."""
    return isinstance(query, str) and query.strip().upper() in ("SELECT 1", "ROLLBACK", "DISCARD ALL")


def statements_of(cloud: ServersCloud) -> dict[str, Statements]:
    """Each listing's statements, page by page, from one walk through the composed API in this process."""
    deps, close = build(cloud.settings)
    try:
        client = falcon.testing.TestClient(create_app(deps))
        user = {"name": "admin", "domain": {"id": "default"}, "password": PASSWORD}
        scope = {"project": {"name": "admin", "domain": {"id": "default"}}}
        auth = {"identity": {"methods": ["password"], "password": {"user": user}}, "scope": scope}
        token = client.simulate_post("/identity/v3/auth/tokens", json={"auth": auth}).headers[
            "X-Subject-Token"
        ]
        out = {}
        for listing in LISTINGS:
            with recording() as pages:

                def get(path: str, headers: dict[str, str], pages: Statements = pages) -> dict[str, Any]:
                    pages.append([])
                    r = client.simulate_get(path, headers=headers)
                    if r.status_code != 200:
                        raise RuntimeError(f"GET {path}: {r.status_code} {r.text[:300]}")
                    return r.json  # type: ignore[no-any-return]

                walk(get, listing, token)  # warm: pooled connections, prepared statements
                pages.clear()
                walk(get, listing, token)
            out[listing.name] = pages
        return out
    finally:
        close()


def replay(conn: psycopg.Connection[Any], pages: Statements, items: int) -> int:
    """Run a walk's statements, fetching their rows as tuples; ``items``: what the walk listed."""
    with conn.cursor() as cur:
        for page in pages:
            for query, params, _ in _resources(page):
                cur.execute(query, params)
                if cur.description is not None:
                    cur.fetchall()
    return items


def http_floor_walk(
    get: Callable[[str, dict[str, str]], dict[str, Any]], route: str, index: int, pages: int, items: int
) -> int:
    for page in range(pages):
        get(f"/{route}/{index}/{page}", {})
    return items


def repeated(times: int, walk_once: Callable[..., int], *args: Any) -> Callable[[], int]:
    """``walk_once(*args)`` ``times`` over, as one measurement: the items listed in all."""
    return lambda: sum(walk_once(*args) for _ in range(times))


def _resources(page: list[tuple[Any, Any, bool]]) -> list[tuple[Any, Any, bool]]:
    """A page's statements but the token's lookup (the servers' bench leaves it out of its floor)."""
    return [s for s in page if not s[2]]


def as_text(conn: psycopg.Connection[Any], recorded: dict[str, Statements]) -> dict[str, Statements]:
    """The statements with their SQL as text (for the HTTP floor's process), by listing index."""
    return {
        str(i): [
            [(q if isinstance(q, str) else q.as_string(conn), p, token) for q, p, token in page]
            for page in recorded[lst.name]
        ]
        for i, lst in enumerate(LISTINGS)
    }


# -- the cloud's other items ----------------------------------------------------------------------
def add_items(cloud: ServersCloud, items: int) -> None:
    """``items`` flavors, key pairs, images and server groups of the admin, through their events."""
    project, user = cloud.seeded.project_id, cloud.seeded.user_id
    builder = LogBuilder(cloud.app.recorder, cloud.app.mapper)  # type: ignore[arg-type]
    for n in range(items):
        public = (
            Ed25519PrivateKey.generate()
            .public_key()
            .public_bytes(keys.Encoding.OpenSSH, keys.PublicFormat.OpenSSH)
        )
        builder.emit(
            Flavor.create(flavorid=f"b.{n}", name=f"bench.{n}", vcpus=1 + n % 8, ram=512, disk=10),
            KeyPair.create(user, f"key-{n}", public.decode()),
            ServerGroup.create(f"group-{n}", project, user, "anti-affinity"),
            Image.create(
                uuid.uuid4(),
                name=f"image-{n}",
                owner=project,
                visibility="private",
                container_format="bare",
                disk_format="qcow2",
                min_disk=0,
                min_ram=0,
                protected=False,
                tags=["bench"],
                properties={"os_distro": "debian"},
            ),
        )
    builder.flush()
    with psycopg.connect(cloud.settings.database_url or "", autocommit=True) as conn:
        rebuild(conn, cloud.app.recorder, cloud.app.mapper)  # type: ignore[arg-type]


def floors(name: str) -> tuple[str, str, str, str, str]:
    """A listing's floors: its statements in a raw psycopg loop, served by ``http_floor``, served
    with the token's lookup before them, with the lookup beside them, and with the lookup in one
    pipeline with the first of them."""
    return (
        f"{name}: its statements, raw psycopg",
        f"{name}: its statements, falcon + gunicorn",
        f"{name}: the token's lookup and its statements, falcon + gunicorn",
        f"{name}: the token's lookup beside its statements, falcon + gunicorn",
        f"{name}: the token's lookup pipelined with its statements, falcon + gunicorn",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_lists", description=__doc__)
    parser.add_argument("--servers", type=int, default=1000)
    parser.add_argument("--items", type=int, default=1000, help="flavors, key pairs, images, groups each")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--walks", type=int, default=5, help="walks of each list a measurement")
    args = parser.parse_args(argv)
    with servers_cloud("lists", args.servers) as cloud:
        add_items(cloud, args.items)
        print("\n".join(machine_lines()))
        recorded = statements_of(cloud)
        db_url = cloud.settings.database_url or ""
        statements_file = cloud.tmp / "statements.pickle"
        with psycopg.connect(db_url, autocommit=True) as conn:
            statements_file.write_bytes(pickle.dumps(as_text(conn, recorded)))
        port, floor_port = free_port(), free_port()
        served = dataclasses.replace(cloud.settings, api_bind=f"127.0.0.1:{port}")
        floor_api = dataclasses.replace(cloud.settings, api_bind=f"127.0.0.1:{floor_port}")
        os.environ["STRATUS_BENCH_STATEMENTS"] = str(statements_file)
        with (
            deployed_api(served, cloud.tmp / "api.log") as proc,
            deployed_api(floor_api, cloud.tmp / "floor.log", "tests.bench.http_floor:get_app()"),
            psycopg.connect(db_url, autocommit=True) as raw,
        ):
            token, get, floor_get = login(port), http_get(port), http_get(floor_port)
            bench = Bench(CpuMeter(proc.pid))
            counts = {listing.name: walk(get, listing, token) for listing in LISTINGS}
            cpu: dict[str, list[float]] = {listing.name: [] for listing in LISTINGS}
            for r in range(args.rounds):
                print(f"round {r + 1}/{args.rounds} (load {loadavg()})")
                for i, listing in enumerate(LISTINGS):
                    name, pages, items = listing.name, recorded[listing.name], counts[listing.name]
                    floor, over_http, with_token, beside, pipelined = floors(name)
                    bench.measure(floor, "items", repeated(args.walks, replay, raw, pages, items))
                    for path, route in (
                        (over_http, "floor"),
                        (with_token, "floor-token"),
                        (beside, "floor-beside"),
                        (pipelined, "floor-pipelined"),
                    ):
                        walk_floor = repeated(
                            args.walks, http_floor_walk, floor_get, route, i, len(pages), items
                        )
                        bench.measure(path, "items", walk_floor, floor=floor)
                    with TreeCpu(proc.pid) as api:
                        bench.measure(
                            name, "items", repeated(args.walks, walk, get, listing, token), floor=floor
                        )
                    cpu[name].append(sum(api.seconds.values()) / (len(pages) * args.walks))
            print(f"load average at end: {loadavg()}")
        print()
        print(bench.table(f"The API's lists, {PAGE} a page, against their statements ({args.rounds} rounds)"))
        print()
        print(
            "| list | items | pages | statements | API / its statements | HTTP floor / its statements "
            "| HTTP floor with the token's lookup / its statements "
            "| HTTP floor with the lookup beside / its statements | API / HTTP floor with the lookup beside "
            "| HTTP floor with the lookup pipelined / its statements "
            "| API / HTTP floor with the lookup pipelined "
            "| API processes' CPU per page, ms |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for listing in LISTINGS:
            name, pages = listing.name, recorded[listing.name]
            floor, over_http, with_token, beside, pipelined = floors(name)
            per_round = ", ".join(f"{1e3 * s:.1f}" for s in cpu[name])
            ratios = [
                bench.ratio(p, f)
                for p, f in ((name, floor), (over_http, floor), (with_token, floor), (beside, floor))
            ]
            ratios += [bench.ratio(name, beside), bench.ratio(pipelined, floor), bench.ratio(name, pipelined)]
            shown = " | ".join("-" if r is None else f"{r:.2f}" for r in ratios)
            statements = sum(len(_resources(page)) for page in pages)
            print(f"| {name} | {counts[name]} | {len(pages)} | {statements} | {shown} | {per_round} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
