"""The control plane's memory over time: every part's RSS with 10,000 servers, then under mixed load.

Run: ``python -m tests.bench.bench_memory [--servers 10000] [--minutes 30] [--interval 10]``
(``--servers 500 --minutes 2`` is a quick check of a few minutes). The plot needs matplotlib (the
``bench`` extra of pyproject.toml, or matplotlib on ``PYTHONPATH``); without it the JSON is written
alone, and ``--plot-only`` draws it later.

The control plane runs as deployed (``tests.bench.bench_boot.control_plane``): its own nats-server
and database, the API under gunicorn (one worker of 16 threads), the projector, one scheduler, one
``stratus hypervisor`` on libvirt's test driver (host ``memory-hv``), and ``stratus simulate
--hosts N`` (the simulated hosts the servers run on). Each part runs with its default settings,
its aggregate cache included.

1. **Fill**: ``--servers`` servers created through the API (multi-creates of ``--count``, from
   ``--clients`` clients over ``--projects`` projects, each waiting for its servers to be ACTIVE,
   ``bench_boot.boots``), and ``--on-hypervisor`` more on the hypervisor's host (an admin's
   ``host``, microversion 2.74), so that the hypervisor worker has guests of its own.
2. **Load**: for ``--minutes``, ``--clients`` clients send ``--rate`` requests per second in all
   through the API, each on its own servers: creates, stops, starts, soft reboots and deletes
   (``MIX``), so that the number of servers stays near ``--servers``.

Throughout, every ``--interval`` seconds, the RSS and PSS of each part (``bench_growth.memory``):
the API (gunicorn master and worker), the projector, the scheduler and the hypervisor worker (the
control plane, whose sum has a goal of 400 MB), and apart: nats-server, PostgreSQL's backends of
the bench's database, and the simulator.

Written: ``--json`` (default ``docs/memory.json``) and ``--plot`` (``docs/memory.png``); printed:
the table of docs/performance.md, "Memory" (start, end and max RSS per part over the load, and its
slope). No number here is an assertion.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg

from projections.schema import LIVE_SCHEMA
from stratus.eventstore import Factory, NatsBridge
from tests.bench.bench_boot import ControlPlane, boots, control_plane, send
from tests.bench.bench_growth import (
    api_process,
    memory,
    postgres_backends,
    process_tree,
    projected,
    role_pids,
    wait_for,
)
from tests.bench.bench_placement import Watcher
from tests.bench.harness import loadavg, machine_lines

DOCS = Path(__file__).resolve().parents[2] / "docs"
HYPERVISOR = "memory-hv"
# The parts of the control plane (the 400 MB goal) and those reported apart.
PLANE = ("API (gunicorn master + worker)", "projector", "scheduler", "hypervisor worker")
APART = ("nats-server", "PostgreSQL backends", "simulator")
GOAL_MIB = 400e6 / 2**20  # 400 MB
# The load's requests, by weight: as many creates as deletes, so that the cloud keeps its size.
MIX = {"create": 1, "delete": 1, "stop": 2, "start": 2, "reboot": 2}
# Seconds a server is left alone after a request, so that the next one finds it settled.
SETTLE_S = 15.0


class Sampler:
    """Reads every part's memory every ``interval`` seconds on a thread of its own."""

    def __init__(self, cloud: ControlPlane, conn: psycopg.Connection[Any], interval: float) -> None:
        self.cloud = cloud
        self.conn = conn
        self.interval = interval
        self.phase = "start"
        self.samples: list[dict[str, Any]] = []
        self.began = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._parts = {
            "API (gunicorn master + worker)": api_process(cloud),
            "projector": role_pids(cloud, "projector")[0],
            "scheduler": role_pids(cloud, "scheduler")[0],
            "hypervisor worker": role_pids(cloud, "hypervisor")[0],
            "nats-server": cloud.nats_pid,
            "simulator": role_pids(cloud, "simulate")[0],
        }

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def sample(self) -> dict[str, Any]:
        """Every part's memory now (each part's process and its children)."""
        pids = {part: process_tree(pid) for part, pid in self._parts.items()}
        pids["PostgreSQL backends"] = postgres_backends(self.conn, self.conn.info.dbname)
        row = {
            "t": round(time.monotonic() - self.began, 1),
            "phase": self.phase,
            "load": loadavg(),
            "memory": memory(pids),
        }
        self.samples.append(row)
        return row

    def _run(self) -> None:
        while not self._stop.is_set():
            row = self.sample()
            total = sum(row["memory"][p]["rss_mib"] for p in PLANE)
            print(f"  t={row['t']:.0f}s {row['phase']}: control plane {total:.0f} MiB RSS", flush=True)
            self._stop.wait(self.interval)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def snapshot(self) -> None:
        """Ask every part of the control plane for a tracemalloc snapshot (``--trace-dir``: each
        writes its own there, processes/memtrace.py); the API's worker, not its master."""
        for part in PLANE:
            for pid in process_tree(self._parts[part])[(1 if part.startswith("API") else 0) :]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGUSR2)


# -- the load -----------------------------------------------------------------------------------
class Servers:
    """One client's project (its token), its servers and what it last asked of each, so that a request
    suits the server's state; ``host``: its creates go to that host (an admin's choice)."""

    def __init__(self, token: str, rows: list[tuple[str, str]], host: str | None = None) -> None:
        self.token = token
        self.host = host
        self.state = dict(rows)  # server -> ACTIVE or SHUTOFF, as this client left it
        self.target = len(rows)  # creates make up for deletes, up to this many
        self.quiet_at: dict[str, float] = {}  # server -> when it may be asked again

    def pick(self, rng: random.Random, wanted: str) -> str | None:
        now = time.monotonic()
        ready = [s for s, st in self.state.items() if st == wanted and self.quiet_at.get(s, 0) <= now]
        return rng.choice(ready) if ready else None

    def asked(self, server: str, state: str | None) -> None:
        if state is None:
            self.state.pop(server, None)
            self.quiet_at.pop(server, None)
        else:
            self.state[server] = state
            self.quiet_at[server] = time.monotonic() + SETTLE_S


def request(port: int, servers: Servers, rng: random.Random, conn: http.client.HTTPConnection) -> str:
    """One request of ``MIX`` on one of ``servers`` (a reboot when none suits the drawn one; a create
    while the client has fewer than it started with); its outcome, e.g. ``stop 202``."""
    op = rng.choices(list(MIX), weights=list(MIX.values()))[0]
    wanted = {"delete": "ACTIVE", "stop": "ACTIVE", "start": "SHUTOFF", "reboot": "ACTIVE"}
    server = servers.pick(rng, wanted[op]) if op != "create" else None
    if op != "create" and server is None:
        op, server = "reboot", servers.pick(rng, "ACTIVE")
    if op == "create" or server is None:
        if len(servers.state) >= servers.target and op == "create" and server is None and rng.random() < 0.5:
            return "idle"  # as many as it started with: no create this time
        body: dict[str, Any] = {"name": f"load-{rng.getrandbits(32)}", "flavorRef": "1", "networks": "none"}
        version = "2.52" if servers.host is None else "2.74"
        if servers.host is not None:
            body["host"] = servers.host
        status, doc = send(port, servers.token, "POST", "/v2.1/servers", {"server": body}, conn, version)
        if status == 202:
            servers.asked(doc["server"]["id"], "ACTIVE")
        return f"create {status}"
    if op == "delete":
        status, _ = send(port, servers.token, "DELETE", f"/v2.1/servers/{server}", None, conn)
        servers.asked(server, None)
        return f"delete {status}"
    action = {"stop": {"os-stop": None}, "start": {"os-start": None}, "reboot": {"reboot": {"type": "SOFT"}}}
    status, _ = send(port, servers.token, "POST", f"/v2.1/servers/{server}/action", action[op], conn)
    servers.asked(server, "SHUTOFF" if op == "stop" else "ACTIVE")
    return f"{op} {status}"


def load(port: int, owned: list[Servers], minutes: float, rate: float) -> Counter[str]:
    """A client per ``owned``, ``rate`` requests a second in all, for ``minutes``; how many requests
    of each kind got each status."""
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()
    until = time.monotonic() + 60 * minutes

    def client(c: int) -> None:
        rng = random.Random(c)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)  # kept alive, as an SDK's
        pace = len(owned) / rate
        due = time.monotonic() + rng.uniform(0, pace)
        while (now := time.monotonic()) < until:
            if now < due:
                time.sleep(due - now)
            due += pace
            try:
                outcome = request(port, owned[c], rng, conn)
            except (OSError, http.client.HTTPException) as e:
                outcome = f"error {type(e).__name__}"
            with lock:
                outcomes[outcome] += 1
        conn.close()

    threads = [threading.Thread(target=client, args=(c,)) for c in range(len(owned))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


def shares(conn: psycopg.Connection[Any], tokens: dict[str, str], clients: int) -> list[Servers]:
    """Each client's servers: the ACTIVE and SHUTOFF ones of its project (client c: the c-th project,
    modulo), dealt out among the clients of that project."""
    projects = list(tokens)
    rows = conn.execute(
        f"SELECT id::text, project_id, status FROM {LIVE_SCHEMA}.instances "
        "WHERE NOT deleted AND status IN ('ACTIVE', 'SHUTOFF') ORDER BY id"
    ).fetchall()
    dealt: list[list[tuple[str, str]]] = [[] for _ in range(clients)]
    owners = {p: [c for c in range(clients) if c % len(projects) == i] for i, p in enumerate(projects)}
    seen: Counter[str] = Counter()
    for server, project, status in rows:
        if owners.get(project):
            dealt[owners[project][seen[project] % len(owners[project])]].append((server, status))
            seen[project] += 1
    return [Servers(tokens[projects[c % len(projects)]], d) for c, d in enumerate(dealt)]


def project_ids(cloud: ControlPlane, names: list[str]) -> dict[str, str]:
    """Project id -> token, for new projects named ``names`` (the admin a member of each)."""
    out = {}
    for name in names:
        token = cloud.project_token(name)
        doc = send(cloud.port, cloud.token, "GET", f"/identity/v3/projects?name={name}", None)[1]
        out[doc["projects"][0]["id"]] = token
    return out


# -- the run --------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict[str, Any]:
    simulate = ["simulate", "--hosts", str(args.hosts), "--vcpus", "512", "--memory-mb", str(2**21),
                "--disk-gb", "100000", "--threads", "8"]  # fmt: skip
    results: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}
    with (
        tempfile.TemporaryDirectory(prefix="stratus-bench-memory-") as d,
        control_plane(
            "bench_memory",
            Path(d),
            [["scheduler"], ["hypervisor"], simulate],
            api_workers=1,
            api_threads=16,
            host_name=HYPERVISOR,
            token_ttl_seconds=4 * 3600,
            projector_metrics_bind="127.0.0.1:0",
            scheduler_metrics_bind="127.0.0.1:0",
            hypervisor_metrics_bind="127.0.0.1:0",
            **caches(args.aggregate_cache),
            **({"memory_trace_dir": args.trace_dir} if args.trace_dir else {}),
        ) as cloud,
        psycopg.connect(cloud.settings.database_url or "", autocommit=True) as conn,
        NatsBridge(cloud.settings.nats_urls, name="bench-memory").start() as bridge,
    ):
        log = Factory(bridge=bridge, settings=cloud.settings).application_recorder()

        def caught_up() -> int:
            """The log's head, once the read models hold all of it."""
            head = log.max_notification_id() or 0
            wait_for(lambda: projected(conn, head), "the read models caught up", 600)
            return head

        flavor = {"name": "m.tiny", "ram": 256, "vcpus": 1, "disk": 1, "id": "1"}
        status, doc = send(cloud.port, cloud.token, "POST", "/v2.1/flavors", {"flavor": flavor})
        assert status == 200, doc
        tokens = project_ids(cloud, [f"memory-{i}" for i in range(args.projects)])
        cloud.wait_for_hosts(args.hosts + 1)
        info = machine_lines({"postgresql": cloud.pg_source, "simulated hosts": str(args.hosts)})
        print("\n".join(info), flush=True)
        results["machine"] = dict(line.split(": ", 1) for line in info)
        sampler = Sampler(cloud, conn, args.interval).start()
        watcher = Watcher(cloud.settings).start()
        try:
            began = time.monotonic()
            sampler.phase = "fill"
            fill = boots(
                cloud.port, list(tokens.values()), watcher, "1", args.clients, args.servers, args.count
            )
            on_hv = []
            for i in range(args.on_hypervisor):  # on the hypervisor's host: an admin's choice
                body = {"name": f"hv-{i}", "flavorRef": "1", "networks": "none", "host": HYPERVISOR}
                status, doc = send(cloud.port, cloud.token, "POST", "/v2.1/servers", {"server": body},
                                   microversion="2.74")  # fmt: skip
                assert status == 202, doc
                on_hv.append(doc["server"]["id"])
            hv_active = [s for s in on_hv if (watcher.wait(s) or (0, ""))[1] == "spawned"]
            results["fill"] = {
                "seconds": time.monotonic() - began,
                "servers_active": len(fill.latencies) * fill.count,
                "errors": fill.why,
                "on_hypervisor": len(hv_active),
                "events": caught_up(),
                "servers": _live(conn),
            }
            print(f"fill: {json.dumps(results['fill'])}", flush=True)
            sampler.phase = "load"
            owned = shares(conn, tokens, args.clients)
            owned.append(Servers(cloud.token, [(s, "ACTIVE") for s in hv_active], host=HYPERVISOR))
            snapshots = []
            if args.trace_dir:  # at the load's start, each quarter of it, and its end
                sampler.snapshot()
                snapshots = [threading.Timer(15 * args.minutes * q, sampler.snapshot) for q in (1, 2, 3)]
                for timer in snapshots:
                    timer.start()
            outcomes = load(cloud.port, owned, args.minutes, args.rate)
            for timer in snapshots:
                timer.cancel()
            sampler.phase = "end"
            results["load"] = {"requests": dict(sorted(outcomes.items())), "events": caught_up(),
                               "servers": _live(conn)}  # fmt: skip
            sampler.sample()
            if args.trace_dir:
                sampler.snapshot()
                time.sleep(10)  # each part writes its snapshot before the control plane stops
            print(f"load: {json.dumps(results['load'])}", flush=True)
        finally:
            watcher.close()
            sampler.close()
            results["samples"] = sampler.samples
    results["machine"]["load average at end"] = loadavg()
    results["summary"] = summary(results["samples"])
    return results


def caches(size: int | None) -> dict[str, int]:
    """Every part's aggregate cache at ``size`` (None: each part's default), to compare sizes."""
    if size is None:
        return {}
    return {f"{part}_aggregate_cache": size for part in ("api", "scheduler", "hypervisor")}


def _live(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(f"SELECT count(*) FROM {LIVE_SCHEMA}.instances WHERE NOT deleted").fetchone()
    return int(row[0]) if row else 0


# -- the numbers ----------------------------------------------------------------------------------
def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MiB), in MiB per hour (0 with fewer than two points)."""
    if len(points) < 2:
        return 0.0
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return 3600 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


def summary(samples: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per part (and the control plane's sum): RSS after the fill (the load's first sample), at the
    end, the most over the load, and the slope over the load (MiB per hour)."""
    loaded = [s for s in samples if s["phase"] in ("load", "end")]
    if not loaded:
        return {}

    def rss(s: dict[str, Any], part: str) -> float:
        if part == "control plane":
            return float(sum(s["memory"][p]["rss_mib"] for p in PLANE))
        return float(s["memory"][part]["rss_mib"])

    out = {}
    for part in (*PLANE, "control plane", *APART):
        values = [(s["t"], rss(s, part)) for s in loaded]
        out[part] = {
            "start_mib": values[0][1],
            "end_mib": values[-1][1],
            "max_mib": max(v for _, v in values),
            "slope_mib_per_hour": slope(values),
            "minutes": (values[-1][0] - values[0][0]) / 60,
        }
    return out


def table(results: dict[str, Any]) -> str:
    """The markdown table of docs/performance.md, "Memory"."""
    lines = [
        "| part | RSS after the fill MiB | at the end MiB | max MiB | slope MiB/h | flat? |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for part, s in results["summary"].items():
        drift = s["slope_mib_per_hour"] * s["minutes"] / 60  # what the slope adds over the run
        flat = "yes" if abs(drift) < max(2.0, 0.03 * s["start_mib"]) else f"no: {drift:+.0f} MiB over the run"
        name = f"**{part}** (goal {GOAL_MIB:.0f} MiB = 400 MB)" if part == "control plane" else part
        lines.append(
            f"| {name} | {s['start_mib']:.0f} | {s['end_mib']:.0f} | {s['max_mib']:.0f} "
            f"| {s['slope_mib_per_hour']:+.1f} | {flat} |"
        )
    return "\n".join(lines)


def plot(results: dict[str, Any], out: Path) -> Path | None:
    """RSS over time per part, the control plane's sum against the goal; None without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        print("no plot: matplotlib is not installed (pip install -e '.[bench]')", flush=True)
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = results["samples"]
    minutes = [s["t"] / 60 for s in samples]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(14, 5))
    for part in PLANE:
        ax.plot(minutes, [s["memory"][part]["rss_mib"] for s in samples], label=part)
    total = [sum(s["memory"][p]["rss_mib"] for p in PLANE) for s in samples]
    ax.plot(minutes, total, color="black", linewidth=2, label="control plane (sum)")
    ax.axhline(GOAL_MIB, color="red", linestyle="--", label="goal: 400 MB")
    for part in APART:
        bx.plot(minutes, [s["memory"][part]["rss_mib"] for s in samples], label=part)
    load = [s["t"] / 60 for s in samples if s["phase"] == "load"]
    for axis in (ax, bx):
        if load:
            axis.axvspan(load[0], load[-1], color="grey", alpha=0.1, label="mixed load")
        axis.set_ylim(0, None)
        axis.set_xlabel("minutes")
        axis.set_ylabel("RSS MiB")
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=7, loc="center right")
    fill = results.get("fill", {})
    ax.set_title(
        f"the control plane: {fill.get('servers_active', '?')} servers, then mixed load", fontsize=10
    )
    bx.set_title("apart: nats-server, PostgreSQL, the simulated hosts", fontsize=10)
    fig.suptitle(
        f"Stratus: RSS over time (bench_memory; {results['machine'].get('cpu', '')}, load "
        f"{results['machine'].get('load average at start', '?')})",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_memory", description=__doc__)
    parser.add_argument("--servers", type=int, default=10_000, help="servers created before the load")
    parser.add_argument("--minutes", type=float, default=30, help="minutes of mixed load")
    parser.add_argument("--interval", type=float, default=10, help="seconds between two samples")
    parser.add_argument("--hosts", type=int, default=100, help="simulated hosts")
    parser.add_argument("--projects", type=int, default=4)
    parser.add_argument("--clients", type=int, default=8, help="clients, in the fill and the load")
    parser.add_argument("--count", type=int, default=10, help="servers per create in the fill")
    parser.add_argument("--on-hypervisor", type=int, default=6, help="servers on the hypervisor's host")
    parser.add_argument("--rate", type=float, default=5, help="requests per second in the load, in all")
    parser.add_argument(
        "--aggregate-cache",
        type=int,
        default=None,
        help="every part's aggregate cache (default: each part's setting), to compare sizes",
    )
    parser.add_argument(
        "--trace-dir",
        type=Path,
        default=None,
        help="each part traces its allocations and writes tracemalloc snapshots here at the load's "
        "start, quarters and end (STRATUS_MEMORY_TRACE_DIR; compare with python -m processes.memtrace)",
    )
    parser.add_argument("--json", type=Path, default=DOCS / "memory.json")
    parser.add_argument("--plot", type=Path, default=DOCS / "memory.png")
    parser.add_argument("--plot-only", action="store_true", help="redraw the plot and the table from --json")
    args = parser.parse_args(argv)
    if args.plot_only:
        results = json.loads(args.json.read_text())
    else:
        # a long run stopped with SIGTERM stops its control plane too (each part's context exits)
        signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
        results = run(args)
        args.json.write_text(json.dumps(results, indent=1) + "\n")
        print(f"wrote {args.json}")
    print(table(results))
    written = plot(results, args.plot)
    if written is not None:
        print(f"wrote {written}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
