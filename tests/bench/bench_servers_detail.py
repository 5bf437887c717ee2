"""``GET /v2.1/servers/detail`` through gunicorn, against a raw psycopg loop returning the same rows.

Run: ``python -m tests.bench.bench_servers_detail [--servers 10000] [--rounds 3]`` (a few minutes).
It starts its own nats-server (temporary store, free port) and uses PostgreSQL from ``DATABASE_URL``,
else 127.0.0.1:5432 (user postgres), else an embedded one, in a database of its own that it drops at
the end. It seeds identity (``processes.bootstrap``), appends N servers of the admin's project through
their real lifecycle events (requested, claimed on one of 50 hosts, scheduled, spawning, spawned:
all ACTIVE), rebuilds the read models from that log, starts the API as deployed (``stratus api``'s
gunicorn command line, ``processes.api.api_argv``: threaded workers, keep-alive) and then
measures, in each of R interleaved rounds:

- the floor: a psycopg loop over the same pages (100 rows, newest first, keyset paging on
  ``(created_at, id)``, the read model's own index), the rows fetched as tuples;
- the same query through ``projections.queries.list_servers`` with the API's views applied
  (``api.server_views.server_view``) in this process, no HTTP: what the API's Python costs;
- every page of ``GET /v2.1/servers/detail?limit=100`` following the ``servers_links`` ``next``
  marker, over HTTP to gunicorn (one request at a time, on a kept-alive connection as openstacksdk's
  session keeps it; the client is ``tests.bench.rawhttp``), bodies parsed;
- the first page alone, repeated (a user's typical request: latency, not throughput).

Rates are servers per second (requests per second for the first page); ratios within a round, then
the median over rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import http.client
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import psycopg
from falcon import testing
from psycopg.rows import dict_row

from api.server_views import server_view
from commands.app import Stratus
from commands.flavor import Flavor
from commands.host import Host, Resources
from commands.instance import Instance
from processes import bootstrap
from projections import queries
from projections.rebuild import rebuild
from projections.schema import LIVE_SCHEMA
from stratus import serialization
from stratus.config import Settings
from stratus.context import Actor
from stratus.eventstore import Factory, NatsBridge
from stratus.postgres import create_database, drop_database
from tests.bench.bench_rebuild import LogBuilder, postgres_admin_url
from tests.bench.harness import Bench, CpuMeter, TreeCpu, deployed_api, loadavg, machine_lines, nats_server
from tests.bench.rawhttp import RawHttp
from tests.fixtures.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "bench-admin-password"
PAGE = 100
FLOOR = "raw psycopg: the same page queries, rows as tuples"
IN_PROCESS = "list_servers + server_view in this process (no HTTP)"
HTTP_ALL = "GET /servers/detail?limit=100, every page, gunicorn"
HTTP_FIRST = "GET /servers/detail?limit=100, first page, gunicorn"
FIRST_FLOOR = "raw psycopg: the first page query"


def build_servers(builder: LogBuilder, project_id: str, user_id: str, count: int) -> None:
    """``count`` ACTIVE servers of one project, through the events a real boot records."""
    flavor = Flavor.create(flavorid="m1.small", name="m1.small", vcpus=1, ram=512, disk=10)
    hosts = [Host.register(f"compute-{i:03}", 512, 2**21, 2**16) for i in range(50)]
    builder.emit(flavor, *hosts)
    for n in range(count):
        host = hosts[n % len(hosts)]
        inst = Instance.request(
            uuid4(),
            name=f"vm-{n}",
            project_id=project_id,
            user_id=user_id,
            flavor=flavor.snapshot_for_instance(),
            image_ref="cirros-0.6.2-x86_64",
            metadata={"role": "web", "n": str(n)},
            availability_zone=None,
            request_key=None,
            tags=["bench"],
        )
        host.claim(inst.server_id, Resources.of_flavor(inst.flavor))
        inst.schedule(host.hostname)
        inst.start_spawning(host.hostname)
        inst.finish_spawning(1)
        builder.emit(inst, host)
    builder.flush()


@dataclasses.dataclass
class ServersCloud:
    """A cloud of ACTIVE servers for a bench: its settings (the log, a database of its own, ``tmp``
    as data directory), the seeded admin, the application on the log, where PostgreSQL came from."""

    settings: Settings
    seeded: bootstrap.Seeded
    app: Stratus
    pg_source: str
    tmp: Path
    events: int  # appended for the servers
    built_seconds: float  # to append them
    rebuilt: object  # what the rebuild said


@contextlib.contextmanager
def servers_cloud(name: str, servers: int, **settings: Any) -> Iterator[ServersCloud]:
    """nats-server (its own, temporary), a database of its own (dropped after), the identity seeded,
    ``servers`` ACTIVE servers of the admin's project through their events, the read models rebuilt
    from that log; ``settings``: further settings (binds, say)."""
    with (
        nats_server() as server,
        postgres_admin_url() as (admin_url, pg_source),
        tempfile.TemporaryDirectory(prefix=f"stratus-bench-{name}-") as tmp,
    ):
        dbname = f"bench_{name}_{uuid.uuid4().hex[:8]}"
        db_url = create_database(admin_url, dbname)
        s = dataclasses.replace(
            Settings(),
            nats_urls=(server.url,),
            stream="BENCH",
            subject_prefix="bench.ev",
            database_url=db_url,
            data_dir=Path(tmp),
            token_key_file=Path(tmp) / "token.key",
            **settings,
        )
        bridge = NatsBridge(s.nats_urls, name="bench").start()
        try:
            seeded = bootstrap.main(s, PASSWORD)
            app = Stratus(Factory(bridge=bridge, settings=s))
            builder = LogBuilder(app.recorder, app.mapper)  # type: ignore[arg-type]
            started = time.perf_counter()
            build_servers(builder, seeded.project_id, seeded.user_id, servers)
            built = time.perf_counter() - started
            with psycopg.connect(db_url, autocommit=True) as conn:
                rebuilt = rebuild(conn, app.recorder, app.mapper)  # type: ignore[arg-type]
            yield ServersCloud(s, seeded, app, pg_source, Path(tmp), builder.appended, built, rebuilt)
        finally:
            bridge.close()
            with contextlib.suppress(psycopg.Error):
                drop_database(admin_url, dbname)


# -- the floor and the in-process path ------------------------------------------------------------
def raw_pages(conn: psycopg.Connection[Any], project_id: str, pages: int | None = None) -> int:
    """The API's page query (``queries.list_servers``' SQL for a project), page after page."""
    first = f"SELECT * FROM {LIVE_SCHEMA}.instances WHERE project_id = %s AND NOT deleted"
    order = " ORDER BY created_at DESC, id DESC LIMIT %s"
    rows: list[Any] = []
    total, marker = 0, None
    with conn.cursor() as cur:
        while True:
            if marker is None:
                cur.execute(first + order, (project_id, PAGE))
            else:
                cur.execute(first + " AND (created_at, id) < (%s, %s)" + order, (project_id, *marker, PAGE))
            rows = cur.fetchall()
            total += len(rows)
            if len(rows) < PAGE or (pages is not None and total >= pages * PAGE):
                return total
            last = rows[-1]
            marker = (last[INSTANCE_CREATED], last[0])


INSTANCE_CREATED = -1  # set from the table's column order at start


def in_process(conn: psycopg.Connection[Any], project_id: str, actor: Actor) -> int:
    """The API's own query and views, without HTTP or gunicorn."""
    req = testing.create_req(path="/v2.1/servers/detail")
    req.context.microversion = None
    total, marker = 0, None
    while True:
        rows = queries.list_servers(conn, project_id=project_id, limit=PAGE, marker=marker)
        view = server_view(req, actor)
        body = {"servers": [view(r, None) for r in rows]}
        serialization.dumps(body)
        total += len(rows)
        if len(rows) < PAGE:
            return total
        marker = rows[-1].id


# -- HTTP ---------------------------------------------------------------------------------------
def http_get(port: int) -> Callable[[str, dict[str, str]], dict[str, Any]]:
    """GETs over one kept-alive connection (as openstacksdk's session keeps it), opened again when the
    server closed it; each body parsed, as a client reads it. ``tests.bench.rawhttp`` (not
    ``http.client``, whose header parsing took ~5 % of a first page's rate from the server beside it)."""
    client = RawHttp(port)

    def get(path: str, headers: dict[str, str]) -> dict[str, Any]:
        status, data = client.get(path, headers)
        if status != 200:
            raise RuntimeError(f"GET {path}: {status} {data[:300]!r}")
        return serialization.loads(data)  # type: ignore[no-any-return]

    return get


def http_pages(
    get: Callable[[str, dict[str, str]], dict[str, Any]], token: str, pages: int | None = None
) -> int:
    path = f"/v2.1/servers/detail?limit={PAGE}"
    total = 0
    while True:
        doc = get(path, {"X-Auth-Token": token})
        total += len(doc["servers"])
        links = doc.get("servers_links") or []
        if not links or (pages is not None and total >= pages * PAGE):
            return total
        href = links[0]["href"]
        path = href[href.index("/v2.1/") :]


def login(port: int, project: str = "admin") -> str:
    body = {
        "auth": {
            "identity": {
                "methods": ["password"],
                "password": {"user": {"name": "admin", "domain": {"id": "default"}, "password": PASSWORD}},
            },
            "scope": {"project": {"name": project, "domain": {"id": "default"}}},
        }
    }
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            "POST",
            "/identity/v3/auth/tokens",
            serialization.dumps(body),
            {"Content-Type": "application/json"},
        )
        r = conn.getresponse()
        r.read()
        token = r.getheader("X-Subject-Token")
        if r.status != 201 or not token:
            raise RuntimeError(f"login: {r.status}")
        return token
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    global INSTANCE_CREATED
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_servers_detail", description=__doc__)
    parser.add_argument("--servers", type=int, default=10_000, help="servers in the read model")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--first-page-requests", type=int, default=200)
    args = parser.parse_args(argv)

    with servers_cloud("detail", args.servers) as cloud:
        settings, seeded, db_url = cloud.settings, cloud.seeded, cloud.settings.database_url or ""
        with psycopg.connect(db_url, autocommit=True) as conn:
            pg_version = conn.execute("SHOW server_version").fetchone()
            columns = [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = %s "
                    "AND table_name = 'instances' ORDER BY ordinal_position",
                    (LIVE_SCHEMA,),
                )
            ]
            INSTANCE_CREATED = columns.index("created_at")
        source = f"{pg_version[0] if pg_version else '?'} ({cloud.pg_source})"
        print("\n".join(machine_lines({"postgresql": source})))
        print(
            f"log: {cloud.events} events for {args.servers} servers in {cloud.built_seconds:.1f} s; "
            f"rebuild: {cloud.rebuilt}"
        )
        port = free_port()
        actor = Actor(seeded.user_id, seeded.project_id, ("admin", "member", "reader"))
        served = dataclasses.replace(settings, api_bind=f"127.0.0.1:{port}")
        with deployed_api(served, cloud.tmp / "api.log") as proc:
            token, get = login(port), http_get(port)
            bench = Bench(CpuMeter(proc.pid))
            with (
                psycopg.connect(db_url, autocommit=True) as raw,
                psycopg.connect(db_url, autocommit=True, row_factory=dict_row) as rows_conn,
            ):
                assert raw_pages(raw, seeded.project_id) == args.servers
                assert http_pages(get, token) == args.servers, "the API does not list every server"
                n = args.first_page_requests
                # the gunicorn master's and workers' CPU per page (the API's own cost, which the
                # machine's load moves much less than the wall time)
                api_cpu: dict[str, list[float]] = {HTTP_ALL: [], HTTP_FIRST: []}
                for r in range(args.rounds):
                    print(f"round {r + 1}/{args.rounds} (load {loadavg()})")
                    bench.measure(FLOOR, "servers", lambda: raw_pages(raw, seeded.project_id))
                    bench.measure(
                        IN_PROCESS, "servers", lambda: in_process(rows_conn, seeded.project_id, actor),
                        floor=FLOOR,
                    )  # fmt: skip
                    with TreeCpu(proc.pid) as every:
                        done = bench.measure(HTTP_ALL, "servers", lambda: http_pages(get, token), floor=FLOOR)
                    api_cpu[HTTP_ALL].append(sum(every.seconds.values()) / (done.count / PAGE))
                    bench.measure(
                        FIRST_FLOOR,
                        "pages",
                        lambda: sum(raw_pages(raw, seeded.project_id, 1) // PAGE for _ in range(n)),
                    )
                    with TreeCpu(proc.pid) as first:
                        bench.measure(
                            HTTP_FIRST,
                            "pages",
                            lambda: sum(http_pages(get, token, 1) // PAGE for _ in range(n)),
                            floor=FIRST_FLOOR,
                        )  # fmt: skip
                    api_cpu[HTTP_FIRST].append(sum(first.seconds.values()) / n)
            print(f"load average at end: {loadavg()}")
        print()
        title = (
            f"GET /servers/detail over {args.servers} servers, {PAGE} a page "
            f"({args.rounds} rounds; the first page {n} times a round)"
        )
        print(bench.table(title, baselines=[("in-process path", IN_PROCESS)]))
        for path, seconds in api_cpu.items():
            per_round = ", ".join(f"{1e3 * s:.1f}" for s in seconds)
            median = 1e3 * statistics.median(seconds)
            print(f"API processes' CPU per page, {path}: median {median:.1f} ms ({per_round})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
