"""CPU per event of a rebuild's replay, stage by stage: the read, then decode and apply on messages in memory.

Per pass, this thread's CPU per event of: ``read`` (the whole log read below nats-py as a replay
reads it, ``RawLog.read_messages`` in batches: the socket, the frames, the messages handed over),
``decode`` (``Projector._decoded`` on those messages: the envelope's headers, the trust check if
any, eventsourcing's mapper with its upcasting, ``Entry``/``Batch``), and ``apply`` (the decoded
batches applied one after the other into a fresh schema, as ``projections.rebuild`` does:
``Projector.apply_batch`` with COPY of the new rows, then the indexes it builds after the replay),
with the PostgreSQL backend's CPU per event beside it, and ``memory`` (the part of it a replay's
applier thread does, ``Projector._in_memory``'s work: a batch's keys, the working set from the rows
carried from the batches before (``Carried``), the events applied, the rows kept; nothing written).
No reader thread, and decode and apply work on messages already read: what is left is our process's
own work per event, which the machine's load moves little. Then ``fetch``: read and decode again,
batch by batch with two batches alive, as the projector's reader thread does, with the collector on
and frozen as ``stratus rebuild`` runs it (``stratus.collector.frozen``): the stages above together,
with the collector's share. ``--profile``: a cProfile of each stage, top functions by own time.

    python -m tests.bench.cpu_rebuild_stages [--events 8000] [--passes 5] [--batch-size 2000] [--profile]
        [--no-apply]

At the end, the least of the passes for each stage (the machine's load only ever adds).
"""

from __future__ import annotations

import argparse
import gc
import time

import psycopg

from projections.projector import Batch, Projector
from projections.rawlog import RawLog
from projections.readmodels import ReadModels
from projections.schema import create_indexes
from projections.view import Carried
from stratus import collector
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
    parser.add_argument("--no-apply", action="store_true", help="read and decode only")
    args = parser.parse_args(argv)
    size = args.batch_size
    with bench_stores("cpu_stages") as stores:
        settings, recorder, app, db_url = stores.settings, stores.recorder, stores.app, stores.db_url
        build_log(LogBuilder(recorder, app.mapper), args.events)
        total = recorder.max_notification_id() or 0

        def read() -> list[list[object]]:
            """The whole log as a replay reads it below nats-py, in batches."""
            chunks, start = [], 1
            raw_log = RawLog(recorder, RawReader(settings.nats_urls, settings.stream))
            try:
                while chunk := raw_log.read_messages(start, size):
                    chunks.append(chunk)
                    start += len(chunk)
            finally:
                raw_log.close()
            return chunks

        def fetch() -> None:
            """Read and decode batch by batch, the last two batches kept, as the reader thread does."""
            kept: list[Batch] = []
            raw_log = RawLog(recorder, RawReader(settings.nats_urls, settings.stream))
            try:
                after = 0
                while msgs := raw_log.read_messages(after + 1, size):
                    kept = [*kept[-1:], projector._decoded(after, msgs)]
                    after = kept[-1].last
            finally:
                raw_log.close()

        chunks = read()
        assert sum(map(len, chunks)) == total
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
                for chunk in chunks:
                    batch = projector._decoded(after, chunk)
                    batches.append(batch)
                    after = batch.last
                return batches

            def apply(batches: list[Batch]) -> None:
                for batch in batches:
                    assert projector.apply_batch(batch).applied
                with conn.transaction():  # the indexes a rebuild builds after its replay
                    create_indexes(conn, SCHEMA)

            def in_memory(batches: list[Batch]) -> None:
                """The replay's applier thread on ``batches``: each applied to the rows the ones
                before it left, in memory (``Projector._in_memory`` with every row carried)."""
                carried, view, apply_at = Carried(), projector.view, projector.projection.apply_at
                for batch in batches:
                    ws, unknown = carried.working_set(ReadModels.keys(e.event for e in batch.events))
                    assert unknown.empty  # a fresh replay's carried rows are all the rows there are
                    view.begin(ws)
                    for entry in batch.events:
                        apply_at(entry.event, entry.position)
                    view.discard()
                    carried.keep(ws)

            print(f"{total} events, batches of {size}; per event, us: read, decode (thread CPU) | apply "
                  "(thread CPU / its PostgreSQL backend's CPU), of it in memory | fetch "
                  "(thread CPU)")  # fmt: skip
            best: dict[str, float] = {}
            for p in range(args.passes):
                # The collector off while timing: this bench holds the whole log's messages and
                # decoded batches, which a rebuild never does (two batches at most), and the whole
                # rebuild's CPU does not move with the collector off (cpu_rebuild_read).
                gc.collect()
                gc.disable()
                cpu = time.thread_time()
                chunks = read()
                read_us = 1e6 * (time.thread_time() - cpu) / total
                cpu = time.thread_time()
                batches = decode()
                decoded = 1e6 * (time.thread_time() - cpu) / total
                applied = backend = memory = 0.0
                if not args.no_apply:
                    cpu = time.thread_time()
                    in_memory(batches)
                    memory = 1e6 * (time.thread_time() - cpu) / total
                    projector = fresh()
                    ticks, cpu = _process_ticks(pid) or 0, time.thread_time()
                    apply(batches)
                    applied = 1e6 * (time.thread_time() - cpu) / total
                    backend = 1e6 * ((_process_ticks(pid) or 0) - ticks) / _TICKS / total
                gc.enable()
                with collector.frozen():
                    cpu = time.thread_time()
                    fetch()
                    fetched = 1e6 * (time.thread_time() - cpu) / total
                stages = dict(
                    read=read_us, decode=decoded, apply=applied, backend=backend, memory=memory, fetch=fetched
                )
                best = {k: min(v, best.get(k, v)) for k, v in stages.items()}
                print(f"pass {p + 1} (load {loadavg()}): " + _stages(stages))
            print("least: " + _stages(best))
            if args.profile:
                profiled("read", read, top=25)
                profiled("decode", decode, top=25)
                batches = decode()
                projector = fresh()
                profiled("apply", lambda: apply(batches), top=25)
                profiled("apply in memory", lambda: in_memory(batches), top=25)
    return 0


def _stages(us: dict[str, float]) -> str:
    return (
        f"read {us['read']:.1f}, decode {us['decode']:.1f} | apply {us['apply']:.1f} / {us['backend']:.1f}"
        f", in memory {us['memory']:.1f} | fetch, the collector on {us['fetch']:.1f}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
