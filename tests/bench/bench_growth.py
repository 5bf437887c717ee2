"""Flat growth, measured: what a command, an append, a list page and a scheduling decision cost as the
log grows (10^3 → 10^6 events) and with 1,000 and 10,000 servers in a project; and what each process
of the control plane holds in memory on the way (its RSS).

Run: ``python -m tests.bench.bench_growth [--sizes 1000,10000,100000,1000000]`` (~30 to 40 min for
10^6 on a 2-core machine; ``--sizes 1000,10000`` takes ~2 min). It needs matplotlib for the plots (the
``bench`` extra of pyproject.toml); ``--plot-only`` redraws them from the JSON of an earlier run.

The control plane runs as ``tests.bench.bench_boot`` deploys it: its own nats-server and database,
the projector, the API under gunicorn (one worker of 16 threads). The log is grown by this process
with the domain's own aggregates in atomic appends of up to 1,000 events (the JetStream batch limit),
in the order a busy cloud records them:

- 3 flavors and ``--hosts`` hosts; then two projects filled to 1,000 and 10,000 ACTIVE servers
  (requested, claimed on a host + scheduled, spawning, spawned: five events each);
- then churn: servers booted and deleted again, up to 400 in flight with their steps interleaved
  (requested → claimed + scheduled → spawning → spawned → delete requested → deleted + claim
  released; 3 % fault with "No valid host"); 90 % in 37 other projects, 5 % each in the two listed
  projects (so that their tables hold deleted rows, as a real project's do).

At each size of ``--sizes`` the bench waits for the projector to have applied the whole log, then
measures, ``--samples`` calls each, one call at a time (latency: median and p90):

- **append**: ``recorder.append`` of one event at version n+1 of an aggregate (``Instance.Scheduled``
  after its ``Requested``), and its floor: the same message published raw with ``js.publish`` (one
  ``NatsBridge.run`` each, as the recorder hops too);
- **command**: ``Handlers.create_server`` (load the flavor, the project's usage and quota, decide,
  one atomic append);
- **list**: ``GET /v2.1/servers/detail?limit=100`` through gunicorn in each listed project, the
  first page and a middle page (``marker`` = the server at the middle of the project's list), and the
  first page's SQL alone (the floor);
- **scheduling**: the scheduler's step, in this process: ``Scheduling.place_batch`` of one request
  (catch the host view up, rank, claim, one atomic append of the claim and the placement) for the
  servers the command samples created; and the scheduler's start-up, in a fresh application: a new
  host view started from the hosts' snapshots (``HostFeed``, as ``stratus scheduler`` starts), and,
  for comparison, folded from every Host event in the log (snapshots off: every start before); the
  log's hosts are snapshotted as the application would (``Growth.snapshot_hosts``);
- **a host's load**: ``repository.get`` of one host in a fresh application (a cold load, as a worker's
  start or the host view's gap repair reads it: its newest snapshot and the events after it);
- **memory**: the RSS (and PSS) of the API (gunicorn master and worker), the projector, nats-server,
  and PostgreSQL's backends connected to the bench's database.

At the last size, the memory of every part of the control plane: the backlog of ``Instance.Requested``
(the log's own, placed by this process) is acknowledged on the scheduler's durable consumer, then
``stratus scheduler`` and one ``stratus hypervisor`` (libvirt's test driver, host ``growth-hv``)
start; 50 servers are created through the API (placed by that scheduler) and 20 are placed on the
hypervisor's host (which starts them); then every process's RSS.

Written: ``--json`` (default ``docs/growth.json``) and the plots ``docs/growth.png`` (each metric
against the log's size) and ``docs/growth-memory.png``. No number here is an assertion: the machine is
noisy; read the shape and the ratios (docs/performance.md, "Growth" and "Memory").
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import http.client
import itertools
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import psycopg
from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate

from commands.app import SNAPSHOT_INTERVAL, Stratus
from commands.bus import bootstrap
from commands.errors import InsufficientResources
from commands.host import Host, Resources, host_aggregate_id
from commands.instance import Instance
from projections.schema import LIVE_SCHEMA
from stratus.context import CommandContext
from stratus.eventstore import Factory, NatsBridge
from stratus.eventstore.errors import EventStoreUnavailable
from stratus.eventstore.snapshots import take_snapshot
from tests.bench.bench_boot import ControlPlane, control_plane, send
from tests.bench.bench_eventstore import publish_sequential, raw_message
from tests.bench.bench_placement import process
from tests.bench.bench_servers_detail import http_get
from tests.bench.harness import loadavg, machine_lines
from tests.bench.lifecycles import Lifecycles
from tests.fixtures.commands import requested
from tests.fixtures.facades.handlers import CreateFlavor, CreateServer, Handlers
from tests.fixtures.facades.operations import Operations
from workers.consumer import DurableConsumer
from workers.host_feed import HostFeed
from workers.host_view import HostView
from workers.scheduler import DURABLE, moves, request_log, siblings_reader, subjects, unshelves
from workers.scheduling import Scheduling
from workers.weighers import Multipliers

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
BATCH = 1000  # events per atomic append at most (JetStream's atomic batch limit)
LISTED = (1_000, 10_000)  # servers in each listed project
FLAVOR = "m1.small"
HYPERVISOR = "growth-hv"


# -- the log --------------------------------------------------------------------------------------
class Growth:
    """Grows the log as a busy cloud would, in atomic appends of up to ``BATCH`` events."""

    def __init__(self, app: Stratus, flavor: dict[str, Any], hosts: int, listed: dict[int, str]) -> None:
        self.app = app
        self.flavor = flavor
        self.listed = listed  # servers wanted -> project id
        self.live: dict[str, list[str]] = {p: [] for p in listed.values()}  # project -> its servers
        self.rng = random.Random(7)
        self.hosts = [Host.register(f"compute-{i:04}", 512, 2**21, 2**16) for i in range(hosts)]
        self.buffer: list[Any] = []
        self.appended = 0
        self.lifecycles = Lifecycles(self.rng, self.hosts, self.emit)
        self.n = 0
        self.snapshotted: dict[UUID, int] = {}  # host -> the version of its last snapshot
        self.emit(*self.hosts)

    def emit(self, *aggregates: Aggregate) -> None:
        for agg in aggregates:
            for event in agg.collect_events():
                self.buffer.append(self.app.mapper.to_stored_event(event))
        if len(self.buffer) >= BATCH - 4:  # one step emits at most 3 events
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            self.app.recorder.append(self.buffer)  # type: ignore[attr-defined]
            self.appended += len(self.buffer)
            self.buffer = []
            self.snapshot_hosts()

    def snapshot_hosts(self) -> None:
        """As the application does after a save: snapshot each host whose history reached a multiple
        of ``SNAPSHOT_INTERVAL`` (the bench appends its events itself, not through ``save``)."""
        store = self.app.snapshots
        if store is None:
            return
        for host in self.hosts:
            if host.version // SNAPSHOT_INTERVAL > self.snapshotted.get(host.id, 0) // SNAPSHOT_INTERVAL:
                snapshot = take_snapshot(host, self.app.recorder)
                if snapshot is not None:
                    store.put([snapshot])
                    self.snapshotted[host.id] = host.version

    def size(self) -> int:
        return self.appended + len(self.buffer)

    def request(self, project: str) -> Instance:
        self.n += 1
        return Instance.request(
            uuid4(),
            name=f"vm-{self.n}",
            project_id=project,
            user_id=f"user-{self.n % 101}",
            flavor=dict(self.flavor),
            image_ref="cirros-0.6.2-x86_64",
            metadata={"role": self.rng.choice(["web", "db", "batch"]), "n": str(self.n)},
            availability_zone=None,
            request_key=None,
        )

    def grow_to(self, events: int) -> None:
        """Fill the listed projects first (smallest first), then churn, until ``events``."""
        while self.size() < events:
            wanted = [(want, p) for want, p in sorted(self.listed.items()) if len(self.live[p]) < want]
            if wanted:
                self.boot(wanted[0][1])
            else:
                self.churn()
        self.flush()

    def boot(self, project: str) -> None:
        """One server of a listed project, ACTIVE (its boot's five events)."""
        inst = self.request(project)
        host = self.hosts[self.n % len(self.hosts)]
        host.claim(inst.server_id, Resources.of_flavor(inst.flavor))
        inst.schedule(host.hostname)
        inst.start_spawning(host.hostname)
        inst.finish_spawning(1)
        self.emit(inst, host)
        self.live[project].append(inst.server_id)

    def churn(self) -> None:
        """One step of the servers in flight, or a new one (interleaved, as a busy cloud's are)."""
        self.lifecycles.step(self._churned)

    def _churned(self) -> Instance:
        draw = self.rng.random()
        listed = sorted(self.listed.values())
        project = listed[0] if draw < 0.05 else listed[-1] if draw < 0.10 else f"churn-{self.n % 37}"
        return self.request(project)

    def adopt(self, view: HostView) -> None:
        """Take the hosts as the log has them now (others, e.g. the scheduler's step, claimed on them)."""
        for i, host in enumerate(self.hosts):
            seen = view.named(host.hostname)
            if seen is not None and seen.version != host.version:
                self.hosts[i] = copy.deepcopy(seen)  # the view's own stays the view's
        by_name = {h.hostname: h for h in self.hosts}
        flight = self.lifecycles.flight
        for k, (inst, held, step) in enumerate(flight):
            if held is not None:
                flight[k] = (inst, by_name[held.hostname], step)


# -- measuring ------------------------------------------------------------------------------------
def timed(fn: Callable[[], Any], n: int) -> list[float]:
    """Seconds of each of ``n`` calls."""
    return each(lambda _: fn(), range(n))


def each(fn: Callable[[Any], Any], args: Iterable[Any]) -> list[float]:
    """Seconds of ``fn(arg)`` for each of ``args``."""
    out = []
    for arg in args:
        began = time.perf_counter()
        fn(arg)
        out.append(time.perf_counter() - began)
    return out


def summary(xs: list[float]) -> dict[str, float]:
    """Median and p90 in milliseconds (and the count)."""
    ordered = sorted(xs)
    if not ordered:
        return {"n": 0}
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return {"median_ms": 1000 * statistics.median(ordered), "p90_ms": 1000 * p90, "n": len(ordered)}


def appends(app: Stratus, bridge: NatsBridge, n: int) -> dict[str, dict[str, float]]:
    """One event at version n+1: ``recorder.append`` and the raw publish of the same message."""
    recorder, mapper = app.recorder, app.mapper

    def batch(tag: str) -> list[Instance]:
        flavor = {"id": FLAVOR, "name": FLAVOR, "vcpus": 1, "ram": 512, "disk": 1, "ephemeral": 0, "swap": 0}
        return [requested(f"{tag}-{i}", "growth-append", flavor) for i in range(n)]

    ours, raw = batch("a"), batch("r")
    app.save(*ours)
    firsts = [
        raw_message(recorder, mapper.to_stored_event(e), 0)  # type: ignore[arg-type]
        for inst in raw
        for e in inst.collect_events()
    ]
    seqs = bridge.run(lambda: publish_sequential(bridge, firsts), 60.0)
    for inst in ours + raw:
        inst.schedule("compute-0000")
    stored = [mapper.to_stored_event(e) for inst in ours for e in inst.collect_events()]
    nexts = [
        raw_message(recorder, mapper.to_stored_event(e), seq)  # type: ignore[arg-type]
        for inst, seq in zip(raw, seqs, strict=True)
        for e in inst.collect_events()
    ]
    floor = each(lambda m: bridge.run(lambda: publish_sequential(bridge, [m]), 10.0), nexts)
    append = each(lambda e: recorder.append([e]), stored)  # type: ignore[attr-defined]
    return {"append": summary(append), "append_floor": summary(floor)}


def commands(handlers: Handlers, n: int, stage: int) -> tuple[dict[str, float], list[str]]:
    """``Handlers.create_server``, one at a time; and the servers it created."""
    created: list[str] = []

    def create(i: int) -> None:
        result = handlers.create_server(CreateServer(f"cmd-{stage}-{i}", "growth-cmd", "u", FLAVOR))
        created.append(result.id)

    return summary(each(create, range(n))), created


def lists(
    cloud: ControlPlane,
    conn: psycopg.Connection[Any],
    tokens: dict[str, str],
    n: int,
) -> dict[str, Any]:
    """First and middle pages of each listed project, through gunicorn; the first page's SQL alone."""
    out: dict[str, Any] = {}
    for project, token in tokens.items():
        live = conn.execute(
            f"SELECT count(*) FROM {LIVE_SCHEMA}.instances WHERE project_id = %s AND NOT deleted", (project,)
        ).fetchone()[0]  # type: ignore[index]
        rows = conn.execute(
            f"SELECT count(*) FROM {LIVE_SCHEMA}.instances WHERE project_id = %s", (project,)
        ).fetchone()[0]  # type: ignore[index]
        middle = conn.execute(
            f"SELECT id FROM {LIVE_SCHEMA}.instances WHERE project_id = %s AND NOT deleted "
            "ORDER BY created_at DESC, id DESC OFFSET %s LIMIT 1",
            (project, live // 2),
        ).fetchone()
        first_sql = (
            f"SELECT * FROM {LIVE_SCHEMA}.instances WHERE project_id = %s AND NOT deleted "
            "ORDER BY created_at DESC, id DESC LIMIT 100"
        )
        get, auth = http_get(cloud.port), {"X-Auth-Token": token}
        first = timed(partial(get, "/v2.1/servers/detail?limit=100", auth), n)
        mid: list[float] = []
        if middle is not None:
            mid = timed(partial(get, f"/v2.1/servers/detail?limit=100&marker={middle[0]}", auth), n)
        floor = timed(partial(_fetch, conn, first_sql, project), n)
        out[project] = {
            "live": live,
            "rows": rows,
            "first": summary(first),
            "middle": summary(mid),
            "first_sql": summary(floor),
        }
    return out


def catch_up(feed: HostFeed) -> int:
    """Bring the host view to the log's end; how many tries it took. One try must receive every Host
    event since the last within the feed's timeout (10 s): a start-up over a long log takes several
    (the scheduler's own deliveries retry the same way, after a failed batch)."""
    for tries in itertools.count(1):
        try:
            feed.catch_up()
            return tries
        except (TimeoutError, EventStoreUnavailable):  # the latter: stalled, the feed started over
            if tries >= 100:
                raise
    raise AssertionError("unreachable")


def _fetch(conn: psycopg.Connection[Any], query: str, project: str) -> list[Any]:
    return conn.execute(query, (project,)).fetchall()  # type: ignore[arg-type]


def scheduling(
    app: Stratus, bridge: NatsBridge, settings: Any, servers: list[str], growth: Growth
) -> dict[str, Any]:
    """The scheduler's start-up (a host view folded from the log) and its step for each server."""
    _, host_filter = subjects(settings)

    def reload(host_id: UUID) -> Host | None:
        try:
            host: object = app.repository.get(host_id)
        except AggregateNotFoundError:
            return None
        return host if isinstance(host, Host) else None

    def start(**env: str) -> tuple[HostView, HostFeed, float, int]:
        """A scheduler's start, in a process of its own (no aggregate cached): its view and feed,
        the seconds to the first complete view, and the catch-up tries it took."""
        began = time.perf_counter()
        cold = Stratus(Factory(env or None, bridge=bridge, settings=settings))
        view = HostView(reload)
        feed = HostFeed(bridge, cold, view, stream=settings.stream, subject_filter=host_filter).open()
        rounds = catch_up(feed)
        return view, feed, time.perf_counter() - began, rounds

    view, feed, startup, rounds = start()  # from the hosts' snapshots
    try:
        # before snapshots: every Host event of the log folded (as with snapshots off)
        full, full_feed, full_fold, full_rounds = start(IS_SNAPSHOTTING_ENABLED="n")
        full_feed.close()
        folded = {h.hostname: (h.version, h.free()) for h in full.hosts()}
        started = {h.hostname: (h.version, h.free()) for h in view.hosts()}
        differ = sorted(n for n in folded.keys() | started.keys() if folded.get(n) != started.get(n))
        if differ:  # recorded, not raised: the sizes after still measure
            print(f"the view started from snapshots differs from the full fold's: {differ}", flush=True)
        step = Scheduling(
            bootstrap(app),
            view,
            feed.catch_up,
            multipliers=Multipliers.of(settings),
            siblings=siblings_reader(request_log(app)),
        )
        requests: list[Instance] = [app.repository.get(UUID(s)) for s in servers]
        left: list[Any] = []
        decisions = each(lambda inst: left.extend(step.place_batch([(inst, CommandContext())])), requests)
        catch_up(feed)
        growth.adopt(view)
    finally:
        feed.close()
    # A cold load, as a worker's start or the view's gap repair reads a host: a fresh application
    # (the bench's own caches each host at the previous size's version, and would catch it up).
    cold = Stratus(Factory(bridge=bridge, settings=settings))
    load = each(lambda h: cold.repository.get(h.id), growth.hosts[:20])
    return {
        "startup_s": startup,
        "startup_full_fold_s": full_fold,
        "startup_hosts": dict(feed.started),  # from a snapshot the feed follows on / loaded alone
        "startup_timeouts": rounds - 1,
        "startup_full_fold_timeouts": full_rounds - 1,  # catch-ups cut short by their deadline
        "hosts_folded": len(view),
        "views_differ": differ,  # hosts whose version or free resources the two starts disagree on
        "decision": summary(decisions),
        "not_placed": len(left),
        "host_load": summary(load),
    }


# -- memory -----------------------------------------------------------------------------------------
def _kib(pid: int, path: str, key: str) -> int:
    with contextlib.suppress(OSError), open(f"/proc/{pid}/{path}") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1])
    return 0


def process_tree(pid: int) -> list[int]:
    """``pid`` and every process under it."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with contextlib.suppress(OSError), open(f"/proc/{p}/task/{p}/children") as f:
            todo.extend(int(c) for c in f.read().split())
    return out


def memory(pids: dict[str, list[int]]) -> dict[str, dict[str, float]]:
    """RSS and PSS (MiB) of each part, summed over its processes."""
    out = {}
    for part, group in pids.items():
        rss = sum(_kib(p, "status", "VmRSS:") for p in group)
        pss = sum(_kib(p, "smaps_rollup", "Pss:") for p in group)
        out[part] = {"rss_mib": rss / 1024, "pss_mib": pss / 1024, "processes": len(group)}
    return out


def postgres_backends(conn: psycopg.Connection[Any], dbname: str) -> list[int]:
    rows = conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (dbname,)).fetchall()
    return [int(r[0]) for r in rows]


def skip_backlog(bridge: NatsBridge, settings: Any) -> int:
    """Acknowledge every request waiting on the scheduler's durable consumer (the log's own, placed
    already by this process), so that ``stratus scheduler`` starts with nothing to do but what comes."""
    requested, _ = subjects(settings)
    consumer = DurableConsumer(
        bridge,
        stream=settings.stream,
        durable=DURABLE,
        filter_subjects=[requested, unshelves(settings), moves(settings)],
        call_timeout=120.0,
    ).open()
    done = 0
    while msgs := consumer.fetch(500, 2.0):
        consumer.ack_all(msgs)
        done += len(msgs)
    return done


def wait_for(probe: Callable[[], Any], what: str, timeout: float = 600) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.5)
    raise RuntimeError(f"no {what} after {timeout:.0f} s")


def projected(conn: psycopg.Connection[Any], position: int) -> bool:
    row = conn.execute(f"SELECT position FROM {LIVE_SCHEMA}.tracking").fetchone()
    return bool(row and row[0] >= position)


@contextlib.contextmanager
def workers(cloud: ControlPlane, tmp: Path) -> Iterator[tuple[Any, Any]]:
    """``stratus scheduler`` and one ``stratus hypervisor`` (libvirt's test driver, host ``growth-hv``)."""
    env = {**os.environ, **cloud.settings.to_env(), "PYTHONPATH": str(ROOT)}
    stratus = [sys.executable, "-m", "processes.cli"]
    hv_env = {**env, "STRATUS_HOST_NAME": HYPERVISOR, "STRATUS_LIBVIRT_URI": "test:///default"}
    with (
        process([*stratus, "scheduler"], env, tmp / "scheduler.log") as scheduler,
        process([*stratus, "hypervisor"], hv_env, tmp / "hypervisor.log") as hypervisor,
    ):
        yield scheduler, hypervisor


def whole_plane(
    cloud: ControlPlane,
    app: Stratus,
    bridge: NatsBridge,
    growth: Growth,
    conn: Any,
    parts: dict[str, list[int]],
    tmp: Path,
    running: tuple[Any, Any] | None = None,
) -> dict[str, Any]:
    """Start ``stratus scheduler`` and one ``stratus hypervisor`` (unless ``running``: they ran from
    the start), give them work, read every RSS."""
    skipped = 0 if running else skip_backlog(bridge, cloud.settings)
    with contextlib.ExitStack() as stack:
        scheduler, hypervisor = running or stack.enter_context(workers(cloud, tmp))
        hv_id = host_aggregate_id(HYPERVISOR)

        def registered() -> Host | None:
            with contextlib.suppress(AggregateNotFoundError):
                return app.repository.get(hv_id)  # type: ignore[no-any-return]
            return None

        host = wait_for(registered, "hypervisor registered", 120)
        began = app.recorder.max_notification_id() or 0
        posted = []
        for i in range(50):  # through the API: the scheduler places them
            status, doc = send(
                cloud.port,
                cloud.token,
                "POST",
                "/v2.1/servers",
                {"server": {"name": f"mem-{i}", "flavorRef": FLAVOR, "networks": "none"}},
            )
            assert status == 202, doc
            posted.append(doc["server"]["id"])
        on_hv = 0
        for _ in range(20):  # on the hypervisor's host, as many as fit: it starts them
            inst = growth.request("growth-hv")
            try:
                host.claim(inst.server_id, Resources.of_flavor(inst.flavor))
            except InsufficientResources:
                break
            inst.schedule(HYPERVISOR)
            app.save(host, inst)
            on_hv += 1
        wait_for(
            lambda: (
                projected(conn, app.recorder.max_notification_id() or 0)
                and conn.execute(
                    f"SELECT count(*) FROM {LIVE_SCHEMA}.instances WHERE project_id = 'growth-hv' "
                    "AND status = 'ACTIVE'"
                ).fetchone()[0]
                == on_hv
            ),
            "servers ACTIVE on the hypervisor",
            300,
        )
        placed = conn.execute(
            f"SELECT count(*) FROM {LIVE_SCHEMA}.instances WHERE id = ANY(%s) AND host IS NOT NULL",
            ([UUID(p) for p in posted],),
        ).fetchone()[0]
        time.sleep(2)
        mem = memory(
            {
                **parts,
                "scheduler": process_tree(scheduler.pid),
                "hypervisor worker": process_tree(hypervisor.pid),
                "PostgreSQL backends": postgres_backends(conn, conn.info.dbname),
            }
        )
        return {
            "memory": mem,
            "skipped_requests": skipped,
            "api_creates_placed": placed,
            "on_hypervisor": on_hv,
            "events_since": (app.recorder.max_notification_id() or 0) - began,
        }


# -- the run --------------------------------------------------------------------------------------
def project_id(cloud: ControlPlane, token: str) -> str:
    """The project a token is scoped to (Keystone's token validation)."""
    conn = http.client.HTTPConnection("127.0.0.1", cloud.port, timeout=30)
    try:
        headers = {"X-Auth-Token": token, "X-Subject-Token": token}
        conn.request("GET", "/identity/v3/auth/tokens", headers=headers)
        r = conn.getresponse()
        return str(json.loads(r.read())["token"]["project"]["id"])
    finally:
        conn.close()


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[str, Any] = {"machine": {}, "stages": []}
    with (
        tempfile.TemporaryDirectory(prefix="stratus-bench-growth-") as d,
        control_plane("bench_growth", Path(d), [], api_workers=1, api_threads=16) as cloud,
    ):
        tokens = {project_id(cloud, t): t for t in (cloud.project_token(f"listed-{n}") for n in LISTED)}
        listed = dict(zip(LISTED, tokens, strict=True))
        bridge = NatsBridge(cloud.settings.nats_urls, name="bench-growth").start()
        stack = contextlib.ExitStack()  # --plane-from-start: the scheduler and the hypervisor
        try:
            app = Stratus(Factory(bridge=bridge, settings=cloud.settings))
            handlers = Handlers(app)
            handlers.create_flavor(CreateFlavor(flavorid=FLAVOR, name=FLAVOR, vcpus=1, ram=512, disk=1))
            Operations(app).set_quota("growth-cmd", {"instances": -1, "cores": -1, "ram": -1}, {})
            running = None
            if args.plane_from_start:  # they see the log grow (its requests: placed already)
                running = stack.enter_context(workers(cloud, Path(d)))
            growth = Growth(app, handlers.flavor(FLAVOR).snapshot_for_instance(), args.hosts, listed)
            api_pid = api_process(cloud)
            with psycopg.connect(cloud.settings.database_url or "", autocommit=True) as conn:
                info = machine_lines({"postgresql": cloud.pg_source, "hosts": str(args.hosts)})
                print("\n".join(info), flush=True)
                results["machine"] = dict(line.split(": ", 1) for line in info)
                for stage, size in enumerate(sizes):
                    began = time.perf_counter()
                    growth.grow_to(size)
                    grown = time.perf_counter() - began
                    head = app.recorder.max_notification_id() or 0
                    wait_for(lambda head=head: projected(conn, head), "projector caught up", 3600)  # type: ignore[misc]
                    caught = time.perf_counter() - began - grown
                    print(
                        f"{head} events (grown in {grown:.0f} s, projected {caught:.0f} s later; "
                        f"load {loadavg()})",
                        flush=True,
                    )
                    row: dict[str, Any] = {
                        "events": head,
                        "grown_s": grown,
                        "projector_lag_s": caught,
                        "load": loadavg(),
                    }
                    if running is None:  # a running scheduler would take the samples' requests
                        row.update(appends(app, bridge, args.samples))
                        row["create_server"], created = commands(handlers, args.samples, stage)
                        row["lists"] = lists(
                            cloud, conn, {p: tokens[p] for p in listed.values()}, args.samples
                        )
                        row["scheduling"] = scheduling(
                            app, bridge, cloud.settings, created[: args.samples], growth
                        )
                    parts = {
                        "API (gunicorn master + worker)": process_tree(api_pid),
                        "projector": role_pids(cloud, "projector"),
                        "nats-server": [cloud.nats_pid],
                    }
                    row["memory"] = memory(
                        {**parts, "PostgreSQL backends": postgres_backends(conn, conn.info.dbname)}
                    )
                    row["live_servers"] = sum(len(v) for v in growth.live.values())
                    print(json.dumps(_brief(row)), flush=True)
                    results["stages"].append(row)
                    args.json.write_text(json.dumps(results, indent=1) + "\n")  # so far
                if args.memory:
                    try:
                        plane = whole_plane(cloud, app, bridge, growth, conn, parts, Path(d), running)
                    except (RuntimeError, TimeoutError, AssertionError) as e:  # the stages stand
                        print(f"the whole control plane's memory was not measured: {e!r}", flush=True)
                    else:
                        results["whole_plane"] = {**plane, "events": app.recorder.max_notification_id()}
                        print(json.dumps(results["whole_plane"], indent=1), flush=True)
        finally:
            stack.close()
            bridge.close()
    results["machine"]["load average at end"] = loadavg()
    return results


def api_process(cloud: ControlPlane) -> int:
    """The API's process (gunicorn's master: ``stratus api`` execs it), a child of this one."""
    for pid in process_tree(os.getpid())[1:]:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"gunicorn" in f.read() and str(cloud.port).encode() in _environ(pid):
                return pid
    for pid in process_tree(os.getpid())[1:]:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
            if b"api" in argv or any(b"gunicorn" in a for a in argv):
                return pid
    raise RuntimeError("no API process")


def _environ(pid: int) -> bytes:
    with contextlib.suppress(OSError), open(f"/proc/{pid}/environ", "rb") as f:
        return f.read()
    return b""


def role_pids(cloud: ControlPlane, role: str) -> list[int]:
    """The processes of the first ``stratus <role>`` under this one (it and its children)."""
    del cloud
    for pid in process_tree(os.getpid())[1:]:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as f:
            if role.encode() in f.read().split(b"\0"):
                return process_tree(pid)
    return []


def _brief(row: dict[str, Any]) -> dict[str, Any]:
    """A stage's medians in one line (the JSON keeps everything)."""
    out: dict[str, Any] = {"events": row["events"]}
    if "append" not in row:  # memory only (--plane-from-start)
        return {**out, "rss": {k: round(v["rss_mib"]) for k, v in row["memory"].items()}}
    for key in ("append", "append_floor", "create_server"):
        out[key] = round(row[key]["median_ms"], 2)
    for page in row["lists"].values():
        out[f"list {page['live']}"] = [
            round(page[k].get("median_ms", 0), 1) for k in ("first", "middle", "first_sql")
        ]
    s = row["scheduling"]
    out.update(
        decision=round(s["decision"]["median_ms"], 2),
        startup_s=round(s["startup_s"], 2),
        startup_full_fold_s=round(s.get("startup_full_fold_s", float("nan")), 2),
        host_load=round(s["host_load"]["median_ms"], 1),
    )
    out["rss"] = {k: round(v["rss_mib"]) for k, v in row["memory"].items()}
    return out


# -- the plots ------------------------------------------------------------------------------------
def plot(results: dict[str, Any], out: Path) -> list[Path]:
    """Each metric's median (p90 dashed) against the log's size, y from 0 so that flat looks flat;
    none without matplotlib (the JSON is written: ``--plot-only`` draws them later)."""
    try:
        import matplotlib
    except ModuleNotFoundError:
        print("no plots: matplotlib is not installed (pip install -e '.[bench]'; then --plot-only)")
        return []

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stages = results["stages"]
    xs = [s["events"] for s in stages]

    def series(
        get_: Callable[[dict[str, Any]], dict[str, float] | None],
    ) -> tuple[list[Any], list[Any], list[Any]]:
        x, med, p90 = [], [], []
        for s, e in zip(stages, xs, strict=True):
            v = get_(s)
            if v and v.get("n"):
                x.append(e)
                med.append(v["median_ms"])
                p90.append(v["p90_ms"])
        return x, med, p90

    def listed(k: int, page: str) -> Callable[[dict[str, Any]], dict[str, float] | None]:
        """Listed project ``k`` (0: the one of 1,000 servers, 1: of 10,000)."""

        def pick(s: dict[str, Any]) -> dict[str, float] | None:
            project = list(s["lists"].values())[k]
            return project[page] if project["live"] else None  # type: ignore[no-any-return]

        return pick

    def live(k: int) -> list[tuple[int, int]]:
        """(events, servers listed) where project ``k`` is not yet full (annotated on the plot)."""
        out = []
        for s, e in zip(stages, xs, strict=True):
            n = list(s["lists"].values())[k]["live"]
            if 0 < n < 0.9 * LISTED[k]:
                out.append((e, n))
        return out

    panels: list[tuple[str, list[tuple[str, Callable[[dict[str, Any]], Any]]]]] = [
        (
            "append, 1 event at version n+1 (ms)",
            [
                ("recorder.append", lambda s: s["append"]),
                ("floor: raw js.publish of the same message", lambda s: s["append_floor"]),
            ],
        ),
        ("command: Handlers.create_server (ms)", [("create_server", lambda s: s["create_server"])]),
        (
            "GET /servers/detail?limit=100, 1,000 servers (ms)",
            [
                ("first page", listed(0, "first")),
                ("middle page", listed(0, "middle")),
                ("floor: the first page's SQL", listed(0, "first_sql")),
            ],
        ),
        (
            "GET /servers/detail?limit=100, 10,000 servers (ms)",
            [
                ("first page", listed(1, "first")),
                ("middle page", listed(1, "middle")),
                ("floor: the first page's SQL", listed(1, "first_sql")),
            ],
        ),
        (
            "scheduling: one request placed (ms)",
            [("Scheduling.place_batch, 1 request", lambda s: s["scheduling"]["decision"])],
        ),
        (
            "loading one host, cold: its snapshot and the events after (ms)",
            [("repository.get(host), a fresh application", lambda s: s["scheduling"]["host_load"])],
        ),
    ]
    fig, axes = plt.subplots(2, 4, figsize=(20, 8.5))
    for ax, (title, lines) in zip(axes.flat, panels, strict=False):
        top = 0.0
        for label, get_ in lines:
            x, med, p90 = series(get_)
            if not x:
                continue
            (line,) = ax.plot(x, med, marker="o", label=f"{label} (median)")
            ax.plot(x, p90, linestyle="--", color=line.get_color(), alpha=0.5, label="_p90")
            top = max(top, *p90)
        if title.startswith("GET"):
            for e, n in live(0 if "1,000 servers" in title else 1):
                ax.annotate(
                    f"{n:,} servers then",
                    (e, 0),
                    xytext=(0, 8),
                    textcoords="offset points",
                    fontsize=7,
                    ha="center",
                )
        ax.set_xscale("log")
        ax.set_ylim(0, top * 1.25 or 1)
        ax.set_xlim(min(xs) / 2, max(xs) * 2)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("events in the log")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    startup_panel(axes.flat[len(panels)], stages, xs)
    axes.flat[len(panels) + 1].axis("off")
    fig.suptitle(
        f"Stratus: latency against the log's size (bench_growth; solid: median, dashed: p90; "
        f"{results['machine'].get('cpu', '')}, load {results['machine'].get('load average at start', '?')})",
        fontsize=11,
    )
    fig.tight_layout()
    written = [out / "growth.png"]
    fig.savefig(written[0], dpi=90)
    plt.close(fig)

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.8))
    parts = list(stages[-1]["memory"])
    for part in parts:
        ax.plot(
            xs,
            [s["memory"].get(part, {}).get("rss_mib", float("nan")) for s in stages],
            marker="o",
            label=part,
        )
    ax.set_xscale("log")
    ax.set_ylim(0, None)
    ax.set_title("RSS of each part (MiB) against the log's size", fontsize=10)
    ax.set_xlabel("events in the log")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    whole = results.get("whole_plane", {}).get("memory", {})
    if whole:
        names = list(whole)
        bx.barh(names, [whole[n]["rss_mib"] for n in names], color="tab:blue", label="RSS")
        bx.barh(names, [whole[n]["pss_mib"] for n in names], color="tab:orange", alpha=0.7, label="PSS")
        bx.set_title(f"every part at {results['whole_plane']['events']:,} events (MiB)", fontsize=10)
        bx.legend(fontsize=7)
        bx.tick_params(axis="y", labelsize=8)
    else:
        startup_panel(bx, stages, xs)
    fig.tight_layout()
    written.append(out / "growth-memory.png")
    fig.savefig(written[1], dpi=90)
    plt.close(fig)
    return written


def startup_panel(ax: Any, stages: list[dict[str, Any]], xs: list[int]) -> None:
    """The scheduler's start-up against the log's size: from the hosts' snapshots, and folded whole."""
    startup = [s["scheduling"]["startup_s"] for s in stages]
    full_fold = [s["scheduling"].get("startup_full_fold_s", float("nan")) for s in stages]
    ax.plot(xs, startup, marker="o", label="from the hosts' snapshots")
    ax.plot(xs, full_fold, marker="o", label="every Host event folded (snapshots off)")
    ax.set_xscale("log")
    ax.set_ylim(0, None)
    ax.set_xlim(min(xs) / 2, max(xs) * 2)
    ax.set_xlabel("events in the log")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title("scheduler start-up, a fresh view (s)", fontsize=10)


def tables(results: dict[str, Any]) -> str:
    """The markdown tables of docs/performance.md ("Growth", "Memory"), from a run's JSON."""

    def ms(v: dict[str, float]) -> str:
        return f"{v['median_ms']:.1f} / {v['p90_ms']:.1f}" if v.get("n") else "-"

    stages = [s for s in results["stages"] if "append" in s]
    lines = [
        "| events in the log | append (floor) ms | `create_server` ms | scheduling one request ms "
        "| scheduler start-up s (from snapshots; every Host event folded) | one host's load ms |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for s in stages:
        sch = s["scheduling"]
        full = sch.get("startup_full_fold_s", float("nan"))
        lines.append(
            f"| {s['events']:,} | {ms(s['append'])} ({ms(s['append_floor'])}) | {ms(s['create_server'])} "
            f"| {ms(sch['decision'])} | {sch['startup_s']:.2f}; {full:.2f} | {ms(sch['host_load'])} |"
        )
    lines += [
        "",
        "| events in the log | servers listed (rows of the project, deleted too) | first page ms "
        "| middle page ms | the first page's SQL alone ms | first page / its SQL |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for s in stages:
        for page in s["lists"].values():
            if not page["live"]:
                continue
            ratio = (
                f"{page['first']['median_ms'] / page['first_sql']['median_ms']:.1f}"
                if page["first_sql"].get("n")
                else "-"
            )
            lines.append(
                f"| {s['events']:,} | {page['live']:,} ({page['rows']:,}) | {ms(page['first'])} "
                f"| {ms(page['middle'])} | {ms(page['first_sql'])} | {ratio} |"
            )
    parts = list(results["stages"][-1]["memory"])
    lines += ["", "| events in the log | " + " | ".join(parts) + " |", "|---:|" + "---:|" * len(parts)]
    for s in results["stages"]:
        cells = [f"{s['memory'][p]['rss_mib']:.0f}" if p in s["memory"] else "-" for p in parts]
        lines.append(f"| {s['events']:,} | " + " | ".join(cells) + " |")
    whole = results.get("whole_plane")
    if whole:
        lines += ["", "| part | processes | RSS MiB | PSS MiB |", "|---|---:|---:|---:|"]
        for part, m in whole["memory"].items():
            lines.append(f"| {part} | {m['processes']} | {m['rss_mib']:.0f} | {m['pss_mib']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_growth", description=__doc__)
    parser.add_argument("--sizes", default="1000,10000,100000,1000000", help="log sizes to measure at")
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--samples", type=int, default=100, help="calls per path per size")
    parser.add_argument(
        "--no-memory",
        dest="memory",
        action="store_false",
        help="skip the whole control plane's memory at the last size",
    )
    parser.add_argument(
        "--plane-from-start",
        action="store_true",
        help="run the scheduler and the hypervisor from the start (memory only: no latencies; "
        "the log's own requests reach them as it grows; keep --sizes within the fill, ~55000)",
    )
    parser.add_argument("--json", type=Path, default=DOCS / "growth.json")
    parser.add_argument("--plots", type=Path, default=DOCS, help="where the PNGs go")
    parser.add_argument("--plot-only", action="store_true", help="redraw the plots from --json")
    args = parser.parse_args(argv)
    if args.plot_only:
        results = json.loads(args.json.read_text())
    else:
        results = run(args)
        args.json.write_text(json.dumps(results, indent=1) + "\n")
        print(f"wrote {args.json}")
    print(tables(results))
    for path in plot(results, args.plots):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
