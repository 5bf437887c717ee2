"""Where a ``GET /servers/detail`` request's time goes, in process: the composed API (``api.app.build``
and ``create_app``, as gunicorn's workers run it) through falcon's test client, on the same cloud as
``bench_servers_detail`` (servers through their events, read models rebuilt), first pages of 100.

Prints the CPU and wall time per request (min of rounds, this process's CPU, all threads) and the
hops to the NATS loop per request, then, with ``--profile``, cProfile's view of further requests.

    python -m tests.bench.profile_servers_detail [--servers 1000] [--requests 20] [--rounds 5] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time

import falcon.testing

from api.app import build, create_app
from tests.bench.bench_servers_detail import PASSWORD, servers_cloud

PATH = "/v2.1/servers/detail?limit=100"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.profile_servers_detail", description=__doc__)
    parser.add_argument("--servers", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=20, help="requests a round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="then cProfile one more round")
    args = parser.parse_args(argv)
    with servers_cloud("profile", args.servers) as cloud:
        deps, close = build(cloud.settings)
        try:
            client = falcon.testing.TestClient(create_app(deps))
            user = {"name": "admin", "domain": {"id": "default"}, "password": PASSWORD}
            scope = {"project": {"name": "admin", "domain": {"id": "default"}}}
            body = {
                "auth": {"identity": {"methods": ["password"], "password": {"user": user}}, "scope": scope}
            }
            headers = {
                "X-Auth-Token": client.simulate_post("/identity/v3/auth/tokens", json=body).headers[
                    "X-Subject-Token"
                ]
            }
            for _ in range(5):  # warm: pooled connections, prepared statements, the liveness mirror
                assert client.simulate_get(PATH, headers=headers).status_code == 200
            rounds = []
            for _ in range(args.rounds):
                hops, cpu, wall = deps.log.bridge.hops, time.process_time(), time.perf_counter()
                for _ in range(args.requests):
                    client.simulate_get(PATH, headers=headers)
                n = args.requests
                rounds.append(
                    (
                        (time.process_time() - cpu) / n * 1e3,
                        (time.perf_counter() - wall) / n * 1e3,
                        (deps.log.bridge.hops - hops) / n,
                    )
                )
            print("per request, each round: CPU ms, wall ms, hops to the NATS loop")
            print("  " + "; ".join(f"{c:.2f}, {w:.2f}, {h:.1f}" for c, w, h in rounds))
            print(f"min CPU {min(r[0] for r in rounds):.2f} ms, min wall {min(r[1] for r in rounds):.2f} ms")
            if args.profile:
                profiler = cProfile.Profile()
                profiler.enable()
                for _ in range(args.requests):
                    client.simulate_get(PATH, headers=headers)
                profiler.disable()
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats(
                    os.environ.get("SORT", "cumulative")
                ).print_stats(int(os.environ.get("TOP", "40")))
                print(out.getvalue())
        finally:
            close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
