"""CPU per event of a rebuild read through nats-py and below it (``projections.rawlog``), alternated.

Per round and per way (``rebuild(raw_read=False)``, then ``raw_read=True``, the order swapped every
other round): the read stage alone (``Projector.fetch`` over the whole log: read and decode, this
thread's CPU), then the whole ``projections.rebuild.rebuild`` (this process's CPU, all threads; its
PostgreSQL backend's; nats-server's; the wall time), each per event. The load moves CPU much less
than wall time. ``--profile``: a cProfile of each stage (read, and the apply thread of a catch-up
into a fresh schema, whose reader thread cProfile does not see), the top functions by own time.
At the end, the read below nats-py in its steps, this thread's CPU per event, three passes.

    python -m tests.bench.cpu_rebuild_read [--events 8000] [--rounds 3] [--batch-size 2000] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from collections.abc import Callable
from functools import partial

import psycopg

from projections.projector import Projector
from projections.rawlog import StoredMessage, replay_log
from projections.rebuild import rebuild
from stratus.audit.rawreader import RawReader
from tests.bench.bench_rebuild import (
    LogBuilder,
    backend_pid,
    bench_stores,
    build_log,
    fetch_all,
    fresh_schema,
)
from tests.bench.harness import _TICKS, _process_ticks, loadavg

SCHEMA = "rm_cpu_read"
WAYS = {False: "nats-py", True: "raw"}


def profiled(what: str, fn: Callable[[], object], top: int = 18) -> None:
    """A cProfile of ``fn()``: its ``top`` functions by own time (also ``cpu_rebuild_stages``')."""
    profile = cProfile.Profile()
    profile.runcall(fn)
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(top)
    print(f"--- cProfile: {what}\n" + "\n".join(out.getvalue().splitlines()[4:]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.cpu_rebuild_read", description=__doc__)
    parser.add_argument("--events", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=2000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    with bench_stores("cpu_read") as stores:
        settings, recorder, app, db_url, server = (
            stores.settings,
            stores.recorder,
            stores.app,
            stores.db_url,
            stores.server,
        )
        build_log(LogBuilder(recorder, app.mapper), args.events)
        total = recorder.max_notification_id() or 0
        with psycopg.connect(db_url, autocommit=True) as conn:
            pid = backend_pid(conn) or 0

            def read_stage(raw: bool) -> float:
                with replay_log(recorder, raw=raw) as log:
                    projector = Projector(log, app.mapper, conn, schema=SCHEMA, batch_size=args.batch_size)
                    cpu = time.thread_time()
                    assert fetch_all(projector) == total
                    return 1e6 * (time.thread_time() - cpu) / total

            def whole(raw: bool) -> list[float]:
                ticks = _process_ticks(pid) or 0, _process_ticks(server.pid or 0) or 0
                cpu, wall = time.process_time(), time.perf_counter()
                assert (
                    rebuild(conn, recorder, app.mapper, batch_size=args.batch_size, raw_read=raw).position
                    == total
                )
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                backend = ((_process_ticks(pid) or 0) - ticks[0]) / _TICKS
                nats = ((_process_ticks(server.pid or 0) or 0) - ticks[1]) / _TICKS
                return [1e6 * x / total for x in (cpu, backend, nats, wall)]

            print(
                f"{total} events, batches of {args.batch_size}; per event, us: read stage (read and "
                "decode, thread CPU) | rebuild: this process's CPU (all threads) / its PostgreSQL "
                "backend's / nats-server's / wall"
            )
            for r in range(args.rounds):
                line = []
                for raw in (False, True) if r % 2 == 0 else (True, False):
                    read = read_stage(raw)
                    us = whole(raw)
                    line.append(f"{WAYS[raw]} {read:.1f} | " + " / ".join(f"{x:.1f}" for x in us))
                print(f"round {r + 1} (load {loadavg()}): " + "; ".join(line))
            for _ in range(3):
                steps = []
                with RawReader(settings.nats_urls, settings.stream) as raw_reader:
                    cpu = time.thread_time()
                    frames = list(raw_reader.frames(recorder.layout.all))
                    steps.append(("RawReader.frames", time.thread_time() - cpu))
                cpu = time.thread_time()
                msgs = [StoredMessage(block, body) for block, body in frames]
                steps.append(("StoredMessage", time.thread_time() - cpu))
                cpu = time.thread_time()
                notes = [m.notification() for m in msgs]
                steps.append(("StoredMessage.notification (5 headers found)", time.thread_time() - cpu))
                cpu = time.thread_time()
                for note in notes:
                    app.mapper.to_domain_event(note)
                steps.append(("mapper.to_domain_event", time.thread_time() - cpu))
                print(
                    "read steps, us per event: " + "; ".join(f"{n} {1e6 * t / total:.1f}" for n, t in steps)
                )
            if args.profile:
                for raw in (False, True):
                    with replay_log(recorder, raw=raw) as log:
                        fetcher = Projector(log, app.mapper, conn, schema=SCHEMA, batch_size=args.batch_size)
                        profiled(f"read stage, {WAYS[raw]} (Projector.fetch)", partial(fetch_all, fetcher))
                with replay_log(recorder) as log:
                    fresh_schema(conn, SCHEMA)
                    applier = Projector(
                        log,
                        app.mapper,
                        conn,
                        schema=SCHEMA,
                        batch_size=args.batch_size,
                        lock=False,
                        fresh=True,
                    )
                    profiled("apply thread of a fresh catch-up (raw)", applier.catch_up)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
