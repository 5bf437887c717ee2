"""CPU per event of each step of a replay's decode, on the push read's messages held in memory.

``bench_rebuild``'s ladder (``tests.bench.replay_ladder``) times each rung on the socket, where the
machine's load moves the floor; this times the steps alone on one thread, the collector off, the
least of a few passes: the five envelope values found (the least Python does), the payload parsed
(orjson), the ``Notification`` made of the values, eventsourcing's mapper (``to_domain_event``: the
transcoder's orjson and timestamp, the upcasters), rungs (b) and (c) whole; then our own code on the
same log: ``StoredMessage.notification`` on our reader's frames and ``Projector._decoded`` (the
rebuild's decode), with a cProfile of rung (c) and of ours (``--profile``).

    python -m tests.bench.cpu_replay_ladder [--events 8000] [--passes 7] [--profile]
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from typing import Any
from uuid import UUID

import orjson
import psycopg
from eventsourcing.persistence import Mapper

from projections.projector import Projector
from projections.rawlog import RawLog, StoredMessage
from projections.readmodels import ReadModels
from stratus.audit.rawreader import RawReader
from stratus.eventstore.envelope import notification_of
from tests.bench.bench_rebuild import LogBuilder, bench_stores, build_log
from tests.bench.cpu_rebuild_read import profiled
from tests.bench.rawnats import RawNats
from tests.bench.replay_ladder import _values, mapped, parsed


def least_of(passes: int, fn: Callable[[], object], per: int) -> float:
    """The least thread CPU of ``passes`` calls of ``fn``, in us per ``per`` units, the collector off."""
    best = float("inf")
    for _ in range(passes):
        gc.collect()
        gc.disable()
        cpu = time.thread_time()
        fn()
        best = min(best, time.thread_time() - cpu)
        gc.enable()
    return 1e6 * best / per


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.cpu_replay_ladder", description=__doc__)
    parser.add_argument("--events", type=int, default=8000)
    parser.add_argument("--passes", type=int, default=7)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    with bench_stores("cpu_ladder") as stores:
        recorder, mapper = stores.recorder, stores.app.mapper
        build_log(LogBuilder(recorder, mapper), args.events)
        delivered: list[tuple[bytes, bytes, bytes]] = []
        raw = RawNats(stores.server.url)
        try:
            raw.push_stream(recorder.stream, recorder.layout.all, lambda *m: delivered.append(m))
        finally:
            raw.close()
        ours: list[Any] = []
        raw_log = RawLog(recorder, RawReader(stores.settings.nats_urls, recorder.stream))
        try:
            while msgs := raw_log.read_messages(len(ours) + 1, 2000):
                ours += msgs
        finally:
            raw_log.close()
        with psycopg.connect(stores.db_url, autocommit=True) as conn:
            run(
                args,
                mapper,
                Projector(recorder, mapper, conn, schema="cpu_ladder", lock=False),
                delivered,
                ours,
            )
    return 0


def run(
    args: argparse.Namespace,
    mapper: Mapper[UUID],
    projector: Projector,
    delivered: list[tuple[bytes, bytes, bytes]],
    ours: list[Any],
) -> None:
    """Each step timed on the messages read (``delivered``: the floor's reader's; ``ours``: RawLog's)."""
    n = len(delivered)
    values = [_values(block, reply) for block, _, reply in delivered]
    notifications = [
        notification_of(*v[:4], body, v[4]) for v, (_, body, _) in zip(values, delivered, strict=True)
    ]
    shown = [x for x in notifications if x.topic in frozenset(ReadModels.topics)]
    rung_b, rung_c = parsed(), mapped(mapper)
    assert all(type(m) is StoredMessage for m in ours) and len(ours) == n
    pairs = list(zip(values, delivered, strict=True))
    steps: list[tuple[str, Callable[[], object], int]] = [
        ("the loop alone (a message's three parts unpacked)", lambda: [None for _b, _d, _r in delivered], n),
        ("the five envelope values (ladder._values)", lambda: [_values(b, r) for b, _, r in delivered], n),
        ("the payload parsed (orjson.loads)", lambda: [orjson.loads(d) for _b, d, _r in delivered], n),
        ("rung (b): the values and the payload", lambda: [rung_b(*m) for m in delivered], n),
        ("the Notification of the values (envelope.notification_of)",
         lambda: [notification_of(*v[:4], m[1], v[4]) for v, m in pairs], n),
        ("eventsourcing's transcoder (orjson, the timestamp)",
         lambda: [mapper.transcoder.decode(x.state) for x in shown], len(shown)),
        ("eventsourcing's mapper (Mapper.to_domain_event, the transcoder's included)",
         lambda: [mapper.to_domain_event(x) for x in shown], len(shown)),
        ("rung (c): values, Notification, mapper", lambda: [rung_c(*m) for m in delivered], n),
        ("ours: StoredMessage.notification (our reader's frames)",
         lambda: [m.notification() for m in ours], n),
        ("ours: Projector._decoded (notification, checks, mapper, Entry)",
         lambda: projector._decoded(0, ours), n),
    ]  # fmt: skip
    print(f"{n} events ({len(shown)} shown by the read models); CPU an event, us, least of {args.passes}:")
    for name, fn, per in steps:
        print(f"- {name}: {least_of(args.passes, fn, per):.2f}")
    if args.profile:
        profiled("rung (c)", lambda: [rung_c(*m) for m in delivered], top=15)
        profiled("ours: Projector._decoded", lambda: projector._decoded(0, ours), top=15)


if __name__ == "__main__":
    raise SystemExit(main())
