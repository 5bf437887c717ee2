"""CPU per event of a rebuild's replay into a fresh schema, written both ways in alternation: upserts
only (``fresh=False``) and the rows new to the tables by COPY (``fresh=True``, as
``projections.rebuild`` does). This process's CPU (all threads), its PostgreSQL backend's and the
wall time, per event and per round: the load moves CPU much less than wall time.

    python -m tests.bench.cpu_rebuild_writes [--events 8000] [--rounds 5] [--batch-size 2000]
"""

from __future__ import annotations

import argparse
import time

import psycopg

from projections.projector import Projector
from tests.bench.bench_rebuild import LogBuilder, backend_pid, bench_stores, build_log, fresh_schema
from tests.bench.harness import _TICKS, _process_ticks, loadavg

SCHEMA = "rm_cpu_writes"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.cpu_rebuild_writes", description=__doc__)
    parser.add_argument("--events", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=2000)
    args = parser.parse_args(argv)
    with bench_stores("cpu_writes") as stores:
        recorder, app, db_url = stores.recorder, stores.app, stores.db_url
        build_log(LogBuilder(recorder, app.mapper), args.events)
        total = recorder.max_notification_id() or 0
        with psycopg.connect(db_url, autocommit=True) as conn:
            pid = backend_pid(conn) or 0
            print(f"{total} events; per event, us: this process's CPU / its backend's CPU / wall")
            for r in range(args.rounds):
                line = []
                for fresh in (False, True):
                    fresh_schema(conn, SCHEMA)
                    projector = Projector(
                        recorder, app.mapper, conn, schema=SCHEMA, batch_size=args.batch_size,
                        lock=False, fresh=fresh,
                    )  # fmt: skip
                    ticks, cpu, wall = _process_ticks(pid) or 0, time.process_time(), time.perf_counter()
                    assert projector.catch_up() == total
                    backend = ((_process_ticks(pid) or 0) - ticks) / _TICKS
                    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                    us = [1e6 * x / total for x in (cpu, backend, wall)]
                    line.append(f"{'COPY' if fresh else 'upserts'} {us[0]:.1f} / {us[1]:.1f} / {us[2]:.1f}")
                print(f"round {r + 1} (load {loadavg()}): " + "; ".join(line))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
