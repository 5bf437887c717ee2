"""The API's lists' CPU per request in process, one code tree against another on the same cloud.

    python -m tests.bench.profile_lists [--trees DIR,DIR] [--servers 1000] [--items 1000]
        [--requests 600] [--rounds 5] [--alternate 2] [--profile PATH] [--only TEXT]

The cloud is ``bench_lists``' (``bench_servers_detail``'s servers, ``--items`` flavors, key pairs,
images and server groups of the admin, 50 hosts). For each code tree in ``--trees`` (a checkout's
root; the default is this one), ``--alternate`` times in turn, a child process with that tree on
its ``PYTHONPATH`` builds the composed API (``api.app.build``, ``create_app``) and calls it as a WSGI
callable (no test client), each path ``--requests`` times a round: it prints the process's CPU per
request (all its threads) and the request thread's, the lowest of ``--rounds`` rounds. So two
versions of the code are measured in one window, on one cloud, alternated.

``--profile PATH``: then cProfile (the request thread's CPU clock) of ``PATH``'s requests in the
last child, the top functions by their own time. ``--only TEXT``: only the paths that contain it
(to sample one with py-spy, say).
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import io
import os
import pickle
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PATHS = (
    ("/v2.1/os-hypervisors/detail", "2.33"),  # as bench_lists asks it
    ("/v2.1/os-hypervisors/detail?limit=100", "2.33"),
    ("/v2.1/os-hypervisors/detail?limit=1", "2.33"),
    ("/v2.1/os-keypairs?limit=100", "2.35"),
    ("/v2.1/os-keypairs?limit=1", "2.35"),
    ("/v2.1/servers?limit=100", None),
    ("/v2.1/servers?limit=1", None),
    ("/v2.1/flavors/detail?limit=100", None),  # a control: not changed
    ("/image/v2/images?limit=100", None),  # as bench_lists walks it
    ("/image/v2/images?limit=1", None),
)


def _child(spec_file: str) -> int:
    import falcon.testing

    from api.app import build, create_app
    from tests.bench.bench_servers_detail import PASSWORD

    spec = pickle.loads(Path(spec_file).read_bytes())
    deps, close = build(spec["settings"])
    try:
        app = create_app(deps)
        client = falcon.testing.TestClient(app)
        user = {"name": "admin", "domain": {"id": "default"}, "password": PASSWORD}
        scope = {"project": {"name": "admin", "domain": {"id": "default"}}}
        body = {"auth": {"identity": {"methods": ["password"], "password": {"user": user}}, "scope": scope}}
        token = client.simulate_post("/identity/v3/auth/tokens", json=body).headers["X-Subject-Token"]

        def request(path: str, version: str | None) -> Any:
            route, _, query = path.partition("?")
            headers = {"X-Auth-Token": token}
            if version:
                headers["OpenStack-API-Version"] = f"compute {version}"
            environ = falcon.testing.create_environ(route, query_string=query, headers=headers)
            status: list[str] = []

            def start_response(s: str, h: Any, exc: Any = None) -> None:
                status.append(s)

            def one() -> bytes:
                result = app(dict(environ), start_response)
                try:
                    return b"".join(result)
                finally:
                    close_it = getattr(result, "close", None)
                    if close_it is not None:
                        close_it()

            one()
            if not status[0].startswith("200"):
                raise RuntimeError(f"GET {path}: {status[0]}")
            return one

        calls = [(p, request(p, v)) for p, v in spec["paths"]]
        for _ in range(20):  # warm: pooled connections, prepared statements, the liveness mirror
            for _, one in calls:
                one()
        n = spec["requests"]
        best: dict[str, tuple[float, float]] = {}
        for _ in range(spec["rounds"]):
            for path, one in calls:
                cpu, thread = time.process_time(), time.thread_time()
                for _ in range(n):
                    one()
                got = ((time.process_time() - cpu) / n * 1e3, (time.thread_time() - thread) / n * 1e3)
                old = best.get(path)
                best[path] = got if old is None or got[0] < old[0] else old
        for path, (cpu, thread) in best.items():
            print(f"  {path:45s} {cpu:.3f} ({thread:.3f})")
        if spec.get("profile"):
            one = dict(calls)[spec["profile"]]
            profiler = cProfile.Profile(time.thread_time)
            profiler.enable()
            for _ in range(n):
                one()
            profiler.disable()
            out = io.StringIO()
            stats = pstats.Stats(profiler, stream=out)
            stats.sort_stats(os.environ.get("SORT", "tottime")).print_stats(int(os.environ.get("TOP", "45")))
            print(out.getvalue())
    finally:
        close()
    return 0


def _deployed(cloud: Any, args: argparse.Namespace) -> int:
    """Each path asked of the API as ``stratus api`` serves it (``bench_lists``' ``deployed_api``)
    over one kept-alive connection: the API processes' CPU and the wall time per request, the
    lowest of the rounds; with ``--spy``, py-spy's samples of the workers holding the GIL (``--gil``)
    while those paths are asked, written to ``<--spy-out>/spy-<n>.txt`` (raw, one stack a line; the
    ``PYSPY`` environment variable names py-spy's binary)."""
    from tests.bench.bench_servers_detail import http_get, login
    from tests.bench.harness import TreeCpu, deployed_api, loadavg
    from tests.fixtures.processes import free_port

    port = free_port()
    served = dataclasses.replace(cloud.settings, api_bind=f"127.0.0.1:{port}")
    with deployed_api(served, cloud.tmp / "api.log") as proc:
        token, get = login(port), http_get(port)
        print(f"deployed (load {loadavg()}, {time.strftime('%H:%M:%S')}): API CPU ms, wall ms per request")
        for n, (path, version) in enumerate(p for p in PATHS if args.only is None or args.only in p[0]):
            headers = {"X-Auth-Token": token}
            if version:
                headers["OpenStack-API-Version"] = f"compute {version}"
            for _ in range(50):  # warm
                get(path, headers)
            spy = None
            if args.spy and args.spy in path:
                out = Path(args.spy_out) / f"spy-{n}.txt"
                spy = subprocess.Popen(
                    [os.environ.get("PYSPY", "py-spy"), "record", "--gil", "--subprocesses", "--rate", "500",
                     "--format", "raw", "-o", str(out), "-p", str(proc.pid)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
                time.sleep(1)
            best: tuple[float, float] | None = None
            for _ in range(args.rounds):
                with TreeCpu(proc.pid) as api:
                    started = time.perf_counter()
                    for _ in range(args.requests):
                        get(path, headers)
                    wall = (time.perf_counter() - started) / args.requests * 1e3
                got = (sum(api.seconds.values()) / args.requests * 1e3, wall)
                best = got if best is None or got[0] < best[0] else best
            if spy is not None:
                spy.send_signal(2)  # SIGINT: py-spy writes its file
                spy.wait(30)
                print(f"  py-spy: {out}")
            assert best is not None
            print(f"  {path:45s} {best[0]:.3f}, {best[1]:.3f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.profile_lists", description=__doc__)
    parser.add_argument("--trees", default=str(Path(__file__).resolve().parents[2]))
    parser.add_argument("--servers", type=int, default=1000)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--alternate", type=int, default=2)
    parser.add_argument("--profile", default=None)
    parser.add_argument("--only", default=None, help="only the paths that contain this")
    parser.add_argument("--deployed", action="store_true", help="the API as deployed instead (this tree)")
    parser.add_argument("--spy", default=None, help="with --deployed: py-spy --gil of the paths with this")
    parser.add_argument("--spy-out", default=tempfile.gettempdir(), help="where py-spy's files go")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.child)

    from tests.bench.bench_lists import add_items
    from tests.bench.bench_servers_detail import servers_cloud
    from tests.bench.harness import loadavg

    trees = args.trees.split(",")
    with servers_cloud("proflists", args.servers) as cloud:
        add_items(cloud, args.items)
        if args.deployed:
            return _deployed(cloud, args)
        spec_file = cloud.tmp / "spec.pickle"
        for turn in range(args.alternate):
            for i, tree in enumerate(trees):
                last = turn == args.alternate - 1 and i == len(trees) - 1
                spec = {
                    "settings": dataclasses.replace(cloud.settings),
                    "paths": [p for p in PATHS if args.only is None or args.only in p[0]],
                    "requests": args.requests,
                    "rounds": args.rounds,
                    "profile": args.profile if last else None,
                }
                spec_file.write_bytes(pickle.dumps(spec))
                at = time.strftime("%H:%M:%S")
                print(f"{tree} (load {loadavg()}, {at}): CPU ms per request (request thread)")
                env = {**os.environ, "PYTHONPATH": tree}
                subprocess.run(
                    [sys.executable, "-m", "tests.bench.profile_lists", "--child", str(spec_file)],
                    env=env,
                    cwd=tree,
                    check=True,
                )
                sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
