"""A rebuild's replay, its three threads timed in place: how long each is busy, and its CPU.

A replay (``Projector._replay``, as ``projections.rebuild`` runs it: a fresh schema, the log read
below nats-py, the collector frozen) with its three parts wrapped, per event: ``fetch`` (the reader
thread: a batch read and decoded), ``_in_memory`` (the applier: the batch applied to the carried
rows) and ``_write_batch`` (the writer: COPY, the upserts, the commit); for each, the wall it is
busy and its thread's CPU; and the whole replay's wall and process CPU. Under one GIL the replay
is as slow as its threads' CPU together when one of them (the reader) is busy all along: then each
thread's CPU counts into the wall, whichever thread it is in.

    python -m tests.bench.cpu_replay_threads [--events 20000] [--rounds 3] [--batch-size 2000]
"""

from __future__ import annotations

import argparse
import collections
import functools
import time
from collections.abc import Callable
from typing import Any

import psycopg

from projections.projector import Projector
from projections.rawlog import replay_log
from stratus import collector
from tests.bench.bench_rebuild import LogBuilder, bench_stores, build_log, fresh_schema
from tests.bench.harness import loadavg

SCHEMA = "rm_cpu_threads"
PARTS = ("fetch", "_in_memory", "_write_batch")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.cpu_replay_threads", description=__doc__)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=2000)
    args = parser.parse_args(argv)
    with bench_stores("cpu_threads") as stores:
        recorder, app, db_url = stores.recorder, stores.app, stores.db_url
        build_log(LogBuilder(recorder, app.mapper), args.events)
        with psycopg.connect(db_url, autocommit=True) as conn, collector.frozen():
            conn.execute("SET synchronous_commit = off")  # as a rebuild's replay commits
            for r in range(args.rounds):
                fresh_schema(conn, SCHEMA, indexes=False)
                with replay_log(recorder) as source:
                    projector = Projector(
                        source, app.mapper, conn, schema=SCHEMA, batch_size=args.batch_size, lock=False,
                        fresh=True,
                    )  # fmt: skip
                    busy: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
                    for part in PARTS:
                        setattr(projector, part, _timed(busy[part], getattr(projector, part)))
                    cpu, start = time.process_time(), time.monotonic()
                    events = projector.catch_up()
                    wall, cpu = time.monotonic() - start, time.process_time() - cpu
                per = 1e6 / max(events, 1)
                print(
                    f"round {r + 1} (load {loadavg()}): {events} events; per event, us: "
                    f"wall {wall * per:.1f}, "
                    f"process CPU {cpu * per:.1f}; busy wall / thread CPU: "
                    + ", ".join(
                        f"{part} {busy[part][0] * per:.1f} / {busy[part][1] * per:.1f}" for part in PARTS
                    )
                )
    return 0


def _timed(into: list[float], fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, adding to ``into`` the wall and the thread CPU of each call."""

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.monotonic(), time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            into[0] += time.monotonic() - wall
            into[1] += time.thread_time() - cpu

    return timed


if __name__ == "__main__":
    raise SystemExit(main())
