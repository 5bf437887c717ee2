"""What every benchmark shares: the machine it ran on, CPU meters, rounds, and the printed tables.

The machines are small and noisy (2 cores, other load). A benchmark therefore never reports a bare
time: it runs every path several times in interleaved rounds (floor, ours, floor, ours, ...) and
reports each path's ratio to its floor *within the same round*, then the median over rounds. CPU
meters (this process, the server process, the whole machine) tell which side limits a path.
"""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from processes.api import API_APP, api_argv, metrics_dir
from stratus.config import MULTIPROC_DIR_ENV, Settings
from stratus.natsserver import NatsServer, binary
from tests.fixtures.processes import serving

_TICKS = os.sysconf("SC_CLK_TCK")


# -- the machine --------------------------------------------------------------------------------
def _cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def _mem_gib() -> float:
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    return 0.0


def loadavg() -> str:
    with contextlib.suppress(OSError), open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])
    return "?"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "-"


def nats_server_version() -> str:
    out = subprocess.run([str(binary()), "--version"], capture_output=True, text=True, check=False)
    return out.stdout.strip().removeprefix("nats-server: ") or "?"


def machine_lines(extra: dict[str, str] | None = None) -> list[str]:
    """The machine and software, one ``key: value`` per line (printed before the tables)."""
    info = {
        "cpu": f"{_cpu_model()}, {os.cpu_count()} cores (nproc {len(os.sched_getaffinity(0))})",
        "memory": f"{_mem_gib():.1f} GiB",
        "kernel": platform.release(),
        "load average at start": loadavg(),
        "python": platform.python_version(),
        "nats-server": nats_server_version(),
        "nats-py": _version("nats-py"),
        "eventsourcing": _version("eventsourcing"),
        "psycopg": _version("psycopg"),
        **(extra or {}),
    }
    return [f"{k}: {v}" for k, v in info.items()]


# -- CPU meters ---------------------------------------------------------------------------------
def _machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies over all CPUs since boot."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    total = sum(fields[:8])  # guest time is already counted in user
    return total - idle, total


def _process_ticks(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime (fields 14 and 15 of the whole line)


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            continue
    return out


def _role(pid: int) -> str:
    """A process's part in the control plane, from its command line."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode() for a in f.read().split(b"\0") if a]
    except OSError:
        return "?"
    if "processes.cli" in argv:
        rest = argv[argv.index("processes.cli") + 1 :]
        return f"stratus {rest[0]}" if rest else "stratus"
    if any("gunicorn" in a for a in argv):
        return "API (gunicorn)"
    return os.path.basename(argv[0]) if argv else "?"


class TreeCpu:
    """CPU seconds per role of every process under ``roots`` (and the roots), over a ``with`` block:
    which part of a multi-process control plane the work costs."""

    def __init__(self, *roots: int) -> None:
        self.roots = roots
        self.seconds: dict[str, float] = {}

    def _snapshot(self) -> dict[int, tuple[str, int]]:
        snap = {}
        for root in self.roots:
            for pid in _descendants(root):
                ticks = _process_ticks(pid)
                if ticks is not None:
                    snap[pid] = (_role(pid), ticks)
        return snap

    def start(self) -> TreeCpu:
        self._before = self._snapshot()
        return self

    def stop(self) -> dict[str, float]:
        """CPU seconds per role since ``start`` (a process started since counts from zero)."""
        after = self._snapshot()
        totals: dict[str, float] = {}
        for pid, (role, ticks) in after.items():
            base = self._before.get(pid, (role, 0))[1]
            totals[role] = totals.get(role, 0.0) + (ticks - base) / _TICKS
        self.seconds = dict(sorted(totals.items(), key=lambda kv: -kv[1]))
        return self.seconds

    def __enter__(self) -> TreeCpu:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class CpuUse:
    """CPU used during a measurement, in % of one core (200 % = both cores of a 2-core machine)."""

    client: float
    server: float | None
    machine: float

    def render(self) -> str:
        server = "-" if self.server is None else f"{self.server:.0f}"
        return f"{self.client:.0f} / {server} / {self.machine:.0f}"


class CpuMeter:
    """Measures this process, one server process (by pid, if readable) and the whole machine."""

    def __init__(self, server_pid: int | None = None) -> None:
        self.server_pid = server_pid

    @contextlib.contextmanager
    def measure(self) -> Iterator[list[CpuUse]]:
        out: list[CpuUse] = []
        busy0, total0 = _machine_ticks()
        wall0, ours0 = time.perf_counter(), time.process_time()
        server0 = _process_ticks(self.server_pid) if self.server_pid else None
        yield out
        wall = max(time.perf_counter() - wall0, 1e-9)
        ours = time.process_time() - ours0
        busy1, total1 = _machine_ticks()
        cores = os.cpu_count() or 1
        machine = 100.0 * cores * (busy1 - busy0) / max(total1 - total0, 1)
        server: float | None = None
        if server0 is not None and self.server_pid:
            server1 = _process_ticks(self.server_pid)
            if server1 is not None:
                server = 100.0 * (server1 - server0) / _TICKS / wall
        out.append(CpuUse(100.0 * ours / wall, server, machine))


# -- rounds and results -------------------------------------------------------------------------
@dataclass
class Sample:
    count: int  # units done (events, rows, appends)
    seconds: float
    cpu: CpuUse

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else float("inf")


@dataclass
class Measured:
    """One measured path: its samples, one per round."""

    name: str
    unit: str
    floor: str | None = None  # the name of the path it is compared with (None: it is a floor)
    samples: list[Sample] = field(default_factory=list)

    def median_rate(self) -> float:
        return statistics.median(s.rate for s in self.samples)


class Bench:
    """Paths measured in interleaved rounds; ratios are taken within a round, then the median."""

    def __init__(self, meter: CpuMeter) -> None:
        self.meter = meter
        self.paths: dict[str, Measured] = {}

    def path(self, name: str, unit: str, floor: str | None = None) -> Measured:
        if name not in self.paths:
            self.paths[name] = Measured(name, unit, floor)
        return self.paths[name]

    def measure(self, name: str, unit: str, fn: Callable[[], int], *, floor: str | None = None) -> Sample:
        """Time ``fn`` (which returns how many units it did) and record it under ``name``."""
        with self.meter.measure() as cpu:
            started = time.perf_counter()
            count = fn()
            seconds = time.perf_counter() - started
        sample = Sample(count, seconds, cpu[0])
        self.path(name, unit, floor).samples.append(sample)
        print(f"  {name}: {count} {unit} in {seconds:.2f} s = {sample.rate:,.0f}/s  (cpu {cpu[0].render()})")
        return sample

    def ratio(self, name: str, floor: str | None = None) -> float | None:
        """Median over rounds of rate(name) / rate(floor) in the same round."""
        p = self.paths[name]
        f = self.paths.get(floor or p.floor or "")
        if f is None:
            return None
        pairs = zip(p.samples, f.samples, strict=False)
        return statistics.median(a.rate / b.rate for a, b in pairs)

    def table(self, title: str, *, baselines: Sequence[tuple[str, str]] = ()) -> str:
        """A markdown table: median rate, ratio to the path's floor and to each of ``baselines``
        ((column label, path name)), the rates of every round, and the CPU use of the median round."""
        with_floor = any(p.floor for p in self.paths.values())
        head, rule = "| path | unit | median rate /s |", "|---|---|---:|"
        if with_floor:
            head, rule = head + " ratio to its floor | floor |", rule + "---:|---|"
        for label, _ in baselines:
            head, rule = head + f" ratio to {label} |", rule + "---:|"
        lines = [
            f"### {title}",
            "",
            head + " rates per round /s | CPU % this process / server / machine |",
            rule + "---|---|",
        ]
        for p in self.paths.values():
            row = f"| {p.name} | {p.unit} | {p.median_rate():,.0f} |"
            if with_floor:
                r = self.ratio(p.name) if p.floor else None
                row += f" {_fmt(r) if p.floor else 'floor'} | {p.floor or ''} |"
            for _, name in baselines:
                row += f" {_fmt(self.ratio(p.name, name))} |"
            rates = ", ".join(f"{s.rate:,.0f}" for s in p.samples)
            mid = sorted(p.samples, key=lambda s: s.rate)[len(p.samples) // 2]
            lines.append(f"{row} {rates} | {mid.cpu.render()} |")
        return "\n".join(lines)


def _fmt(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}"


# -- servers ------------------------------------------------------------------------------------
@contextlib.contextmanager
def nats_server() -> Iterator[NatsServer]:
    """The project's pinned nats-server on a free port, with a temporary store (never port 4222)."""
    with tempfile.TemporaryDirectory(prefix="stratus-bench-nats-") as d:
        server = NatsServer(store_dir=Path(d) / "store")
        server.start()
        try:
            yield server
        finally:
            server.close()


@contextlib.contextmanager
def deployed_api(settings: Settings, log_path: Path, app: str = API_APP) -> Iterator[subprocess.Popen[bytes]]:
    """``app`` served as ``stratus api`` serves the API (``processes.api.api_argv``: gunicorn's
    threaded workers with keep-alive, the settings' workers and threads, metrics in multiprocess
    mode) at ``settings.api_bind``, until the block ends."""
    port = int(settings.api_bind.rpartition(":")[2])
    env = {MULTIPROC_DIR_ENV: str(metrics_dir(settings))}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with serving(api_argv(settings, app), settings, port, log_path) as proc:
            yield proc
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def median(xs: list[float]) -> float:
    return statistics.median(xs)
