"""``STRATUS_MEMORY_TRACE_DIR``: a part traces its allocations and writes a snapshot on SIGUSR2, and two
snapshots compare by allocation site; unset, nothing is traced (processes/memtrace.py). Each case runs
in a process of its own: tracing and the signal handler are process-wide."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from processes.memtrace import compare

ROOT = Path(__file__).resolve().parents[2]


def run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_snapshot_on_each_sigusr2_and_their_difference(tmp_path: Path) -> None:
    run(f"""
        import os, signal, tracemalloc
        from pathlib import Path
        from processes import memtrace
        assert memtrace.install(Path({str(tmp_path)!r}), "part")
        os.kill(os.getpid(), signal.SIGUSR2)
        kept = [bytearray(1024) for _ in range(2000)]  # ~2 MiB that stays
        os.kill(os.getpid(), signal.SIGUSR2)
    """)
    first, second = sorted(tmp_path.glob("part-*.tracemalloc"), key=lambda p: p.name)
    assert first.name.endswith("-0.tracemalloc") and second.name.endswith("-1.tracemalloc")
    report = compare(first, second, top=3)
    assert '"<string>", line 7' in report.splitlines()[2]  # the site that grew most: kept = ...
    grown = float(report.splitlines()[0].split("(")[1].rstrip(")"))
    assert grown > 1.5  # MiB


def test_unset_traces_nothing() -> None:
    out = run("""
        import signal, tracemalloc
        from processes import memtrace
        print(memtrace.install(None, "part"), tracemalloc.is_tracing(),
              signal.getsignal(signal.SIGUSR2) == signal.SIG_DFL)
    """)
    assert out.split() == ["False", "False", "True"]
