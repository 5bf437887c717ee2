"""Where a process's memory goes: tracemalloc snapshots on demand, off unless asked for.

With ``STRATUS_MEMORY_TRACE_DIR`` set, a part (an API worker, the projector, the scheduler, a
hypervisor worker) starts ``tracemalloc`` when it starts and, on each SIGUSR2, writes a snapshot of
its live Python allocations to ``<dir>/<role>-<pid>-<n>.tracemalloc`` (docs/operations.md,
"Memory"). Two snapshots compare with ``python -m processes.memtrace OLD NEW``: the allocation
sites that grew most, grouped by traceback. Tracing costs CPU and memory: for a diagnosis only.
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import sys
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

FRAMES = 12  # frames kept per allocation: enough to tell the caller of a library's allocation


def install(trace_dir: Path | None, role: str) -> bool:
    """Trace this process's allocations and snapshot them on SIGUSR2 into ``trace_dir`` (None: do
    nothing); called on the main thread after the process has set its own signal handlers."""
    if trace_dir is None:
        return False
    trace_dir.mkdir(parents=True, exist_ok=True)
    tracemalloc.start(FRAMES)
    counter = itertools.count()

    def dump(_signum: int, _frame: FrameType | None) -> None:
        path = trace_dir / f"{role}-{os.getpid()}-{next(counter)}.tracemalloc"
        tracemalloc.take_snapshot().dump(str(path))

    signal.signal(signal.SIGUSR2, dump)
    return True


def compare(old: Path, new: Path, top: int = 25, depth: int = 6) -> str:
    """The ``top`` allocation sites (tracebacks cut to ``depth`` frames) that grew most from ``old``
    to ``new``, and the traced totals."""
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen *>")]
    a = tracemalloc.Snapshot.load(str(old)).filter_traces(ignore)
    b = tracemalloc.Snapshot.load(str(new)).filter_traces(ignore)
    total_a = sum(s.size for s in a.statistics("filename"))
    total_b = sum(s.size for s in b.statistics("filename"))
    lines = [
        f"traced: {total_a / 2**20:.2f} MiB -> {total_b / 2**20:.2f} MiB ({(total_b - total_a) / 2**20:+.2f})"
    ]
    for stat in b.compare_to(a, "traceback")[:top]:
        lines.append(
            f"{stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks (now {stat.size / 1024:.1f} KiB)"
        )
        lines.extend(f"      {line}" for line in stat.traceback.format(limit=depth, most_recent_first=True))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m processes.memtrace", description=__doc__)
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--depth", type=int, default=6, help="frames shown per site")
    args = parser.parse_args(argv)
    print(compare(args.old, args.new, args.top, args.depth))
    return 0


if __name__ == "__main__":
    sys.exit(main())
