"""Events per second of a read-model rebuild, against the raw floors of reading and writing.

Run: ``python -m tests.bench.bench_rebuild [--events N] [--rounds R]`` (a few minutes at most).
It starts its own nats-server (temporary store, free port), uses PostgreSQL from ``DATABASE_URL``,
else 127.0.0.1:5432 (user postgres), else an embedded one (``stratus.postgres``), in a database of its
own that it drops at the end. It builds a realistic log of about N events (flavors, hosts, servers
requested, claimed, scheduled, spawned, some failed, a third deleted; lifecycles interleaved, as
many servers are in flight at once), then measures in each of R interleaved rounds:

- reading the whole stream: a raw-protocol reader (socket, counting only) on batch direct gets and
  on an ordered push consumer (what a replay reads on); the ladder from that push floor to the
  rebuild (``tests.bench.replay_ladder``: the same push read with each event's envelope values and
  payload parsed, then mapped to domain events by eventsourcing's mapper; our reader's messages
  undecoded); a nats-py ordered push consumer, nats-py
  batch direct gets, ``recorder.read_messages``, and
  ``Projector.fetch`` (the rebuild's reader: Notifications decoded to domain events);
  ``Projector.fetch`` again through the reader below nats-py that the rebuild uses
  (``projections.rawlog``);
- writing N rows shaped like ``stratus_rm.instances`` (same table, same indexes): ``COPY``, and
  ``executemany`` of the projection's ``INSERT ... ON CONFLICT DO UPDATE`` in one transaction;
- the live projector's catch-up of the whole log into empty tables made before it is timed
  (``projections.runner.catch_up`` with its lock and batches of 2,000, then ``Projector.catch_up``
  through nats-py: a projector back after downtime, which writes into the tables it has);
- ``projections.rebuild.rebuild`` of the whole log (replay into a new schema, swap), reading below
  nats-py as it does by default, and again through nats-py (``raw_read=False``): making its tables
  (``spare=False``), and, in the same round (which of the two first alternates), taking a spare
  generation made at the round's start (``prepare_spare``, as the projector process makes one ahead
  of time, ``SpareKeeper``); that preparation is timed apart and reported beside.

Rates are medians over rounds; ratios are taken within a round (same load), then the median.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import random
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import psycopg
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import Mapper, Notification, StoredEvent
from nats.aio.client import Client
from psycopg import sql
from psycopg.types.json import Jsonb

from commands.app import Stratus
from commands.flavor import Flavor
from commands.host import Host
from commands.instance import Instance
from projections import apply
from projections.projector import Projector
from projections.rawlog import replay_log
from projections.rebuild import prepare_spare, rebuild
from projections.runner import catch_up
from projections.schema import INSTANCE_COLUMNS, LIVE_SCHEMA, create_schema
from stratus import collector
from stratus.config import Settings
from stratus.eventstore import Factory, JetStreamApplicationRecorder, NatsBridge
from stratus.natsserver import NatsServer
from stratus.postgres import (
    EmbeddedPostgres,
    PostgresUnavailable,
    check_connection,
    create_database,
    drop_database,
)
from stratus.serialization import dumps
from tests.bench.harness import Bench, CpuMeter, Sample, loadavg, machine_lines, nats_server
from tests.bench.lifecycles import Lifecycles
from tests.bench.rawnats import RawNats
from tests.bench.replay_ladder import checked, mapped, our_read, parsed, payload

LOCAL_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
RAW_READ = "read: raw protocol, batch direct get (no client library)"
RAW_PUSH_READ = "read: raw protocol, ordered push consumer (no client library)"
ORDERED_READ = "read: nats-py ordered push consumer"
# The ladder from the push floor to the rebuild: each rung one step more of a replay's work.
PUSH_PAYLOAD = "ladder (b1): the raw push read + each event's payload parsed (orjson)"
PUSH_PARSED = "ladder (b): the raw push read + each event's five envelope values and payload (orjson) parsed"
PUSH_MAPPED = "ladder (c): the raw push read + Notification and eventsourcing's mapper to domain events"
OUR_READ = "ladder: our reader on the push consumer (RawLog.read_messages, StoredMessages), undecoded"
FETCH_RAW = "read: Projector.fetch below nats-py (projections.rawlog)"
COPY = "write: COPY into instances"
# The least any rebuild in one process does: read the log and write the rows it ends with, at once.
READ_AND_COPY = "floor of any rebuild: the raw read and a COPY of the rebuilt instances at once (two threads)"
REBUILD = "projections.rebuild.rebuild"
# The same rebuild taking a spare generation made ahead of time (``prepare_spare``, which the
# projector process runs at its start and after each rebuild): its tables are not made in it.
REBUILD_SPARE = "projections.rebuild.rebuild, a spare generation ready (made ahead, timed apart)"
# The same rebuilds, the time of their replay alone (``RebuildResult.replay_seconds``): what grows
# with the log, without the fixed ~0.3 s of a fresh schema made, analysed and swapped in.
REBUILD_REPLAY = "projections.rebuild.rebuild: its replay alone"
REBUILD_NATS_PY = "projections.rebuild.rebuild through nats-py (raw_read=False)"
# The live projector's catch-up (after a restart or downtime): its lock and batch size, no swap.
CATCH_UP = "the live projector's catch-up (projections.runner.catch_up: lock, batches of 2,000)"
CATCH_UP_BATCH = 500
LADDER = (
    (RAW_PUSH_READ, "(a) the push floor: the raw push read, counting"),
    (PUSH_PAYLOAD, "(b1) + each payload parsed (orjson), no header read"),
    (PUSH_PARSED, "(b) + the five envelope values and the payload parsed (orjson)"),
    (PUSH_MAPPED, "(c) + the Notification and eventsourcing's mapper: domain events"),
    (OUR_READ, "our reader: RawLog.read_messages on the push consumer, undecoded"),
    (FETCH_RAW, "(c) our code: Projector.fetch below nats-py (the rebuild's read thread)"),
    (REBUILD_REPLAY, "(d) + applied: the rebuild's replay alone"),
    (REBUILD, "(d) the whole rebuild (a fresh schema, swap)"),
    (REBUILD_SPARE, "(d) the whole rebuild, a spare generation ready (its tables made ahead)"),
)


# -- the log --------------------------------------------------------------------------------------
class LogBuilder:
    """Appends domain events in the order they happen, up to ~900 per atomic append."""

    def __init__(self, recorder: JetStreamApplicationRecorder, mapper: Mapper[UUID]) -> None:
        self.recorder = recorder
        self.mapper = mapper
        self.buffer: list[StoredEvent] = []
        self.types: Counter[str] = Counter()
        self.appended = 0

    def emit(self, *aggregates: Aggregate) -> None:
        for agg in aggregates:
            for event in agg.collect_events():
                self.buffer.append(self.mapper.to_stored_event(event))
                self.types[type(event).__qualname__] += 1
        if len(self.buffer) >= 900:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            self.recorder.append(self.buffer)
            self.appended += len(self.buffer)
            self.buffer = []


def build_log(
    builder: LogBuilder, events: int, *, hosts: int = 50, in_flight: int = 400, seed: int = 7
) -> None:
    """About ``events`` events of a busy cloud: servers go through their lifecycles interleaved."""
    rng = random.Random(seed)
    flavors = [
        Flavor.create(
            flavorid=f"m1.{i}", name=f"m1.{i}", vcpus=1 + i % 8, ram=512 * (1 + i % 16), disk=10 + i
        )
        for i in range(20)
    ]
    builder.emit(*flavors)
    host_list = [Host.register(f"compute-{i:03}", 512, 2**21, 2**16) for i in range(hosts)]
    builder.emit(*host_list)
    lifecycles = Lifecycles(rng, host_list, builder.emit, in_flight=in_flight, delete_after_spawn=0.35)
    n = 0

    def request() -> Instance:
        nonlocal n
        flavor = rng.choice(flavors)
        inst = Instance.request(
            uuid4(),
            name=f"vm-{n}",
            project_id=f"project-{n % 37}",
            user_id=f"user-{n % 101}",
            flavor=flavor.snapshot_for_instance(),
            image_ref="cirros-0.6.2-x86_64",
            metadata={"role": rng.choice(["web", "db", "batch"]), "n": str(n)},
            availability_zone=None,
            request_key=None,
        )
        n += 1
        return inst

    while builder.appended + len(builder.buffer) < events:
        lifecycles.step(request)
    builder.flush()


# -- reading the stream ---------------------------------------------------------------------------
async def ordered_consumer(bridge: NatsBridge, stream: str, subject: str, total: int) -> int:
    done = asyncio.Event()
    count = 0

    async def cb(msg: Any) -> None:
        nonlocal count
        count += 1
        if count >= total:
            done.set()

    sub = await bridge.js.subscribe(subject, stream=stream, ordered_consumer=True, cb=cb)
    try:
        await asyncio.wait_for(done.wait(), 300)
    finally:
        await sub.unsubscribe()
    return count


async def direct_get_all(bridge: NatsBridge, stream: str, subject: str, batch: int = 1000) -> int:
    """nats-py batch direct gets from sequence 1, counting (one subscription, sequential requests)."""
    nc = bridge.nc
    inbox = nc.new_inbox()
    queue: asyncio.Queue[bool] = asyncio.Queue()
    count = 0

    async def cb(msg: Any) -> None:
        nonlocal count
        if msg.headers and "Status" in msg.headers:
            queue.put_nowait(True)
        else:
            count += 1

    sub = await nc.subscribe(inbox, cb=cb)
    try:
        seq = 1
        while True:
            before = count
            request = dumps({"seq": seq, "next_by_subj": subject, "batch": batch})
            await nc.publish(f"$JS.API.DIRECT.GET.{stream}", request, reply=inbox)
            await asyncio.wait_for(queue.get(), 30)
            if count == before:
                return count
            seq += count - before
    finally:
        await sub.unsubscribe()


def read_messages_all(recorder: JetStreamApplicationRecorder, page: int = 2000) -> int:
    start, total = 1, 0
    while msgs := recorder.read_messages(start, page):
        total += len(msgs)
        start += len(msgs)
    return total


def fetch_all(projector: Projector) -> int:
    """What the rebuild reads: Notifications, decoded to the domain events the read models show."""
    after, total = 0, 0
    while (batch := projector.fetch(after)).notifications:
        total += len(batch.notifications)
        after = batch.last
    return total


def header_block(recorder: JetStreamApplicationRecorder, position: int) -> bytes:
    """The header lines of the stored message at ``position``, as they travel on the wire."""
    (msg,) = recorder.read_messages(position, 1)
    return b"".join(f"{k}: {v}\r\n".encode() for k, v in (msg.headers or {}).items())


def parse_headers_nats_py(block: bytes, n: int) -> int:
    """nats-py 2.16's own header parser (a private static method), ``n`` times."""
    parse = Client._parse_header_lines
    for _ in range(n):
        parse(block)
    return n


def parse_headers_split(block: bytes, n: int) -> int:
    """The same parse without nats-py's per-character whitespace check on each header name."""
    for _ in range(n):
        out = {}
        for line in block.split(b"\r\n"):
            name, sep, value = line.partition(b":")
            if sep:
                out[name.strip().decode("ascii")] = value.strip().decode("utf-8", "replace")
    return n


# -- writing rows ---------------------------------------------------------------------------------
def instance_rows(n: int) -> list[dict[str, Any]]:
    """``n`` rows of ``stratus_rm.instances`` as the projection makes them (from real events)."""
    flavor = {
        "id": "m1.small",
        "name": "m1.small",
        "vcpus": 1,
        "ram": 2048,
        "disk": 20,
        "ephemeral": 0,
        "swap": 0,
    }
    rows = []
    for i in range(n):
        inst = Instance.request(
            uuid4(),
            name=f"vm-{i}",
            project_id=f"project-{i % 37}",
            user_id=f"user-{i % 101}",
            flavor=flavor,
            image_ref="cirros-0.6.2-x86_64",
            metadata={"role": "web", "n": str(i)},
            availability_zone=None,
            request_key=None,
        )
        (event,) = inst.collect_events()
        assert isinstance(event, Instance.Requested)
        rows.append(apply.instance_requested(event, i + 1))
    return rows


def _json(value: Any) -> Any:
    return Jsonb(value, dumps=lambda o: dumps(o).decode()) if isinstance(value, (dict, list)) else value


def copy_rows(conn: psycopg.Connection[Any], schema: str, rows: list[dict[str, Any]]) -> int:
    columns = sql.SQL(", ").join(map(sql.Identifier, INSTANCE_COLUMNS))
    statement = sql.SQL("COPY {}.instances ({}) FROM STDIN").format(sql.Identifier(schema), columns)
    with conn.transaction(), conn.cursor() as cur, cur.copy(statement) as copy:
        for row in rows:
            copy.write_row([_json(row[c]) for c in INSTANCE_COLUMNS])
    return len(rows)


def upsert_rows(conn: psycopg.Connection[Any], schema: str, rows: list[dict[str, Any]]) -> int:
    """The statement ``ReadModelView`` writes a batch's changed rows with, for all rows at once."""
    updates = [c for c in INSTANCE_COLUMNS if c != "id"]
    statement = sql.SQL("INSERT INTO {}.instances ({}) VALUES ({}) ON CONFLICT (id) DO UPDATE SET {}").format(
        sql.Identifier(schema),
        sql.SQL(", ").join(map(sql.Identifier, INSTANCE_COLUMNS)),
        sql.SQL(", ").join(sql.Placeholder() * len(INSTANCE_COLUMNS)),
        sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in updates),
    )
    with conn.transaction(), conn.cursor() as cur:
        cur.executemany(statement, [tuple(_json(row[c]) for c in INSTANCE_COLUMNS) for row in rows])
    return len(rows)


def fresh_schema(conn: psycopg.Connection[Any], name: str, *, indexes: bool = True) -> None:
    """An empty schema ``name`` (``indexes=False``: as a rebuild's replay starts, ``create_schema``)."""
    with conn.transaction():
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
        create_schema(conn, name, indexes=indexes)


# -- PostgreSQL -----------------------------------------------------------------------------------
@contextlib.contextmanager
def postgres_admin_url() -> Iterator[tuple[str, str]]:
    """(admin URL, where it came from): DATABASE_URL, else the local server, else an embedded one."""
    url = Settings.from_env().database_url
    if url:
        yield url, "DATABASE_URL"
        return
    try:
        check_connection(LOCAL_POSTGRES, timeout=2)
        yield LOCAL_POSTGRES, "127.0.0.1:5432"
        return
    except PostgresUnavailable:
        pass
    with tempfile.TemporaryDirectory(prefix="stratus-bench-pg-") as d:
        server = EmbeddedPostgres(Path(d) / "data")
        try:
            yield server.start(), "embedded (pgserver)"
        finally:
            server.stop()


def backend_pid(conn: psycopg.Connection[Any]) -> int | None:
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    return int(row[0]) if row else None


# -- the run --------------------------------------------------------------------------------------
def run_round(
    bench: Bench,
    *,
    server_url: str,
    nats_pid: int | None,
    bridge: NatsBridge,
    settings: Settings,
    recorder: JetStreamApplicationRecorder,
    mapper: Mapper[UUID],
    conn: psycopg.Connection[Any],
    total: int,
    instances: int,
    batch_size: int,
    spare_first: bool = False,
    preparations: list[float] | None = None,
    fixed: dict[bool, list[float]] | None = None,
) -> None:
    stream, subject = settings.stream, recorder.layout.all
    pg_pid = backend_pid(conn)
    # The spare the rebuild with a spare takes, made now, well before it (as the projector makes one).
    started = time.perf_counter()
    if not prepare_spare(conn):
        raise RuntimeError("a spare generation was already there at the round's start")
    prepared = time.perf_counter() - started
    if preparations is not None:
        preparations.append(prepared)
    print(f"  the spare generation's preparation (prepare_spare, before the round): {prepared * 1000:.0f} ms")

    bench.meter.server_pid = nats_pid
    raw = RawNats(server_url)
    try:
        bench.measure(
            RAW_READ,
            "events",
            lambda: raw.read_stream(stream, subject),
        )
        bench.measure(RAW_PUSH_READ, "events", lambda: raw.push_stream(stream, subject))
        bench.measure(PUSH_PAYLOAD, "events", lambda: raw.push_stream(stream, subject, payload()))
        bench.measure(PUSH_PARSED, "events", lambda: raw.push_stream(stream, subject, parsed()))
        bench.measure(PUSH_MAPPED, "events", lambda: raw.push_stream(stream, subject, mapped(mapper)))
    finally:
        raw.close()
    bench.measure(OUR_READ, "events", our_read(recorder, settings.nats_urls, batch_size))
    bench.measure(
        ORDERED_READ,
        "events",
        lambda: bridge.run(lambda: ordered_consumer(bridge, stream, subject, total), 600),
    )
    bench.measure(
        "read: nats-py batch direct get",
        "events",
        lambda: bridge.run(lambda: direct_get_all(bridge, stream, subject), 600),
    )
    bench.measure("read: recorder.read_messages", "events", lambda: read_messages_all(recorder))
    projector = Projector(recorder, mapper, conn, schema="bench_fetch", batch_size=batch_size, lock=False)
    bench.measure("read: Projector.fetch (decoded events)", "events", lambda: fetch_all(projector))
    with replay_log(recorder) as raw_log:
        raw_projector = Projector(
            raw_log, mapper, conn, schema="bench_fetch", batch_size=batch_size, lock=False
        )
        bench.measure(FETCH_RAW, "events", lambda: fetch_all(raw_projector))

    block = header_block(recorder, total // 2)
    bench.measure(
        "decode: nats-py header parsing alone (a stored event's headers)",
        "messages",
        lambda: parse_headers_nats_py(block, total),
    )
    bench.measure(
        "decode: the same headers, without the per-character name check",
        "messages",
        lambda: parse_headers_split(block, total),
    )

    bench.meter.server_pid = pg_pid
    rows = instance_rows(total)
    fresh_schema(conn, "bench_copy")
    bench.measure(COPY, "rows", lambda: copy_rows(conn, "bench_copy", rows))
    fresh_schema(conn, "bench_upsert")
    bench.measure(
        "write: executemany INSERT ON CONFLICT into instances",
        "rows",
        lambda: upsert_rows(conn, "bench_upsert", rows),
    )

    bench.meter.server_pid = nats_pid
    rebuilt_rows = instance_rows(instances)
    fresh_schema(conn, "bench_read_copy")

    def read_and_copy() -> int:
        """The raw read and a COPY of as many instance rows as the rebuilt read model holds, in two
        threads of this process (the GIL shared, as a rebuild's reader and applier share it)."""
        reader = RawNats(server_url)
        try:
            with ThreadPoolExecutor(2) as pool:
                read = pool.submit(reader.read_stream, stream, subject)
                pool.submit(copy_rows, conn, "bench_read_copy", rebuilt_rows).result()
                return read.result()
        finally:
            reader.close()

    bench.measure(READ_AND_COPY, "events", read_and_copy)

    def caught_up() -> int:
        """What the live runner does back after downtime: ``projections.runner.catch_up`` (below
        nats-py while more than a batch behind), then the rest through nats-py."""
        live = Projector(recorder, mapper, conn, schema="bench_live", batch_size=CATCH_UP_BATCH)
        catch_up(live, recorder, threading.Event())
        position = live.catch_up()
        if position != total:
            raise RuntimeError(f"the catch-up reached {position}, the log has {total}")
        return position

    # Untimed, as a live projector back after downtime does neither: the tables it writes into (it
    # has them; making a generation's 156 files costs 0.1-0.4 s here, "a rebuild's fixed cost"), and
    # the collector's full pass on entering ``collector.frozen`` (``stratus projector`` enters it
    # once, at its start, processes/projector.py; here it walked the bench's own heap, ~40-80 ms).
    fresh_schema(conn, "bench_live")
    with collector.frozen():
        bench.measure(CATCH_UP, "events", caught_up)

    replays: list[float] = []

    def rebuilt(raw_read: bool, spare: bool = False) -> int:
        with collector.frozen():  # as ``stratus rebuild`` runs (processes/rebuild.py)
            result = rebuild(conn, recorder, mapper, batch_size=batch_size, raw_read=raw_read, spare=spare)
        if result.position != total or result.spare != spare:
            raise RuntimeError(
                f"rebuild reached {result.position} (spare {result.spare}), the log has {total}"
            )
        if not spare:
            replays.append(result.replay_seconds)
        if fixed is not None and raw_read:  # what is not the replay: the part a spare shortens
            fixed.setdefault(spare, []).append(result.seconds - result.replay_seconds)
        return result.position

    bench.measure(REBUILD_NATS_PY, "events", lambda: rebuilt(False))
    if spare_first:
        bench.measure(REBUILD_SPARE, "events", lambda: rebuilt(True, spare=True))
    whole = bench.measure(REBUILD, "events", lambda: rebuilt(True))
    if not spare_first:
        bench.measure(REBUILD_SPARE, "events", lambda: rebuilt(True, spare=True))
    replay = Sample(whole.count, replays[-1], whole.cpu)  # the CPU shares: the whole rebuild's
    bench.path(REBUILD_REPLAY, "events").samples.append(replay)
    print(f"  {REBUILD_REPLAY}: {replay.count} events in {replay.seconds:.2f} s = {replay.rate:,.0f}/s")


def check_ladder(
    server_url: str,
    recorder: JetStreamApplicationRecorder,
    mapper: Mapper[UUID],
    conn: psycopg.Connection[Any],
    batch_size: int,
) -> str:
    """Rung (c) decodes what the projector decodes: the same domain events, event for event (untimed)."""
    ours: list[Any] = []
    raw = RawNats(server_url)
    try:
        raw.push_stream(recorder.stream, recorder.layout.all, checked(mapped(mapper), ours))
    finally:
        raw.close()
    theirs: list[Any] = []
    with replay_log(recorder) as raw_log:
        projector = Projector(raw_log, mapper, conn, schema="bench_fetch", batch_size=batch_size, lock=False)
        after = 0
        while (batch := projector.fetch(after)).entries:
            theirs += [entry.event for entry in batch.entries]
            after = batch.last
    events = [None if isinstance(e, Notification) else e for e in ours]
    differ = sum(
        type(a) is not type(b) or (a is not None and vars(a) != vars(b))
        for a, b in zip(events, theirs, strict=True)
    )
    if differ:
        raise RuntimeError(f"rung (c) decoded {differ} events otherwise than Projector.fetch")
    return f"rung (c) decodes the {sum(e is not None for e in theirs)} events shown as Projector.fetch does"


def ladder_table(bench: Bench) -> str:
    """The ladder: each rung's rate, its ratio to the push floor (median over rounds of the round's
    ratio, and each round's), and our process's and nats-server's CPU an event (the median round)."""
    lines = [
        "| rung | median rate /s | ratio to the push floor | per round | CPU us an event: ours / server |",
        "|---|---:|---:|---|---|",
    ]
    floor = bench.paths[RAW_PUSH_READ].samples
    for path, name in LADDER:
        samples = bench.paths[path].samples
        ratios = ", ".join(f"{a.rate / b.rate:.2f}" for a, b in zip(samples, floor, strict=False))
        lines.append(
            f"| {name} | {bench.paths[path].median_rate():,.0f} | {bench.ratio(path, RAW_PUSH_READ):.2f}"
            f" | {ratios} | {cpu_per_event(bench, path)} |"
        )
    return "\n".join(lines)


def check_read_models(conn: psycopg.Connection[Any], builder: LogBuilder) -> str:
    instances = conn.execute(sql.SQL("SELECT count(*) FROM {}.instances").format(sql.Identifier(LIVE_SCHEMA)))
    count = instances.fetchone()
    assert count is not None
    requested = builder.types["Instance.Requested"]
    if count[0] != requested:
        raise RuntimeError(f"the rebuilt read model has {count[0]} instances, the log requested {requested}")
    return f"{count[0]} instances"


@dataclasses.dataclass
class BenchStores:
    """A bench's own NATS server and database: the settings, the bridge, the recorder and the app on a
    stream ``BENCH``, the database's URL, where PostgreSQL came from, and the NATS server."""

    settings: Settings
    bridge: NatsBridge
    recorder: JetStreamApplicationRecorder
    app: Stratus
    db_url: str
    pg_source: str
    server: NatsServer


@contextlib.contextmanager
def bench_stores(name: str) -> Iterator[BenchStores]:
    """``BenchStores`` for the bench ``name``; the bridge closed and the database dropped at the end."""
    with nats_server() as server, postgres_admin_url() as (admin_url, pg_source):
        settings = dataclasses.replace(
            Settings(), nats_urls=(server.url,), stream="BENCH", subject_prefix="bench.ev"
        )
        dbname = f"bench_{name}_{uuid.uuid4().hex[:8]}"
        db_url = create_database(admin_url, dbname)
        bridge = NatsBridge(settings.nats_urls, name="bench").start()
        try:
            factory = Factory(bridge=bridge, settings=settings)
            recorder = factory.application_recorder()
            yield BenchStores(settings, bridge, recorder, Stratus(factory), db_url, pg_source, server)
        finally:
            bridge.close()
            drop_database(admin_url, dbname)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_rebuild", description=__doc__)
    parser.add_argument("--events", type=int, default=20_000, help="size of the log")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=2000, help="the rebuild's batch size")
    args = parser.parse_args(argv)

    with bench_stores("rebuild") as stores:
        settings, bridge, recorder, app, db_url = (
            stores.settings, stores.bridge, stores.recorder, stores.app, stores.db_url
        )  # fmt: skip
        pg_source, server = stores.pg_source, stores.server
        builder = LogBuilder(recorder, app.mapper)
        started = time.perf_counter()
        build_log(builder, args.events)
        built = time.perf_counter() - started
        total = recorder.max_notification_id() or 0
        with psycopg.connect(db_url, autocommit=True) as conn:
            pg_version = conn.execute("SHOW server_version").fetchone()
            print(
                "\n".join(
                    machine_lines({"postgresql": f"{pg_version[0] if pg_version else '?'} ({pg_source})"})
                )
            )
            types = ", ".join(f"{k} {v}" for k, v in builder.types.most_common())
            print(f"log: {total} events built in {built:.1f} s ({total / built:,.0f}/s): {types}")
            block = header_block(recorder, total // 2)
            (middle,) = recorder.read_messages(total // 2, 1)
            lines = block.count(b"\n")
            print(
                f"a stored message: {len(middle.data)} B payload, {lines} headers "
                f"({len(block)} B) as the server returns them"
            )
            print(check_ladder(server.url, recorder, app.mapper, conn, args.batch_size))
            bench = Bench(CpuMeter(server.pid))
            preparations: list[float] = []
            fixed: dict[bool, list[float]] = {}
            for r in range(args.rounds):
                print(f"round {r + 1}/{args.rounds} (load {loadavg()})")
                run_round(
                    bench,
                    server_url=server.url,
                    nats_pid=server.pid,
                    bridge=bridge,
                    settings=settings,
                    recorder=recorder,
                    mapper=app.mapper,
                    conn=conn,
                    total=total,
                    instances=builder.types["Instance.Requested"],
                    batch_size=args.batch_size,
                    spare_first=r % 2 == 1,
                    preparations=preparations,
                    fixed=fixed,
                )
            print(
                f"load average at end: {loadavg()}; read models after the last rebuild: "
                f"{check_read_models(conn, builder)}"
            )
        print()
        title = f"Rebuild of a {total}-event log ({args.rounds} rounds, batches of {args.batch_size})"
        baselines = [
            ("raw-protocol read", RAW_READ),
            ("raw-protocol push read", RAW_PUSH_READ),
            ("nats-py ordered consumer", ORDERED_READ),
            ("COPY", COPY),
            ("read and COPY at once", READ_AND_COPY),
        ]
        print(bench.table(title, baselines=baselines))
        print()
        named = (
            (REBUILD, "rebuild"),
            (REBUILD_SPARE, "rebuild with a spare ready"),
            (REBUILD_REPLAY, "rebuild's replay alone"),
            (REBUILD_NATS_PY, "rebuild through nats-py"),
            (CATCH_UP, "catch-up"),
        )
        for path, name in named:
            print(f"Ratios of the {name} (median over rounds of the same round's ratio):")
            for floor in bench.paths:
                if floor not in (REBUILD, REBUILD_SPARE, REBUILD_REPLAY, REBUILD_NATS_PY, CATCH_UP):
                    ratio = bench.ratio(path, floor)
                    print(f"- {name} / {floor}: {ratio:.2f}" if ratio is not None else f"- {floor}: -")
        print()
        print("CPU per event, us (the median round's): this process / nats-server")
        for path in (RAW_READ, RAW_PUSH_READ, ORDERED_READ, READ_AND_COPY, CATCH_UP, REBUILD, REBUILD_SPARE):
            print(f"- {path}: {cpu_per_event(bench, path)}")
        print()
        print(spare_lines(bench, preparations, fixed))
        print()
        print("From the push floor to the rebuild, step by step:")
        print(ladder_table(bench))
    return 0


def spare_lines(bench: Bench, preparations: list[float], fixed: dict[bool, list[float]]) -> str:
    """The rebuild with and without a spare, each round's seconds (the whole, and what is not its
    replay: what a spare shortens, less moved by the load than the replay), and the spare's cost."""
    made = [s.seconds for s in bench.paths[REBUILD].samples]
    took = [s.seconds for s in bench.paths[REBUILD_SPARE].samples]
    saved = sorted(a - b for a, b in zip(made, took, strict=True))
    saved_fixed = sorted(a - b for a, b in zip(fixed[False], fixed[True], strict=True))

    def each(values: list[float]) -> str:
        return ", ".join(f"{v * 1000:.0f}" for v in values)

    return "\n".join([
        "A spare generation (its tables made ahead: by the projector process, not the rebuild):",
        f"- the rebuild making its tables, ms per round: {each(made)}",
        f"- the rebuild taking a spare, ms per round: {each(took)}; "
        f"shorter by a median of {saved[len(saved) // 2] * 1000:.0f} ms",
        f"- what is not the replay (the whole less RebuildResult.replay_seconds), ms per round: "
        f"making its tables {each(fixed[False])}; taking a spare {each(fixed[True])}; "
        f"shorter by a median of {saved_fixed[len(saved_fixed) // 2] * 1000:.0f} ms",
        f"- the spare's preparation (prepare_spare, at each round's start), ms: {each(preparations)}",
        f"- ratio to the raw-protocol read: making its tables {bench.ratio(REBUILD, RAW_READ):.2f}, "
        f"taking a spare {bench.ratio(REBUILD_SPARE, RAW_READ):.2f}",
    ])  # fmt: skip


def cpu_per_event(bench: Bench, path: str) -> str:
    """``path``'s CPU time per unit in its median round, of this process and of the server measured."""
    samples = sorted(bench.paths[path].samples, key=lambda s: s.rate)
    mid = samples[len(samples) // 2]
    per = mid.seconds / max(mid.count, 1) * 1e6 / 100  # us per unit for each % of one core
    server = f"{mid.cpu.server * per:.1f}" if mid.cpu.server is not None else "-"
    return f"{mid.cpu.client * per:.1f} / {server}"


if __name__ == "__main__":
    raise SystemExit(main())
