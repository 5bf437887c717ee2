"""The metadata service (``stratus metadata``) answering ``meta_data.json``, against a raw PostgreSQL
lookup of the same server's row.

Run: ``python -m tests.bench.bench_metadata [--servers 1000] [--requests 500] [--rounds 3]`` (about a
minute). It starts its own nats-server (temporary store, free port) and uses PostgreSQL from
``DATABASE_URL``, else 127.0.0.1:5432 (user postgres), else an embedded one, in a database of its own
that it drops at the end. It seeds identity, appends N ACTIVE servers through their real lifecycle
events (``bench_servers_detail.build_servers``), rebuilds the read models from that log, starts the
service as deployed (gunicorn's threaded worker, ``processes.metadata:get_app()``) with a proxy key,
and then measures, in each of R interleaved rounds, over the same random servers:

- the floor: ``SELECT * FROM instances WHERE id = %s`` in a psycopg loop, the row as a tuple (the
  one row the service must read to answer; it also reads the server's key pair and user data);
- ``GET /openstack/latest/meta_data.json`` as a Neutron metadata proxy sends it (``X-Instance-ID``,
  ``X-Tenant-ID``, ``X-Instance-ID-Signature``), one request at a time on one kept-alive
  connection, the body parsed;
- the same with a new connection per request, as a guest's ``curl`` makes it.

Rates are requests per second; ratios within a round, then the median over rounds.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import secrets
import sys
import tempfile
from pathlib import Path
from typing import Any

import psycopg

from api.metadata.caller import signature
from projections.schema import LIVE_SCHEMA
from tests.bench.bench_servers_detail import servers_cloud
from tests.bench.harness import Bench, CpuMeter, loadavg, machine_lines
from tests.fixtures.processes import free_port, serving

PATH = "/openstack/latest/meta_data.json"
FLOOR = "raw psycopg: the server's row by id"
KEPT = "GET meta_data.json, one kept-alive connection"
FRESH = "GET meta_data.json, a new connection each"


def server_ids(conn: psycopg.Connection[Any], project_id: str) -> list[str]:
    rows = conn.execute(f"SELECT id FROM {LIVE_SCHEMA}.instances WHERE project_id = %s", (project_id,))
    return [str(r[0]) for r in rows]


def raw_rows(conn: psycopg.Connection[Any], ids: list[str]) -> int:
    with conn.cursor() as cur:
        for sid in ids:
            cur.execute(f"SELECT * FROM {LIVE_SCHEMA}.instances WHERE id = %s", (sid,))
            assert cur.fetchone() is not None
    return len(ids)


def proxied(key: bytes, project_id: str, sid: str) -> dict[str, str]:
    return {"X-Instance-ID": sid, "X-Tenant-ID": project_id, "X-Instance-ID-Signature": signature(key, sid)}


def over_http(port: int, key: bytes, project_id: str, ids: list[str], *, keep: bool) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        for sid in ids:
            if not keep:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", PATH, headers=proxied(key, project_id, sid))
            r = conn.getresponse()
            body = r.read()
            if r.status != 200:
                raise RuntimeError(f"GET {PATH} for {sid}: {r.status} {body[:300]!r}")
            assert json.loads(body)["uuid"] == sid
    finally:
        conn.close()
    return len(ids)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_metadata", description=__doc__)
    parser.add_argument("--servers", type=int, default=1000, help="servers in the read model")
    parser.add_argument("--requests", type=int, default=500, help="requests per path and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    key = secrets.token_hex(32).encode()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="stratus-bench-metadata-key-") as keys:
        key_file = Path(keys) / "proxy.key"
        key_file.write_bytes(key)
        with servers_cloud(
            "metadata", args.servers, metadata_proxy_key_file=key_file, metadata_bind=f"127.0.0.1:{port}"
        ) as cloud:
            settings, project_id = cloud.settings, cloud.seeded.project_id
            db_url = settings.database_url or ""
            with psycopg.connect(db_url, autocommit=True) as conn:
                pg_version = conn.execute("SHOW server_version").fetchone()
                ids = server_ids(conn, project_id)
            version = f"{pg_version[0] if pg_version else '?'} ({cloud.pg_source})"
            print("\n".join(machine_lines({"postgresql": version})))
            rng = random.Random(7)
            sample = [rng.choice(ids) for _ in range(args.requests)]
            threads = settings.metadata_threads
            argv = [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}",
                    "--worker-class", "gthread", "--workers", "1", "--threads", str(threads),
                    "--graceful-timeout", "5", "processes.metadata:get_app()"]  # fmt: skip
            with serving(argv, settings, port, cloud.tmp / "gunicorn.log") as proc:
                bench = Bench(CpuMeter(proc.pid))
                with psycopg.connect(db_url, autocommit=True) as raw:
                    over_http(port, key, project_id, sample[:20], keep=True)  # warm: pool, imports
                    for r in range(args.rounds):
                        print(f"round {r + 1}/{args.rounds} (load {loadavg()})")
                        bench.measure(FLOOR, "requests", lambda: raw_rows(raw, sample))
                        bench.measure(
                            KEPT, "requests", lambda: over_http(port, key, project_id, sample, keep=True),
                            floor=FLOOR,
                        )  # fmt: skip
                        bench.measure(
                            FRESH, "requests", lambda: over_http(port, key, project_id, sample, keep=False),
                            floor=FLOOR,
                        )  # fmt: skip
                print(f"load average at end: {loadavg()}")
            print()
            title = (
                f"The metadata service's meta_data.json over {args.servers} servers "
                f"({args.requests} requests a path and round, {args.rounds} rounds; gunicorn gthread, "
                f"1 worker x {threads} threads; one client)"
            )
            print(bench.table(title))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
