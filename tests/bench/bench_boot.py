"""Boot times through the API: ``POST /v2.1/servers`` → ACTIVE on simulated hosts, at 1, 10 and 50
concurrent boots, against the hypervisor's own floor.

Run: ``python -m tests.bench.bench_boot [--hosts 20] [--boots 100]`` (a few minutes). It starts its
own nats-server (temporary store, free port) and uses PostgreSQL from ``DATABASE_URL``, else
127.0.0.1:5432, else an embedded one, in a database of its own that it drops at the end. The control
plane runs as deployed, each part in its own process: the API (gunicorn, 2 workers), the projector,
``--schedulers`` schedulers (default 1), and ``stratus simulate --hosts N`` (libvirt's test driver,
one host definition per host). The bench seeds identity, takes a token, lifts the admin project's
quota, creates a flavor, and then, for each concurrency C, runs C clients that each ``POST
/servers`` (HTTP, one request at a time) and wait for their server's ``Instance.Spawned`` (or
``Faulted``) event on the log, followed by one reader (``tests.bench.bench_placement.Watcher``), so
that nothing polls the API. Each client keeps its HTTP connection open between requests, as an
SDK's session does. Each boot's time is from just before its POST to the moment the reader
sees ACTIVE recorded.

The floor, in the same run: the same guest defined and started directly on libvirt's test driver
(``LibvirtDriver.spawn``, what a simulated host does per boot), one at a time.

Real QEMU guests are not measured here (see docs/performance.md, "Boot times").
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import http.client
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import libvirt

from processes import bootstrap
from stratus import serialization
from stratus.config import Settings
from stratus.postgres import create_database, drop_database
from tests.bench.bench_placement import Watcher, process
from tests.bench.bench_rebuild import postgres_admin_url
from tests.bench.bench_servers_detail import PASSWORD, login
from tests.bench.harness import TreeCpu, loadavg, machine_lines, nats_server
from tests.fixtures.processes import ROOT, free_port, serving
from workers.libvirt_driver import LibvirtDriver
from workers.virt import GuestSpec


def send(
    port: int,
    token: str,
    method: str,
    path: str,
    body: Any,
    conn: http.client.HTTPConnection | None = None,
    microversion: str = "2.52",
) -> tuple[int, Any]:
    """One request; on ``conn`` (kept open, as an SDK session keeps its connections) when given."""
    own = conn is None
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        headers = {
            "X-Auth-Token": token,
            "Content-Type": "application/json",
            "OpenStack-API-Version": f"compute {microversion}",
        }
        conn.request(method, path, serialization.dumps(body), headers)
        r = conn.getresponse()
        data = r.read()
        return r.status, serialization.loads(data) if data else None
    except (OSError, http.client.HTTPException):
        conn.close()  # the server closed a kept-alive connection: the next request reconnects
        raise
    finally:
        if own:
            conn.close()


@dataclasses.dataclass
class Round:
    concurrency: int
    latencies: list[float]
    errors: int
    seconds: float
    why: dict[str, int] = dataclasses.field(default_factory=dict)  # what the errors were
    count: int = 1  # servers per request


def boots(
    port: int, tokens: list[str], watcher: Watcher, flavor: str, concurrency: int, total: int, count: int = 1
) -> Round:
    """``concurrency`` clients, client c creating in project ``c % len(tokens)`` (a token each);
    ``count`` servers per request (a multi-create: its time runs until the last one is ACTIVE)."""
    per_client = max(total // (concurrency * count), 1)
    latencies: list[float] = []
    why: dict[str, int] = {}
    lock = threading.Lock()
    start = threading.Barrier(concurrency + 1)

    def client(c: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)  # kept alive, like an SDK's
        start.wait()
        for i in range(per_client):
            body: dict[str, Any] = {
                "server": {"name": f"b{concurrency}-{c}-{i}", "flavorRef": flavor, "networks": "none"}
            }
            if count > 1:
                body["server"].update(min_count=count, max_count=count, return_reservation_id=True)
            began = time.perf_counter()
            try:
                status, doc = send(port, tokens[c % len(tokens)], "POST", "/v2.1/servers", body, conn)
            except (OSError, http.client.HTTPException):  # a kept-alive connection closed: once more
                status, doc = send(port, tokens[c % len(tokens)], "POST", "/v2.1/servers", body, conn)
            if status != 202:
                outcome = None
            elif count > 1:
                outcome = watcher.wait_reservation(doc["reservation_id"], count)
            else:
                outcome = watcher.wait(doc["server"]["id"])
            with lock:
                if outcome is not None and outcome[1] == "spawned":
                    latencies.append(outcome[0] - began)
                else:
                    reason = f"HTTP {status}" if status != 202 else (outcome[1] if outcome else "no answer")
                    why[reason] = why.get(reason, 0) + 1

    threads = [threading.Thread(target=client, args=(c,)) for c in range(concurrency)]
    for t in threads:
        t.start()
    start.wait()
    began = time.perf_counter()
    for t in threads:
        t.join()
    return Round(concurrency, latencies, sum(why.values()), time.perf_counter() - began, why, count)


def floor(boots: int, tmp: Path) -> list[float]:
    """What a simulated host does per boot, directly: define and start the guest on the test driver."""
    conn = libvirt.open("test:///default")
    driver = LibvirtDriver(lambda: conn, instances_path=tmp / "floor")
    times: list[float] = []
    try:
        for _ in range(boots):
            guest = GuestSpec(uuid=str(uuid.uuid4()), vcpus=1, memory_mb=256, boot=None, console_log="")
            began = time.perf_counter()
            driver.spawn(guest)
            times.append(time.perf_counter() - began)
            driver.destroy(guest.uuid)
    finally:
        conn.close()
    return times


def percentile(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


@dataclasses.dataclass
class ControlPlane:
    settings: Settings
    port: int  # the API's
    token: str  # the admin's, in the admin project (its quota lifted)
    pg_source: str  # where PostgreSQL came from
    logs: Path
    nats_pid: int  # the nats-server's

    def project_token(self, name: str) -> str:
        """A new project the admin is a member of (quota lifted), and the admin's token scoped to it."""
        status, doc = send(self.port, self.token, "POST", "/identity/v3/projects",
                           {"project": {"name": name, "domain_id": "default"}})  # fmt: skip
        assert status == 201, doc
        project = doc["project"]["id"]
        user = _get(self.port, self.token, "/identity/v3/users?name=admin")["users"][0]["id"]
        role = _get(self.port, self.token, "/identity/v3/roles?name=member")["roles"][0]["id"]
        status, _ = send(
            self.port, self.token, "PUT", f"/identity/v3/projects/{project}/users/{user}/roles/{role}", None
        )
        assert status == 204, status
        unlimited = {"quota_set": {"instances": -1, "cores": -1, "ram": -1}}
        assert send(self.port, self.token, "PUT", f"/v2.1/os-quota-sets/{project}", unlimited)[0] == 200
        return str(login(self.port, name))

    def wait_for_hosts(self, count: int) -> None:
        try:
            _until(lambda: _hosts(self.port, self.token) >= count, f"{count} hosts")
        except RuntimeError:
            for log in sorted(self.logs.glob("*.log")):
                print(f"== {log.name}\n{log.read_text()[-2000:]}", file=sys.stderr)
            raise


@contextlib.contextmanager
def control_plane(name: str, tmp: Path, workers: list[list[str]], **fields: Any) -> Iterator[ControlPlane]:
    """The control plane as deployed, on a nats-server and a database of its own: bootstrap, the
    projector, ``workers`` (``stratus`` subcommands with their arguments, each its own process) and
    the API under gunicorn; yields once the admin has a token and unlimited quota. ``fields``:
    settings to change (``host_name``, ``libvirt_uri``...)."""
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    with nats_server() as server, postgres_admin_url() as (admin_url, pg_source):
        dbname = f"{name}_{uuid.uuid4().hex[:8]}"
        port = free_port()
        settings = dataclasses.replace(
            Settings(),
            nats_urls=(server.url,),
            stream=name.upper(),
            subject_prefix=f"{name}.ev",
            database_url=create_database(admin_url, dbname),
            data_dir=tmp / "data",
            token_key_file=tmp / "token.key",
            api_bind=f"127.0.0.1:{port}",
            fixed_network="",
            **fields,
        )
        try:
            bootstrap.main(settings, PASSWORD)
            env = {**os.environ, **settings.to_env(), "PYTHONPATH": str(ROOT)}
            stratus = [sys.executable, "-m", "processes.cli"]
            with contextlib.ExitStack() as stack:
                stack.enter_context(process([*stratus, "projector"], env, tmp / "projector.log"))
                for i, args in enumerate(workers):
                    stack.enter_context(process([*stratus, *args], env, tmp / f"{args[0]}-{i}.log"))
                stack.enter_context(serving([*stratus, "api"], settings, port, tmp / "api.log", timeout=60))
                token = _until(lambda: login(port), "a token")
                project = _project_of(port, token)
                unlimited = {"quota_set": {"instances": -1, "cores": -1, "ram": -1}}
                status, _ = send(port, token, "PUT", f"/v2.1/os-quota-sets/{project}", unlimited)
                assert status == 200, status
                yield ControlPlane(settings, port, token, pg_source, tmp, server.pid or 0)
        finally:
            with contextlib.suppress(Exception):
                drop_database(admin_url, dbname)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_boot", description=__doc__)
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--boots", type=int, default=100, help="boots per concurrency level")
    parser.add_argument("--concurrency", default="1,10,50")
    parser.add_argument("--schedulers", type=int, default=1, help="scheduler processes")
    parser.add_argument(
        "--projects",
        type=int,
        default=1,
        help="projects the clients create in (each has its own quota usage)",
    )
    parser.add_argument("--count", type=int, default=1, help="servers per request (min_count = max_count)")
    parser.add_argument("--api-workers", type=int, default=1, help="gunicorn workers of the API")
    parser.add_argument("--api-threads", type=int, default=16, help="threads per API worker")
    parser.add_argument("--sim-threads", type=int, default=8, help="threads of the simulator process")
    args = parser.parse_args(argv)
    levels = [int(c) for c in args.concurrency.split(",")]
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)

    workers = [["scheduler"] for _ in range(args.schedulers)] + [
        [
            "simulate",
            "--hosts",
            str(args.hosts),
            "--vcpus",
            "512",
            "--memory-mb",
            str(2**21),
            "--disk-gb",
            "100000",
            "--threads",
            str(args.sim_threads),
        ]
    ]
    with (
        tempfile.TemporaryDirectory(prefix="stratus-bench-boot-") as d,
        control_plane(
            "bench_boot", Path(d), workers, api_workers=args.api_workers, api_threads=args.api_threads
        ) as cloud,
    ):
        port, token = cloud.port, cloud.token
        status, doc = send(port, token, "POST", "/v2.1/flavors", {"flavor": {
            "name": "b.tiny", "ram": 256, "vcpus": 1, "disk": 1}})  # fmt: skip
        assert status == 200, doc
        flavor = doc["flavor"]["id"]
        tokens = [token, *(cloud.project_token(f"bench-{i}") for i in range(1, args.projects))]
        watcher = Watcher(cloud.settings).start()
        try:
            cloud.wait_for_hosts(args.hosts)
            extra = {
                "postgresql": cloud.pg_source,
                "hosts": str(args.hosts),
                "schedulers": str(args.schedulers),
                "projects": str(args.projects),
                "API workers": str(args.api_workers),
                "API threads per worker": str(args.api_threads),
                "simulator threads": str(args.sim_threads),
                "servers per request": str(args.count),
            }
            print("\n".join(machine_lines(extra)))
            post_warm = boots(port, tokens, watcher, flavor, 1, 3)  # first requests warm the workers
            assert not post_warm.errors, post_warm
            rounds = []
            for c in levels:
                print(f"{c} concurrent (load {loadavg()})", flush=True)
                with TreeCpu(os.getpid(), cloud.nats_pid) as cpu:
                    rounds.append(boots(port, tokens, watcher, flavor, c, args.boots, args.count))
                done = max(len(rounds[-1].latencies) * args.count, 1)
                print(
                    "CPU ms per boot: "
                    + ", ".join(f"{role} {1000 * s / done:.1f}" for role, s in cpu.seconds.items())
                    + f"; all {1000 * sum(cpu.seconds.values()) / done:.1f}",
                    flush=True,
                )
        finally:
            watcher.close()
        direct = floor(args.boots, Path(d))
    print(f"load average at end: {loadavg()}")
    print()
    print(table(rounds, direct))
    for r in rounds:
        if r.why:
            print(f"errors at {r.concurrency} concurrent: {r.why}")
    return 0


def table(rounds: list[Round], direct: list[float]) -> str:
    f50 = statistics.median(direct)
    lines = [
        "| concurrent boots | servers per request | servers ACTIVE | errors | wall s | servers/s "
        "| POST→ACTIVE (all of a request's) p50 ms | p99 ms | p50 / floor p50 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rounds:
        p50, p99 = percentile(r.latencies, 0.5), percentile(r.latencies, 0.99)
        servers = len(r.latencies) * r.count
        lines.append(
            f"| {r.concurrency} | {r.count} | {servers} | {r.errors} | {r.seconds:.1f} | "
            f"{servers / r.seconds:.1f} | {1000 * p50:.0f} | {1000 * p99:.0f} | {p50 / f50:.0f} |"
        )
    lines.append(
        f"| floor: `LibvirtDriver.spawn` on the test driver, one at a time | 1 | {len(direct)} | 0 | "
        f"{sum(direct):.1f} | {len(direct) / sum(direct):.0f} | {1000 * f50:.1f} | "
        f"{1000 * percentile(direct, 0.99):.1f} | 1 |"
    )
    return "\n".join(lines)


def _until(probe: Any, what: str, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = probe()
            if value:
                return value
        except (OSError, RuntimeError, KeyError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {what} after {timeout:.0f} s")
        time.sleep(0.5)


def _get(port: int, token: str, path: str) -> Any:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers={"X-Auth-Token": token})
        r = conn.getresponse()
        return serialization.loads(r.read())
    finally:
        conn.close()


def _project_of(port: int, token: str) -> str:
    doc = _get(port, token, "/identity/v3/auth/projects")
    return str(next(p["id"] for p in doc["projects"] if p["name"] == "admin"))


def _hosts(port: int, token: str) -> int:
    return len(_get(port, token, "/v2.1/os-hypervisors")["hypervisors"])


if __name__ == "__main__":
    raise SystemExit(main())
