"""CPU per event of a rebuild's replay, stage by stage, with the log's messages already in memory.

The log is read once below nats-py (``RawReader``); then, per pass, this thread's CPU per event of:
``decode`` (``StoredMessage`` and the projector's entries: the envelope's headers, the trust check if
any, eventsourcing's mapper with its upcasting, ``Entry``/``Batch``), and ``apply`` (the decoded
batches applied one after the other into a fresh schema, as ``projections.rebuild`` does:
``Projector.apply_batch`` with COPY of the new rows, then the indexes it builds after the replay),
with the PostgreSQL backend's CPU per event beside it. No socket and no reader thread: what is left
is our process's own work per event, which the machine's load moves little. ``--profile``: a
cProfile of each stage, top functions by own time.

    python -m tests.bench.cpu_rebuild_stages [--events 8000] [--passes 5] [--batch-size 2000] [--profile]
"""

from __future__ import annotations

import argparse
import gc
import time

import psycopg

from projections.projector import Batch, Projector
from projections.rawlog import StoredMessage
from projections.schema import create_indexes
from stratus.audit.rawreader import RawReader
from tests.bench.bench_rebuild import LogBuilder, backend_pid, bench_stores, build_log, fresh_schema
from tests.bench.cpu_rebuild_read import profiled
from tests.bench.harness import _TICKS, _process_ticks, loadavg

SCHEMA = "rm_cpu_stages"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.cpu_rebuild_stages", description=__doc__)
    parser.add_argument("--events", type=int, default=8000)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=2000)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    size = args.batch_size
    with bench_stores("cpu_stages") as stores:
        settings, recorder, app, db_url = stores.settings, stores.recorder, stores.app, stores.db_url
        build_log(LogBuilder(recorder, app.mapper), args.events)
        with RawReader(settings.nats_urls, settings.stream) as reader:
            raws = list(reader.messages(recorder.layout.all))
        total = len(raws)
        with psycopg.connect(db_url, autocommit=True) as conn:
            pid = backend_pid(conn) or 0

            def fresh() -> Projector:
                """A rebuild's projector into an empty schema of its own."""
                fresh_schema(conn, SCHEMA, indexes=False)
                return Projector(
                    recorder, app.mapper, conn, schema=SCHEMA, batch_size=size, lock=False, fresh=True
                )

            projector = fresh()

            def decode() -> list[Batch]:
                batches, after = [], 0
                for i in range(0, total, size):
                    batch = projector._decoded(after, [StoredMessage(m) for m in raws[i : i + size]])
                    batches.append(batch)
                    after = batch.last
                return batches

            def apply(batches: list[Batch]) -> None:
                for batch in batches:
                    assert projector.apply_batch(batch).applied
                with conn.transaction():  # the indexes a rebuild builds after its replay
                    create_indexes(conn, SCHEMA)

            print(f"{total} events, batches of {size}; per event, us: decode (thread CPU) | apply (thread "
                  "CPU / its PostgreSQL backend's CPU)")  # fmt: skip
            for p in range(args.passes):
                # The collector off while timing: this bench holds the whole log's messages and
                # decoded batches, which a rebuild never does (two batches at most), and the whole
                # rebuild's CPU does not move with the collector off (cpu_rebuild_read).
                gc.collect()
                gc.disable()
                cpu = time.thread_time()
                batches = decode()
                decoded = 1e6 * (time.thread_time() - cpu) / total
                projector = fresh()
                ticks, cpu = _process_ticks(pid) or 0, time.thread_time()
                apply(batches)
                applied = 1e6 * (time.thread_time() - cpu) / total
                backend = 1e6 * ((_process_ticks(pid) or 0) - ticks) / _TICKS / total
                gc.enable()
                us = f"decode {decoded:.1f} | apply {applied:.1f} / {backend:.1f}"
                print(f"pass {p + 1} (load {loadavg()}): {us}")
            if args.profile:
                profiled("decode", decode, top=25)
                batches = decode()
                projector = fresh()
                profiled("apply", lambda: apply(batches), top=25)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
