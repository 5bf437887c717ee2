"""Placements per second: the scheduler's own rate, with a backlog of requests waiting for it.

The boot benches (``bench_boot``, ``bench_placement`` part 1) measure a whole boot, in which the
scheduler is one step of several; this one measures the step. On its own nats-server: ``--hosts``
hosts registered (64 CPUs / 256 GiB / 2 TB, ratios 4 / 1.5 / 1: room for every request), then
``--requests`` servers requested through ``Handlers.create_server`` (``--threads`` callers, spread
over 50 projects with unlimited quota), while no scheduler runs. Then ``--schedulers`` scheduler
processes (``stratus scheduler``, as deployed; with several, each its own host shard,
``STRATUS_SCHEDULER_SHARD=i/n``) start, and the bench follows the log until every
request is placed. Reported: placements per second from the first ``Instance.Scheduled`` to the
last (the schedulers' start-up, folding every host's history, is not counted), how many atomic
appends carried them (the batch sizes), CPU ms per placement of the scheduler processes and of
nats-server, and the floor: the same number of ``Host.InstanceClaimed`` + ``Instance.Scheduled``
pairs appended directly in atomic batches of the median batch size (no decisions).

Run: ``python -m tests.bench.bench_scheduler [--hosts 1000] [--requests 5000] [--schedulers 1]``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from commands.app import Stratus
from commands.flavors.create import CreateFlavor
from commands.host import Host, Resources, host_aggregate_id
from commands.instance import Instance
from commands.servers.create import CreateServer
from stratus.config import Settings
from stratus.eventstore import Factory, NatsBridge
from stratus.eventstore.envelope import APPEND_ID, decode_message
from stratus.eventstore.subjects import SubjectLayout
from tests.bench.bench_placement import process
from tests.bench.harness import TreeCpu, loadavg, machine_lines, nats_server
from tests.fixtures.commands import requested
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.operations import Operations
from workers.simulator import host_names

ROOT = Path(__file__).resolve().parents[2]
PROJECTS = 50


def register_hosts(app: Stratus, names: list[str]) -> None:
    for start in range(0, len(names), 250):
        hosts = []
        for name in names[start : start + 250]:
            host = Host.register(name, 64, 262144, 2000)
            hosts.append(host)
        app.save(*hosts)


def request_servers(settings: Settings, total: int, threads: int) -> list[str]:
    servers: list[str] = []
    lock = threading.Lock()

    def caller(t: int) -> None:
        with NatsBridge(settings.nats_urls, name=f"bench-caller-{t}").start() as b:
            h = Handlers(Stratus(Factory(bridge=b, settings=settings)))
            for i in range(t, total, threads):
                server = h.create_server(CreateServer(f"vm-{i}", f"proj-{i % PROJECTS}", "u", "bench")).id
                with lock:
                    servers.append(server)

    workers = [threading.Thread(target=caller, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return servers


def follow(
    settings: Settings, app: Stratus, start: int, expected: int, timeout: float, first_seen: TreeCpu
) -> list[tuple[float, str]]:
    """(when seen, append id) of every ``Instance.Scheduled`` after ``start``, until ``expected``;
    ``first_seen`` is started when the first is seen."""
    recorder = app.recorder
    layout = SubjectLayout(settings.subject_prefix)
    scheduled = layout.topic_filter(f"{Instance.__module__}:Instance.Scheduled")
    seen: list[tuple[float, str]] = []
    position = start
    deadline = time.monotonic() + timeout
    while len(seen) < expected and time.monotonic() < deadline:
        head = recorder.wait_for_position(position, 0.2)  # type: ignore[attr-defined]
        if head <= position:
            continue
        msgs = recorder.read_messages(position + 1, 1000, stop=head, subject_filter=scheduled)  # type: ignore[attr-defined]
        now = time.perf_counter()
        if msgs and not seen:
            first_seen.start()
        for msg in msgs:
            seen.append((now, (msg.headers or {}).get(APPEND_ID, "")))
        position = decode_message(msgs[-1])[1].position if len(msgs) == 1000 else head
    return seen


def floor(app: Stratus, names: list[str], pairs: int, batch: int) -> float:
    """Seconds to append ``pairs`` claim + placement pairs in atomic appends of ``batch`` pairs (the
    servers' requests are appended first, untimed): what the scheduler appends, with no decisions."""
    flavor = {"id": "bench", "name": "b", "vcpus": 1, "ram": 64, "disk": 1, "ephemeral": 0, "swap": 0}
    need = Resources.of_flavor(flavor)
    hosts: list[Host] = [app.repository.get(host_aggregate_id(n)) for n in names]
    servers = [requested("floor", "floor", flavor) for _ in range(pairs)]
    for start in range(0, pairs, 500):
        app.save(*servers[start : start + 500])
    began = time.perf_counter()
    for start in range(0, pairs, batch):
        chunk = servers[start : start + batch]
        touched: dict[str, Host] = {}
        for k, inst in enumerate(chunk):
            host = hosts[(start + k) % len(hosts)]
            host.claim(inst.server_id, need)
            inst.schedule(host.hostname)
            touched[host.hostname] = host
        app.save(*touched.values(), *chunk)
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_scheduler", description=__doc__)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--schedulers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=8, help="callers creating the backlog")
    args = parser.parse_args(argv)

    with nats_server() as server, tempfile.TemporaryDirectory(prefix="stratus-bench-scheduler-") as tmp:
        settings = dataclasses.replace(
            Settings(), nats_urls=(server.url,), stream="BENCHS", subject_prefix="bs.ev", data_dir=Path(tmp)
        )
        bridge = NatsBridge(settings.nats_urls, name="bench").start()
        app = Stratus(Factory(bridge=bridge, settings=settings))
        handlers = Handlers(app)
        handlers.create_flavor(CreateFlavor("bench", "m1.bench", vcpus=2, ram=4096, disk=20))
        ops = Operations(app)
        for p in range(PROJECTS):
            ops.set_quota(f"proj-{p}", {"instances": -1, "cores": -1, "ram": -1}, {})
        names = host_names(args.hosts)
        t0 = time.perf_counter()
        register_hosts(app, names)
        print("\n".join(machine_lines({"hosts": str(args.hosts), "schedulers": str(args.schedulers)})))
        print(f"{args.hosts} hosts registered in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        servers = request_servers(settings, args.requests, args.threads)
        print(f"{len(servers)} servers requested in {time.perf_counter() - t0:.1f} s (load {loadavg()})")
        after_requests = app.recorder.max_notification_id() or 0

        env = {**os.environ, **settings.to_env(), "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "processes.cli", "scheduler"]
        cpu = TreeCpu(server.pid or 0, os.getpid())
        with contextlib.ExitStack() as stack:
            for i in range(args.schedulers):
                shard = {"STRATUS_SCHEDULER_SHARD": f"{i}/{args.schedulers}"} if args.schedulers > 1 else {}
                stack.enter_context(process(cmd, {**env, **shard}, Path(tmp) / f"scheduler-{i}.log"))
            seen = follow(settings, app, after_requests, len(servers), timeout=600, first_seen=cpu)
            spent = cpu.stop()
        placed = len(seen)
        first, last = seen[0][0], seen[-1][0]
        seconds = max(last - first, 1e-9)
        appends = [a for _, a in seen]
        sizes = list(dict.fromkeys(appends))
        per_append = [appends.count(a) for a in sizes]
        median_batch = int(statistics.median(per_append)) if per_append else 1
        scheduler_s = spent.get("stratus scheduler", 0.0)
        claims = sorted(len(app.repository.get(host_aggregate_id(n)).claims) for n in names)
        print(f"servers per host: min {claims[0]}, median {claims[len(claims) // 2]}, max {claims[-1]}")
        print(f"CPU seconds while placing: {spent}")
        floor_s = floor(app, names, placed, median_batch)
        print()
        who = f"{args.hosts} hosts, {args.schedulers} scheduler process(es)"
        print(f"### The scheduler with a backlog: {who}")
        print()
        print("| placed | seconds (first to last) | placements/s | appends | batch size median / max "
              "| scheduler CPU ms per placement | nats-server CPU ms per placement "
              "| floor: the same pairs appended directly, /s | ratio to floor |")  # fmt: skip
        print("|---:|---:|---:|---:|---|---:|---:|---:|---:|")
        rate, floor_rate = placed / seconds, placed / floor_s
        print(
            f"| {placed} | {seconds:.1f} | {rate:.0f} | {len(sizes)} | {median_batch} / {max(per_append)} "
            f"| {1000 * scheduler_s / placed:.2f} | {1000 * spent.get('nats-server', 0.0) / placed:.2f} "
            f"| {floor_rate:.0f} | {rate / floor_rate:.2f} |"
        )
        print(f"load average at end: {loadavg()}")
        bridge.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
