"""Placement at cloud scale: boots on 1,000 simulated hosts, and allocation candidates vs OpenStack Placement.

Part 1, boots: a JetStream server, ``--hosts`` simulated hypervisor hosts (``workers.simulator``,
libvirt's test driver, one host definition each: 64 CPUs, 256 GiB, 2 TB, CPU ratio 4),
``--schedulers`` schedulers (each its own NATS connection, sharing the durable consumer), and
``--clients`` clients, each on its own connection, creating servers one after another
(``Handlers.create_server``, no HTTP) and waiting for each to be ACTIVE. Reported: placements per
second over the run, and create→ACTIVE p50/p99.

Part 2, ``GET /allocation_candidates?resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20`` at the same
providers (with the same usage): our Placement API (``tests.bench.placement_wsgi`` under gunicorn,
2 workers) and OpenStack Placement 16.0.0 (its own venv, gunicorn 2 workers, noauth2, PostgreSQL),
in interleaved rounds; the ratio is ours / theirs in the same round. Set up Placement's venv once:

    python3 -m venv /tmp/placement-venv
    /tmp/placement-venv/bin/pip install openstack-placement==16.0.0 gunicorn psycopg2-binary

Run: ``python -m tests.bench.bench_placement [--hosts 1000] [--clients 50] [--servers 1000]
[--placement-venv /tmp/placement-venv] [--pg-url postgresql://postgres@127.0.0.1:5432/postgres]``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import http.client
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import libvirt
import orjson
import psycopg

from commands.app import Stratus
from commands.errors import NotFound
from commands.flavors.create import CreateFlavor
from commands.servers.create import CreateServer
from stratus.config import Settings
from stratus.eventstore import Factory, NatsBridge
from stratus.eventstore.envelope import decode_message
from tests.bench.harness import Bench, CpuMeter, loadavg, machine_lines, nats_server
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.operations import Operations
from tests.fixtures.processes import free_port, stop
from workers import scheduler, simulator
from workers.simulator import HostShape, SimulatedCloud, host_names

SHAPE = HostShape(vcpus=64, memory_mb=262144, disk_gb=2000)
QUERY = "/allocation_candidates?resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20"
HEADERS = {"OpenStack-API-Version": "placement 1.39", "X-Auth-Token": "admin", "Accept": "application/json"}


def request(port: int, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        data = orjson.dumps(body) if body is not None else None
        headers = {**HEADERS, **({"Content-Type": "application/json"} if data is not None else {})}
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def wait_http(port: int, path: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            status, _ = request(port, "GET", path)
            if status < 500:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"nothing answered on port {port} within {timeout}s")
        time.sleep(0.2)


@contextlib.contextmanager
def process(cmd: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with open(log, "wb") as out:
        p = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield p
    finally:
        stop(p, 20)


# -- part 1: boots --------------------------------------------------------------------------------
@dataclasses.dataclass
class Boots:
    latencies: list[float]
    errors: int
    seconds: float
    cpu: str


class Watcher:
    """Follows the log and notes when each server became ACTIVE (``Spawned``) or failed (``Faulted``),
    so that waiting clients need not poll."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._cond = threading.Condition()
        self.finished: dict[str, tuple[float, str]] = {}
        # multi-creates: each server's reservation, and per reservation its servers ACTIVE (or the
        # first fault) and when the last one was seen
        self._reservation_of: dict[str, str] = {}
        self.reservations: dict[str, tuple[int, float, str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def _run(self) -> None:
        s = self._settings
        with NatsBridge(s.nats_urls, name="bench-watcher").start() as b:
            recorder = Factory(bridge=b, settings=s).application_recorder()
            position = recorder.max_notification_id() or 0
            # Everything, not `<prefix>.instance.>`: a filtered batch read costs the server a match over
            # every instance's subjects (see JetStreamAggregateRecorder._direct_scan).
            instances = f"{s.subject_prefix}.instance."
            while not self._stop.is_set():
                head = recorder.wait_for_position(position, 0.5)
                if head <= position:
                    continue
                msgs = recorder.read_messages(position + 1, 1000, stop=head)
                now = time.perf_counter()
                last = position
                with self._cond:
                    for msg in msgs:
                        if not (msg.headers or {}).get("Nats-Subject", "").startswith(instances):
                            last = int((msg.headers or {})["Nats-Sequence"])
                            continue
                        notification, envelope = decode_message(msg)
                        last = envelope.position
                        kind = envelope.type.rsplit(".", 1)[-1]
                        server = str(envelope.originator_id)
                        if kind == "requested":
                            reservation = orjson.loads(notification.state).get("reservation_id")
                            if reservation:
                                self._reservation_of[server] = reservation
                        if kind in ("spawned", "faulted") and server not in self.finished:
                            self.finished[server] = (now, kind)
                            reservation = self._reservation_of.get(server)
                            if reservation is not None:
                                done, _, outcome = self.reservations.get(reservation, (0, now, "spawned"))
                                self.reservations[reservation] = (
                                    done + 1,
                                    now,
                                    outcome if kind == "spawned" else kind,
                                )
                    self._cond.notify_all()
                position = last if len(msgs) == 1000 else head

    def wait(self, server_id: str, timeout: float = 300) -> tuple[float, str] | None:
        with self._cond:
            self._cond.wait_for(lambda: server_id in self.finished, timeout)
            return self.finished.get(server_id)

    def wait_reservation(
        self, reservation: str, count: int, timeout: float = 300
    ) -> tuple[float, str] | None:
        """When the ``count`` servers of a multi-create were all ACTIVE (or failed), and how."""
        with self._cond:
            self._cond.wait_for(lambda: self.reservations.get(reservation, (0,))[0] >= count, timeout)
            found = self.reservations.get(reservation)
            return (found[1], found[2]) if found is not None and found[0] >= count else None

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)


def boots(settings: Settings, clients: int, servers: int, bench: Bench) -> Boots:
    per_client = max(servers // clients, 1)
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    ready = threading.Barrier(clients + 1)
    watcher = Watcher(settings).start()

    def client(c: int) -> None:
        with NatsBridge(settings.nats_urls, name=f"bench-client-{c}").start() as b:
            h = Handlers(Stratus(Factory(bridge=b, settings=settings)))
            ready.wait()
            for i in range(per_client):
                started = time.perf_counter()
                server = h.create_server(CreateServer(f"vm-{c}-{i}", f"proj-{c}", "u", "bench")).id
                outcome = watcher.wait(server)
                with lock:
                    if outcome is not None and outcome[1] == "spawned":
                        latencies.append(outcome[0] - started)
                    else:
                        errors[0] += 1

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    try:
        with bench.meter.measure() as cpu:
            ready.wait()
            started = time.perf_counter()
            for t in threads:
                t.join()
            seconds = time.perf_counter() - started
    finally:
        watcher.close()
    return Boots(latencies, errors[0], seconds, cpu[0].render())


def run_workers(
    settings: Settings, target: Callable[[NatsBridge, threading.Event], None], n: int
) -> Callable[[], None]:
    stop = threading.Event()

    def main(i: int) -> None:
        with NatsBridge(settings.nats_urls, name=f"bench-worker-{i}").start() as b:
            target(b, stop)

    threads = [threading.Thread(target=main, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()

    def close() -> None:
        stop.set()
        for t in threads:
            t.join(30)

    return close


# -- part 2: OpenStack Placement side by side -------------------------------------------------------
def placement_conf(directory: Path, db_url: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    conf = directory / "placement.conf"
    conf.write_text(
        "[DEFAULT]\ndebug = False\n[api]\nauth_strategy = noauth2\n"
        f"[placement_database]\nconnection = {db_url}\n"
    )
    return conf


def mirror(port: int, app: Stratus, handlers: Handlers, names: list[str], threads: int = 16) -> None:
    """The same providers, inventories and allocations in OpenStack Placement."""
    work = list(names)
    lock = threading.Lock()
    failures: list[str] = []

    def one() -> None:
        while True:
            with lock:
                if not work:
                    return
                name = work.pop()
            host = handlers.host(name)
            rp = str(host.id)
            status, body = request(port, "POST", "/resource_providers", {"name": name, "uuid": rp})
            if status not in (200, 201, 409):
                failures.append(f"{name}: {status} {body[:200]!r}")
                continue
            inventories = {rc: dict(inv) for rc, inv in host.inventories.items()}
            status, body = request(
                port,
                "PUT",
                f"/resource_providers/{rp}/inventories",
                {"resource_provider_generation": 0, "inventories": inventories},
            )
            if status != 200:
                failures.append(f"{name} inventories: {status} {body[:200]!r}")
            for consumer, claim in host.claims.items():
                resources = {
                    "VCPU": claim["vcpus"],
                    "MEMORY_MB": claim["memory_mb"],
                    "DISK_GB": claim["disk_gb"],
                }
                status, body = request(
                    port,
                    "PUT",
                    f"/allocations/{consumer}",
                    {
                        "allocations": {rp: {"resources": resources}},
                        "project_id": "p",
                        "user_id": "u",
                        "consumer_generation": None,
                        "consumer_type": "INSTANCE",
                    },
                )
                if status != 204:
                    failures.append(f"{consumer}: {status} {body[:200]!r}")

    pool = [threading.Thread(target=one) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if failures:
        raise RuntimeError(f"{len(failures)} mirroring failures, e.g. {failures[:3]}")


def candidates(port: int, prefix: str, n: int, sizes: list[int]) -> int:
    for _ in range(n):
        status, body = request(port, "GET", prefix + QUERY)
        if status != 200:
            raise RuntimeError(f"{prefix}{QUERY}: {status} {body[:300]!r}")
        sizes.append(len(orjson.loads(body)["allocation_requests"]))
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_placement", description=__doc__)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--servers", type=int, default=1000, help="servers booted in part 1")
    parser.add_argument("--schedulers", type=int, default=2)
    parser.add_argument("--sim-threads", type=int, default=4)
    parser.add_argument("--requests", type=int, default=30, help="allocation_candidates per side per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--boots-only", action="store_true", help="part 1 only (no OpenStack Placement side by side)"
    )
    parser.add_argument("--placement-venv", type=Path, default=Path("/tmp/placement-venv"))
    parser.add_argument(
        "--pg-url",
        default="postgresql://postgres@127.0.0.1:5432/postgres",
        help="a PostgreSQL where a database for OpenStack Placement may be created",
    )
    args = parser.parse_args(argv)
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)

    with nats_server() as server, tempfile.TemporaryDirectory(prefix="stratus-bench-placement-") as tmp:
        settings = dataclasses.replace(
            Settings(), nats_urls=(server.url,), stream="BENCHP", subject_prefix="bp.ev"
        )
        bridge = NatsBridge(settings.nats_urls, name="bench").start()
        app = Stratus(Factory(bridge=bridge, settings=settings))
        handlers = Handlers(app)
        handlers.create_flavor(CreateFlavor("bench", "m1.bench", vcpus=2, ram=4096, disk=20))
        ops = Operations(app)
        for c in range(args.clients):
            ops.set_quota(f"proj-{c}", {"instances": -1, "cores": -1, "ram": -1}, {})
        print("\n".join(machine_lines({"hosts": str(args.hosts), "clients": str(args.clients)})))
        bench = Bench(CpuMeter(server.pid))

        names = host_names(args.hosts)
        cloud = SimulatedCloud(handlers.bus, Path(tmp) / "sim", names, SHAPE)
        t0 = time.perf_counter()
        close_sim = run_workers(
            settings,
            lambda b, stop: simulator.run(
                settings, cloud, bridge=b, stop=stop, threads=args.sim_threads, poll=0.2
            ),
            1,
        )
        while True:
            try:
                handlers.host(names[-1])
                break
            except NotFound:
                time.sleep(0.2)
        print(
            f"{args.hosts} simulated hosts registered in {time.perf_counter() - t0:.1f} s (load {loadavg()})"
        )

        def schedule(b: NatsBridge, stop: threading.Event) -> None:
            scheduler.run(
                settings, bridge=b, app=Stratus(Factory(bridge=b, settings=settings)), stop=stop, poll=0.2
            )

        close_schedulers = run_workers(settings, schedule, args.schedulers)
        try:
            result = boots(settings, args.clients, args.servers, bench)
        finally:
            close_schedulers()
        lat = sorted(result.latencies)
        p = (lambda q: 1000 * lat[min(len(lat) - 1, int(q * len(lat)))]) if lat else (lambda q: float("nan"))
        who = f"{args.clients} clients, {args.schedulers} schedulers"
        title = f"### Boots on {args.hosts} simulated hosts ({who})"
        head = "| servers ACTIVE | ERROR | wall s | placements/s | create→ACTIVE p50 ms | p99 ms | CPU % |"
        rate = len(lat) / result.seconds
        row = f"| {len(lat)} | {result.errors} | {result.seconds:.1f} | {rate:.1f} |"
        row += f" {p(0.5):.0f} | {p(0.99):.0f} |"
        boots_table = "\n".join(
            [title, "", head, "|---:|---:|---:|---:|---:|---:|---|", f"{row} {result.cpu} |"]
        )
        print(boots_table)
        if args.boots_only:
            return 0

        # -- part 2 --------------------------------------------------------------------------
        env = {**os.environ, **settings.to_env(), "PYTHONPATH": str(Path.cwd())}
        ours_port, theirs_port = free_port(), free_port()
        gunicorn = str(Path(sys.executable).parent / "gunicorn")
        ours_cmd = [
            gunicorn,
            "-w",
            "2",
            "-b",
            f"127.0.0.1:{ours_port}",
            "tests.bench.placement_wsgi:get_app()",
        ]
        db_name = f"placement_bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(args.pg_url, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {db_name}")
        try:
            base = args.pg_url.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg2://")
            conf = placement_conf(Path(tmp) / "placement", f"{base}/{db_name}")
            penv = {**os.environ, "OS_PLACEMENT_CONFIG_DIR": str(conf.parent)}
            venv = args.placement_venv / "bin"
            subprocess.run(
                [str(venv / "placement-manage"), "--config-file", str(conf), "db", "sync"],
                env=penv,
                check=True,
                capture_output=True,
            )
            theirs_cmd = [
                str(venv / "gunicorn"),
                "-w",
                "2",
                "-b",
                f"127.0.0.1:{theirs_port}",
                "placement.wsgi.api:application",
            ]
            with (
                process(ours_cmd, env, Path(tmp) / "ours.log"),
                process(theirs_cmd, penv, Path(tmp) / "theirs.log") as theirs,
            ):
                wait_http(ours_port, "/placement")
                wait_http(theirs_port, "/")
                t0 = time.perf_counter()
                mirror(theirs_port, app, handlers, names)
                print(
                    f"mirrored {args.hosts} providers and their allocations into Placement in "
                    f"{time.perf_counter() - t0:.1f} s"
                )
                sizes: dict[str, list[int]] = {"theirs": [], "ours": []}
                _ = theirs  # gunicorn's master: its workers do the work, so only the machine is metered
                for r in range(args.rounds):
                    print(f"round {r + 1}/{args.rounds} (load {loadavg()})")
                    bench.meter = CpuMeter()
                    bench.measure(
                        "OpenStack Placement 16.0.0",
                        "requests",
                        lambda: candidates(theirs_port, "", args.requests, sizes["theirs"]),
                    )
                    bench.measure(
                        "Stratus /placement",
                        "requests",
                        lambda: candidates(ours_port, "/placement", args.requests, sizes["ours"]),
                        floor="OpenStack Placement 16.0.0",
                    )
                assert set(sizes["ours"]) == set(sizes["theirs"]), (set(sizes["ours"]), set(sizes["theirs"]))
                print(f"candidates per answer: {sorted(set(sizes['ours']))}")
        finally:
            with psycopg.connect(args.pg_url, autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {db_name} WITH (FORCE)")
            close_sim()
            cloud.close()
            bridge.close()
        print()
        print(boots_table)
        print()
        print(
            bench.table(
                f"GET {QUERY} at {args.hosts} providers ({args.requests} sequential requests per round)"
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
