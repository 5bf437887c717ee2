"""Does overlapping the read with the apply pay, and how: a rebuild's replay three ways, alternated.

All three read below nats-py (``projections.rawlog``) into a fresh schema, in batches of 2,000:

- ``serial``: read and decode a batch, then apply it (``Projector.step`` in a loop);
- ``thread``: what ``projections.rebuild`` does (``Projector.catch_up``): a reader thread reads and
  decodes the next batch while this one is applied (the socket waits release the GIL, the parsing
  and decoding do not);
- ``process``: an experiment, not product code: a forked process reads and decodes, and sends each
  decoded batch (pickled) through a pipe; this process unpickles and applies. No trust checks, no
  quarantine, no error handling: only what it would cost and save.

Per event and per round: wall, CPU of this process and of the reader process, of the PostgreSQL
backend, of nats-server.

    python -m tests.bench.overlap_rebuild_read [--events 8000] [--rounds 3] [--batch-size 2000]
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from multiprocessing.connection import Connection
from typing import Any

import psycopg

from projections.projector import Projector
from projections.rawlog import replay_log
from stratus.eventstore import JetStreamApplicationRecorder
from tests.bench.bench_rebuild import LogBuilder, backend_pid, bench_stores, build_log, fresh_schema
from tests.bench.harness import _TICKS, _process_ticks, loadavg

SCHEMA = "rm_overlap"


def _reader(
    out: Connection, recorder: JetStreamApplicationRecorder, mapper: Any, db_url: str, size: int
) -> None:
    """The reader process: read and decode batches from the start, send each one, then its CPU."""
    with psycopg.connect(db_url, autocommit=True) as conn, replay_log(recorder) as log:
        projector = Projector(log, mapper, conn, schema=SCHEMA, batch_size=size, lock=False, fresh=True)
        after = 0
        while True:
            batch = projector.fetch(after)
            out.send(batch)
            if not batch.entries:
                break
            after = batch.last
    out.send(time.process_time())
    out.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.overlap_rebuild_read", description=__doc__)
    parser.add_argument("--events", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=2000)
    args = parser.parse_args(argv)
    size = args.batch_size
    with bench_stores("overlap") as stores:
        recorder, app, db_url, server = stores.recorder, stores.app, stores.db_url, stores.server
        build_log(LogBuilder(recorder, app.mapper), args.events)
        total = recorder.max_notification_id() or 0
        with psycopg.connect(db_url, autocommit=True) as conn:
            pid = backend_pid(conn) or 0

            def serial(projector: Projector) -> float:
                position = 0
                while position < total:
                    position = projector.step(position).position
                return 0.0

            def thread(projector: Projector) -> float:
                assert projector.catch_up() == total
                return 0.0

            def process(projector: Projector) -> float:
                receive, send = multiprocessing.get_context("fork").Pipe(duplex=False)
                child = multiprocessing.get_context("fork").Process(
                    target=_reader, args=(send, recorder, app.mapper, db_url, size)
                )
                child.start()
                send.close()
                while (batch := receive.recv()).entries:
                    projector.apply_batch(batch)
                child_cpu = float(receive.recv())
                child.join()
                assert projector.position() == total
                return child_cpu

            ways = {"serial": serial, "thread": thread, "process": process}
            print(
                f"{total} events, batches of {size}; per event, us: wall | this process's CPU + the "
                "reader process's | PostgreSQL backend's | nats-server's"
            )
            for r in range(args.rounds):
                line = []
                order = list(ways) if r % 2 == 0 else list(reversed(ways))
                for name in order:
                    fresh_schema(conn, SCHEMA)
                    with replay_log(recorder) as log:
                        projector = Projector(
                            log, app.mapper, conn, schema=SCHEMA, batch_size=size, lock=False, fresh=True
                        )
                        ticks = _process_ticks(pid) or 0, _process_ticks(server.pid or 0) or 0
                        cpu, wall = time.process_time(), time.perf_counter()
                        child = ways[name](projector)
                        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                        backend = ((_process_ticks(pid) or 0) - ticks[0]) / _TICKS
                        nats = ((_process_ticks(server.pid or 0) or 0) - ticks[1]) / _TICKS
                    us = [1e6 * x / total for x in (wall, cpu, child, backend, nats)]
                    line.append(f"{name} {us[0]:.1f} | {us[1]:.1f} + {us[2]:.1f} | {us[3]:.1f} | {us[4]:.1f}")
                print(f"round {r + 1} (load {loadavg()}): " + "; ".join(line))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
