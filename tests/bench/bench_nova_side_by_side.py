"""Stratus beside OpenStack Nova, the same workloads through the same client in one run.

Run: ``python -m tests.bench.bench_nova_side_by_side`` (about 15 minutes; the first time, set up
Nova's venv with ``tests/bench/nova/setup.sh install``, about 5 minutes more). Nova (from PyPI, its
own venv ``.stratus/bench/nova-venv``) runs as ``tests/bench/nova/setup.sh start`` deploys it: the
fake driver (``fake.FakeDriver``), PostgreSQL 127.0.0.1:5432 (databases nova_api, nova, nova_cell0,
nova_placement, dropped at the end), RabbitMQ (vhost nova_bench), ``auth_strategy = noauth2``,
OpenStack Placement, and a no-auth stub for Keystone, Glance and Neutron; nova-api under gunicorn,
nova-conductor, nova-scheduler and one nova-compute, each its own process. Stratus runs as
``tests.bench.bench_boot`` deploys it (its own nats-server and database; the API under gunicorn,
the projector, one scheduler, ``stratus simulate --hosts N``). One side runs at a time, Nova first;
then the other. Both APIs get the same gunicorn shape (``--api-workers`` x ``--api-threads``).

Workloads, on each side, over HTTP at microversion 2.52 (``"networks": "none"``):

1. **50 servers to ACTIVE**: one client POSTs 50 servers one after another (not waiting in between);
   the wall time from the first POST to the moment the last is seen ACTIVE.
2. **Boot storm**: 50 clients at once, each booting ``--storm-boots`` servers (default 1) one after
   another (POST, then wait for ACTIVE); each boot's POST→ACTIVE time; p50 and p99.
3. **A list of 1,000**: the project is filled to 1,000 servers (multi-create, 50 a request; the fill
   time is reported too), then ``GET /servers/detail?limit=100`` follows ``servers_links`` over
   every page, ``--list-rounds`` times (servers per second, median), and the first page alone.

A server is "seen ACTIVE" by one poller per workload that lists ``GET /servers?status=ACTIVE``
(and ``ERROR``) filtered on the workload's name prefix, pausing twice as long as its last poll took
(so that it never takes more than a third of one API thread): the same observer for both sides, so
times include up to one poll cycle (tens of ms on Stratus, about a second on Nova). Ratios are
Stratus / Nova of the same number; for times lower is better, for rates higher. No assertion is
timed.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import http.client
import os
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from stratus import serialization
from tests.bench.bench_boot import control_plane, percentile
from tests.bench.harness import TreeCpu, loadavg, machine_lines
from tests.bench.nova.stub import IMAGE_ID, PROJECT_ID

ROOT = Path(__file__).resolve().parents[2]
SETUP = ROOT / "tests" / "bench" / "nova" / "setup.sh"
NOVA_BENCH = Path(os.environ.get("NOVA_BENCH_DIR") or ROOT / ".stratus" / "bench")  # as setup.sh
NOVA_RUN = NOVA_BENCH / "nova-run"
NOVA_VENV = NOVA_BENCH / "nova-venv"
MICROVERSION = "compute 2.52"


# -- one compute API, either side -----------------------------------------------------------------
@dataclasses.dataclass
class Compute:
    """A compute API to drive: where it listens, the admin's token, the flavor and image to boot."""

    side: str
    port: int
    token: str
    flavor: str = ""
    image: str | None = None

    def connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)

    def send(
        self, method: str, path: str, body: Any = None, conn: http.client.HTTPConnection | None = None
    ) -> tuple[int, Any]:
        """One request at ``/v2.1`` + ``path``; on ``conn`` (kept alive, as an SDK's session) if given."""
        own = conn is None
        conn = conn or self.connect()
        headers = {
            "X-Auth-Token": self.token,
            "Content-Type": "application/json",
            "Accept": "application/json",
            "OpenStack-API-Version": MICROVERSION,
            "X-OpenStack-Nova-API-Version": MICROVERSION.split()[1],
        }
        data = None if body is None else serialization.dumps(body)
        try:
            for attempt in (1, 2):
                try:
                    conn.request(method, "/v2.1" + path, data, headers)
                    r = conn.getresponse()
                    doc = r.read()
                    return r.status, serialization.loads(doc) if doc else None
                except (OSError, http.client.HTTPException):
                    conn.close()  # the server closed an idle kept-alive connection: a GET goes again
                    if method != "GET" or attempt == 2:
                        raise
            raise AssertionError("unreachable")
        finally:
            if own:
                conn.close()

    def boot_body(self, name: str, count: int = 1) -> dict[str, Any]:
        server: dict[str, Any] = {"name": name, "flavorRef": self.flavor, "networks": "none"}
        if self.image:
            server["imageRef"] = self.image
        if count > 1:
            server.update(min_count=count, max_count=count, return_reservation_id=True)
        return {"server": server}

    def post_server(self, name: str, conn: http.client.HTTPConnection, count: int = 1) -> Any:
        try:
            status, doc = self.send("POST", "/servers", self.boot_body(name, count), conn)
        except (OSError, http.client.HTTPException):  # a kept-alive connection closed: once more
            status, doc = self.send("POST", "/servers", self.boot_body(name, count), conn)
        if status != 202:
            raise RuntimeError(f"{self.side}: POST /servers: {status} {str(doc)[:300]}")
        return doc

    def pages(self, path: str, key: str, conn: http.client.HTTPConnection, first_only: bool = False) -> int:
        """Follow ``<key>_links`` from ``path``; the number of items over every page."""
        total = 0
        while True:
            status, doc = self.send("GET", path, None, conn)
            if status != 200:
                raise RuntimeError(f"{self.side}: GET {path}: {status} {str(doc)[:300]}")
            total += len(doc[key])
            links = [link for link in doc.get(f"{key}_links") or [] if link.get("rel") == "next"]
            if first_only or not links:
                return total
            href = urllib.parse.urlsplit(links[0]["href"])
            path = href.path[href.path.index("/v2.1") + len("/v2.1") :] + "?" + href.query


class Poller:
    """Lists the servers named ``^prefix`` by status, back to back, and notes when each was first
    seen ACTIVE or ERROR, so that clients can wait for theirs."""

    def __init__(self, api: Compute, prefix: str) -> None:
        self.api, self.prefix = api, prefix
        self.seen: dict[str, tuple[float, str]] = {}
        self.polls = 0
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Poller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _ids(self, status: str, conn: http.client.HTTPConnection) -> list[str]:
        ids: list[str] = []
        path = f"/servers?status={status}&name=%5E{self.prefix}&limit=1000"
        while path:
            code, doc = self.api.send("GET", path, None, conn)
            if code != 200:
                raise RuntimeError(f"{self.api.side}: poll: {code} {str(doc)[:300]}")
            ids += [s["id"] for s in doc["servers"]]
            links = [link for link in doc.get("servers_links") or [] if link.get("rel") == "next"]
            href = urllib.parse.urlsplit(links[0]["href"]) if links else None
            path = href.path[href.path.index("/v2.1") + 5 :] + "?" + href.query if href else ""
        return ids

    def _run(self) -> None:
        conn = self.api.connect()
        while not self._stop.is_set():
            statuses = ("ACTIVE", "ERROR") if self.polls % 5 == 0 else ("ACTIVE",)
            began = time.perf_counter()
            try:
                found = {status: self._ids(status, conn) for status in statuses}
            except (OSError, http.client.HTTPException):
                conn = self.api.connect()
                continue
            now = time.perf_counter()
            with self._cond:
                self.polls += 1
                for status, ids in found.items():
                    for server in ids:
                        self.seen.setdefault(server, (now, status))
                self._cond.notify_all()
            # at most a third of one API thread: the observer must not be what slows a side down
            self._stop.wait(max(0.02, 2 * (now - began)))

    def wait(self, servers: list[str], timeout: float) -> dict[str, tuple[float, str]]:
        """When each of ``servers`` was first seen ACTIVE or ERROR (those seen within ``timeout``)."""
        with self._cond:
            self._cond.wait_for(lambda: all(s in self.seen for s in servers), timeout)
            return {s: self.seen[s] for s in servers if s in self.seen}

    def wait_count(self, count: int, timeout: float) -> list[float]:
        """The times at which servers of the prefix were seen, once ``count`` were (or at timeout)."""
        with self._cond:
            self._cond.wait_for(lambda: len(self.seen) >= count, timeout)
            return sorted(t for t, status in self.seen.values() if status == "ACTIVE")


class Parts:
    """CPU seconds per part over a ``with`` block: ``roots`` maps a part's name to the pid at the top
    of its process tree; the name ``*`` splits that tree by each process's role instead (less this
    process, role ``python``). This process, the bench's clients, counts as ``bench clients``."""

    def __init__(self, roots: dict[str, int]) -> None:
        self.trees = {name: TreeCpu(pid) for name, pid in roots.items()}
        self.seconds: dict[str, float] = {}

    def __enter__(self) -> Parts:
        for tree in self.trees.values():
            tree.start()
        self._own = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = {BENCH_CLIENTS: time.process_time() - self._own}
        for name, tree in self.trees.items():
            roles = tree.stop()
            if name == "*":
                roles.pop("python", None)
                self.seconds.update(roles)
            else:
                self.seconds[name] = sum(roles.values())
        self.seconds = dict(sorted(self.seconds.items(), key=lambda kv: -kv[1]))

    def control_plane(self) -> float:
        """CPU seconds of every part but the clients."""
        return sum(v for k, v in self.seconds.items() if k != BENCH_CLIENTS)


BENCH_CLIENTS = "bench clients"


# -- the workloads --------------------------------------------------------------------------------
@dataclasses.dataclass
class Result:
    """What one side measured."""

    side: str
    fifty_seconds: float = float("nan")
    fifty_active: int = 0
    post_p50_ms: float = float("nan")
    storm: list[float] = dataclasses.field(default_factory=list)
    storm_errors: int = 0
    storm_seconds: float = float("nan")
    fill_servers: int = 0
    fill_seconds: float = float("nan")
    listed: int = 0
    list_rates: list[float] = dataclasses.field(default_factory=list)
    first_page_ms: float = float("nan")
    cpu: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    cpu_per_boot: dict[str, float] = dataclasses.field(default_factory=dict)  # control plane, s
    notes: list[str] = dataclasses.field(default_factory=list)


def fifty(api: Compute, count: int, timeout: float) -> tuple[float, int, float]:
    """``count`` POSTs by one client, then wait: (first POST → last ACTIVE s, ACTIVE, POST p50 ms)."""
    conn = api.connect()
    posts: list[float] = []
    with Poller(api, "fifty-") as poller:
        began = time.perf_counter()
        ids = []
        for i in range(count):
            t = time.perf_counter()
            ids.append(api.post_server(f"fifty-{i}", conn)["server"]["id"])
            posts.append(time.perf_counter() - t)
        seen = poller.wait(ids, timeout)
    active = [t for t, status in seen.values() if status == "ACTIVE"]
    last = max(active) if len(active) == count else float("nan")
    return last - began, len(active), 1000 * statistics.median(posts)


def storm(api: Compute, clients: int, per_client: int, timeout: float) -> tuple[list[float], int, float]:
    """``clients`` at once, each booting ``per_client`` servers in turn: (POST→ACTIVE s, errors, wall)."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    start = threading.Barrier(clients + 1)

    def client(c: int, poller: Poller) -> None:
        conn = api.connect()
        start.wait()
        for i in range(per_client):
            began = time.perf_counter()
            try:
                server = api.post_server(f"storm-{c}-{i}", conn)["server"]["id"]
            except (RuntimeError, OSError, http.client.HTTPException):
                with lock:
                    errors[0] += 1
                continue
            outcome = poller.wait([server], timeout).get(server)
            with lock:
                if outcome is not None and outcome[1] == "ACTIVE":
                    latencies.append(outcome[0] - began)
                else:
                    errors[0] += 1

    with Poller(api, "storm-") as poller:
        threads = [threading.Thread(target=client, args=(c, poller)) for c in range(clients)]
        for t in threads:
            t.start()
        start.wait()
        began = time.perf_counter()
        for t in threads:
            t.join()
        wall = time.perf_counter() - began
    return latencies, errors[0], wall


def fill(api: Compute, target: int, per_request: int, timeout: float) -> tuple[int, float]:
    """Multi-create until the project has ``target`` servers: (servers created, seconds to ACTIVE)."""
    conn = api.connect()
    have = api.pages("/servers?limit=1000", "servers", conn)
    missing = max(target - have, 0)
    if not missing:
        return 0, 0.0
    with Poller(api, "fill-") as poller:
        began = time.perf_counter()
        left, n = missing, 0
        while left:
            count = min(per_request, left)
            api.post_server(f"fill-{n}", conn, count)
            left, n = left - count, n + 1
        seen = poller.wait_count(missing, timeout)
    if len(seen) < missing:
        raise RuntimeError(f"{api.side}: only {len(seen)} of {missing} servers ACTIVE after {timeout:.0f} s")
    return missing, seen[-1] - began


# What a server is in Nova's databases, per table: the column that names the server, and columns
# that must be new per copy (besides the serial ``id``). Enough for every list and show.
NOVA_CELL_TABLES: dict[str, tuple[str, dict[str, str]]] = {
    "instances": ("uuid", {"display_name": "'fill-' || c.n", "hostname": "'fill-' || c.n",
                           "created_at": "now() AT TIME ZONE 'UTC'"}),
    "instance_extra": ("instance_uuid", {}),
    "instance_info_caches": ("instance_uuid", {}),
    "instance_system_metadata": ("instance_uuid", {}),
    "block_device_mapping": ("instance_uuid", {"uuid": "gen_random_uuid()::text"}),
    "instance_actions": ("instance_uuid", {}),
}  # fmt: skip
NOVA_API_TABLES: dict[str, tuple[str, dict[str, str]]] = {
    "instance_mappings": ("instance_uuid", {}),
    "request_specs": ("instance_uuid", {}),
}


def clone_servers(
    url: str, tables: dict[str, tuple[str, dict[str, str]]], template: str, new: list[str]
) -> None:
    """Copy server ``template``'s rows in each of ``tables`` once per uuid in ``new``."""
    import psycopg

    with psycopg.connect(url, autocommit=False) as conn:
        conn.execute("CREATE TEMP TABLE clones (n int, uuid varchar(36)) ON COMMIT DROP")
        with conn.cursor().copy("COPY clones (n, uuid) FROM STDIN") as copy:
            for n, server in enumerate(new):
                copy.write_row((n, server))
        for table, (key, fresh) in tables.items():
            columns = [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' "
                    "AND table_name = %s AND column_name <> 'id' ORDER BY ordinal_position",
                    (table,),
                )
            ]
            values = [("c.uuid" if col == key else fresh.get(col, f"t.{col}")) for col in columns]
            conn.execute(
                f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(values)} "
                f"FROM {table} t CROSS JOIN clones c WHERE t.{key} = %s",
                (template,),
            )
        conn.commit()


def fill_by_copy(api: Compute, target: int) -> tuple[int, float]:
    """Nova: the project filled to ``target`` servers by copying, in SQL, the rows of one server
    Nova built (instance, extra, info cache, system metadata, block device, action; its mapping
    and request spec). The same rows a boot writes, without the boots' time."""
    import uuid

    conn = api.connect()
    have = api.pages("/servers?limit=1000", "servers", conn)
    missing = max(target - have, 0)
    status, doc = api.send("GET", "/servers/detail?status=ACTIVE&limit=1", None, conn)
    assert status == 200 and doc["servers"], doc
    template = doc["servers"][0]["id"]
    new = [str(uuid.uuid4()) for _ in range(missing)]
    pg = os.environ.get("NOVA_BENCH_PG", "postgresql://postgres@127.0.0.1:5432")
    began = time.perf_counter()
    clone_servers(f"{pg}/nova", NOVA_CELL_TABLES, template, new)
    clone_servers(f"{pg}/nova_api", NOVA_API_TABLES, template, new)
    return missing, time.perf_counter() - began


def run_workloads(api: Compute, args: argparse.Namespace, cpu_roots: Callable[[], dict[str, int]]) -> Result:
    res = Result(api.side)
    timeout = args.timeout
    conn = api.connect()
    warm = [api.post_server(f"warm-{i}", conn)["server"]["id"] for i in range(3)]
    with Poller(api, "warm-") as poller:
        outcome = poller.wait(warm, timeout)
    if sorted(s for _, s in outcome.values()) != ["ACTIVE"] * 3:
        raise RuntimeError(f"{api.side}: the warm-up boots did not all become ACTIVE: {outcome}")

    print(f"[{api.side}] {args.servers} servers to ACTIVE (load {loadavg()})", flush=True)
    with Parts(cpu_roots()) as cpu:
        res.fifty_seconds, res.fifty_active, res.post_p50_ms = fifty(api, args.servers, timeout)
    res.cpu["fifty"] = cpu.seconds
    res.cpu_per_boot["fifty"] = cpu.control_plane() / max(res.fifty_active, 1)
    print(f"  {res.fifty_active} ACTIVE, first POST → last ACTIVE {res.fifty_seconds:.2f} s", flush=True)

    print(f"[{api.side}] boot storm: {args.storm_clients} clients x {args.storm_boots} (load {loadavg()})")
    with Parts(cpu_roots()) as cpu:
        res.storm, res.storm_errors, res.storm_seconds = storm(
            api, args.storm_clients, args.storm_boots, timeout
        )
    res.cpu["storm"] = cpu.seconds
    res.cpu_per_boot["storm"] = cpu.control_plane() / max(len(res.storm), 1)
    print(
        f"  {len(res.storm)} ACTIVE, {res.storm_errors} errors in {res.storm_seconds:.1f} s; "
        f"p50 {1000 * percentile(res.storm, 0.5):.0f} ms, p99 {1000 * percentile(res.storm, 0.99):.0f} ms",
        flush=True,
    )

    by_copy = api.side == "nova" and args.nova_fill == "copy"
    print(
        f"[{api.side}] filling to {args.list} servers, {'by copy' if by_copy else 'API'} (load {loadavg()})"
    )
    if by_copy:
        res.fill_servers, res.fill_seconds = fill_by_copy(api, args.list)
        res.notes.append(f"the list's {res.fill_servers} other servers were copied in SQL (--nova-fill copy)")
        print(f"  {res.fill_servers} servers copied in {res.fill_seconds:.1f} s", flush=True)
        res.fill_servers = 0  # no fill rate to compare
    else:
        res.fill_servers, res.fill_seconds = fill(api, args.list, args.fill_per_request, args.fill_timeout)
        print(f"  {res.fill_servers} servers ACTIVE in {res.fill_seconds:.1f} s", flush=True)

    detail = "/servers/detail?limit=100"
    res.listed = api.pages(detail, "servers", conn)
    if res.listed != args.list:
        res.notes.append(f"listed {res.listed} servers, not {args.list}")
    with Parts(cpu_roots()) as cpu:
        for r in range(args.list_rounds):
            began = time.perf_counter()
            n = api.pages(detail, "servers", conn)
            res.list_rates.append(n / (time.perf_counter() - began))
            print(f"  list round {r + 1}: {n} servers, {res.list_rates[-1]:,.0f}/s (load {loadavg()})")
    res.cpu["list"] = cpu.seconds
    firsts = []
    for _ in range(args.first_pages):
        began = time.perf_counter()
        api.pages(detail, "servers", conn, first_only=True)
        firsts.append(time.perf_counter() - began)
    res.first_page_ms = 1000 * statistics.median(firsts)
    print(f"  first page p50 {res.first_page_ms:.1f} ms", flush=True)
    return res


# -- the two sides --------------------------------------------------------------------------------
def setup(action: str) -> None:
    subprocess.run(["bash", str(SETUP), action], check=True, cwd=ROOT)


def nova_parts() -> dict[str, int]:
    """The processes ``setup.sh start`` recorded, and RabbitMQ's server."""
    parts: dict[str, int] = {}
    for line in (NOVA_RUN / "pids").read_text().splitlines():
        if line.strip():
            pid, name = line.split()
            parts[f"nova {name}" if name in ("api", "conductor", "scheduler", "compute") else name] = int(pid)
    beam = subprocess.run(["pgrep", "-x", "beam.smp"], capture_output=True, text=True, check=False)
    for pid in beam.stdout.split():
        parts["rabbitmq-server"] = int(pid)
    return parts


def nova_versions() -> dict[str, str]:
    script = (
        "import importlib.metadata as m, platform\n"
        "print(platform.python_version(), *(m.version(d) for d in "
        "('nova', 'openstack-placement', 'oslo.messaging', 'SQLAlchemy', 'gunicorn')))"
    )
    out = subprocess.run([str(NOVA_VENV / "bin" / "python"), "-c", script], capture_output=True, text=True)
    names = ["nova venv python", "nova", "openstack-placement", "oslo.messaging", "SQLAlchemy", "gunicorn"]
    rabbit = subprocess.run(["rabbitmqctl", "-q", "version"], capture_output=True, text=True, check=False)
    return {**dict(zip(names, out.stdout.split(), strict=False)), "rabbitmq-server": rabbit.stdout.strip()}


def run_nova(args: argparse.Namespace) -> Result:
    if not (NOVA_VENV / "bin" / "nova-manage").exists():
        setup("install")
    try:
        setup("start")  # a start that fails half way is stopped too
        api = Compute("nova", int(os.environ.get("NOVA_API_PORT", "18774")), "admin")  # the stub: any token
        status, doc = api.send(
            "POST", "/flavors", {"flavor": {"name": "b.tiny", "ram": 256, "vcpus": 1, "disk": 1}}
        )
        assert status == 200, doc
        api.flavor, api.image = doc["flavor"]["id"], IMAGE_ID
        unlimited = {"quota_set": {"instances": -1, "cores": -1, "ram": -1}}
        status, doc = api.send("PUT", f"/os-quota-sets/{PROJECT_ID}", unlimited)
        assert status == 200, doc
        return run_workloads(api, args, nova_parts)
    finally:
        setup("stop")


@contextlib.contextmanager
def stratus(args: argparse.Namespace) -> Iterator[tuple[Compute, int]]:
    simulate = ["simulate", "--hosts", str(args.hosts), "--vcpus", "512", "--memory-mb", str(2**21),
                "--disk-gb", "100000", "--threads", "8"]  # fmt: skip
    with (
        tempfile.TemporaryDirectory(prefix="stratus-bench-nova-") as d,
        control_plane(
            "bench_side",
            Path(d),
            [["scheduler"], simulate],
            api_workers=args.api_workers,
            api_threads=args.api_threads,
        ) as cloud,
    ):
        api = Compute("stratus", cloud.port, cloud.token)
        status, doc = api.send(
            "POST", "/flavors", {"flavor": {"name": "b.tiny", "ram": 256, "vcpus": 1, "disk": 1}}
        )
        assert status == 200, doc
        api.flavor = doc["flavor"]["id"]
        cloud.wait_for_hosts(args.hosts)
        yield api, cloud.nats_pid


def run_stratus(args: argparse.Namespace) -> Result:
    with stratus(args) as (api, _nats_pid):
        return run_workloads(api, args, lambda: {"*": os.getpid()})  # nats-server is a child too


# -- the report -----------------------------------------------------------------------------------
def _ratio(a: float, b: float) -> str:
    if not b or a != a or b != b:  # nan: not measured on one side
        return "-"
    q = a / b
    return f"{q:.2g}" if q < 0.1 else f"{q:.2f}"


def _value(x: float) -> str:
    return "-" if x != x else f"{x:,.1f}"


def table(stratus_res: Result, nova_res: Result) -> str:
    s, n = stratus_res, nova_res

    def p(xs: list[float], q: float) -> float:
        return 1000 * percentile(xs, q)

    def rate(done: int, seconds: float) -> float:
        return done / seconds if done and seconds else float("nan")

    def med(xs: list[float]) -> float:
        return statistics.median(xs) if xs else float("nan")

    listed, nan = s.listed or n.listed, float("nan")
    rows: list[tuple[str, float, float, str]] = [
        (f"{s.fifty_active or n.fifty_active} servers to ACTIVE: first POST → last ACTIVE, s",
         s.fifty_seconds, n.fifty_seconds, "lower"),
        ("  POST /servers p50 (one client), ms", s.post_p50_ms, n.post_p50_ms, "lower"),
        ("boot storm: POST → ACTIVE p50, ms", p(s.storm, 0.5), p(n.storm, 0.5), "lower"),
        ("boot storm: POST → ACTIVE p99, ms", p(s.storm, 0.99), p(n.storm, 0.99), "lower"),
        ("boot storm: wall, s", s.storm_seconds, n.storm_seconds, "lower"),
        ("control-plane CPU per boot, one client, ms", 1000 * s.cpu_per_boot.get("fifty", nan),
         1000 * n.cpu_per_boot.get("fifty", nan), "lower"),
        ("control-plane CPU per boot, storm, ms", 1000 * s.cpu_per_boot.get("storm", nan),
         1000 * n.cpu_per_boot.get("storm", nan), "lower"),
        (f"fill to {listed} (multi-create): servers ACTIVE per s",
         rate(s.fill_servers, s.fill_seconds), rate(n.fill_servers, n.fill_seconds), "higher"),
        (f"GET /servers/detail?limit=100, every page of {listed}: servers/s (median)",
         med(s.list_rates), med(n.list_rates), "higher"),
        ("GET /servers/detail?limit=100, first page: p50 ms", s.first_page_ms, n.first_page_ms, "lower"),
    ]  # fmt: skip
    lines = [
        "| workload | Stratus | Nova | Stratus / Nova | better |",
        "|---|---:|---:|---:|---|",
    ]
    for name, a, b, better in rows:
        lines.append(f"| {name} | {_value(a)} | {_value(b)} | {_ratio(a, b)} | {better} |")
    lines.append("")
    lines.append(
        f"boot storm: Stratus {len(s.storm)} ACTIVE, {s.storm_errors} errors; "
        f"Nova {len(n.storm)} ACTIVE, {n.storm_errors} errors"
    )
    for res in (s, n):
        for workload, seconds in res.cpu.items():
            parts = ", ".join(f"{role} {v:.1f}" for role, v in seconds.items() if v >= 0.05)
            lines.append(f"CPU s, {res.side}, {workload}: {parts}; all {sum(seconds.values()):.1f}")
        for note in res.notes:
            lines.append(f"note, {res.side}: {note}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.bench_nova_side_by_side", description=__doc__
    )
    parser.add_argument("--servers", type=int, default=50, help="servers POSTed by one client")
    parser.add_argument("--storm-clients", type=int, default=50)
    parser.add_argument("--storm-boots", type=int, default=1, help="boots per storm client, in turn")
    parser.add_argument("--list", type=int, default=1000, help="servers in the listed project")
    parser.add_argument("--list-rounds", type=int, default=5)
    parser.add_argument("--first-pages", type=int, default=20)
    parser.add_argument("--fill-per-request", type=int, default=50, help="min_count = max_count of a fill")
    parser.add_argument("--hosts", type=int, default=20, help="Stratus's simulated hosts (one process)")
    parser.add_argument("--api-workers", type=int, default=2, help="gunicorn workers, both APIs")
    parser.add_argument("--api-threads", type=int, default=8, help="threads per worker, both APIs")
    parser.add_argument("--timeout", type=float, default=600, help="seconds a boot may take")
    parser.add_argument("--fill-timeout", type=float, default=1800)
    parser.add_argument("--sides", default="nova,stratus")
    parser.add_argument(
        "--nova-fill",
        choices=("copy", "api"),
        default="copy",
        help="how Nova's project gets to --list servers: copies of a built server's rows (default; "
        "booting 850 more takes most of an hour on a busy 2-core machine), or boots through its API",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("NOVA_API_WORKERS", str(args.api_workers))
    os.environ.setdefault("NOVA_API_THREADS", str(args.api_threads))
    sides = args.sides.split(",")

    extra = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    if "nova" in sides and (NOVA_VENV / "bin" / "python").exists():
        extra.update(nova_versions())
    print("\n".join(machine_lines(extra)), flush=True)
    results = {"nova": Result("nova"), "stratus": Result("stratus")}
    for side in sides:
        results[side] = run_nova(args) if side == "nova" else run_stratus(args)
    print(f"load average at end: {loadavg()}")
    print()
    print(table(results["stratus"], results["nova"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
