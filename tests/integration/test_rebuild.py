"""Rebuild: replay into a new schema and swap it in while the live projector runs and readers read."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg
import pytest
from psycopg import sql

from commands.app import Stratus
from commands.servers.create import CreateServer
from commands.servers.scheduling import PlaceInstance
from processes.rebuild import main
from projections import queries
from projections import rebuild as rebuild_module
from projections import view as view_module
from projections.projector import Projector
from projections.rawlog import RawLog, replay_log
from projections.rebuild import (
    NEW_SCHEMA,
    OLD_SCHEMA,
    SPARE_SCHEMA,
    RebuildInProgress,
    SpareKeeper,
    prepare_spare,
    rebuild,
    spare_marker,
    spare_state,
)
from projections.schema import (
    LIVE_SCHEMA,
    POSITION_CHANNEL,
    REBUILD_LOCK,
    SPARE_LOCK,
    TABLES,
    WRITER_LOCK,
    create_schema,
    schema_exists,
)
from projections.view import ReadModelView
from stratus.audit.rawreader import RawReader
from stratus.config import Settings
from stratus.eventstore import JetStreamApplicationRecorder, NatsBridge
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.operations import Operations
from tests.fixtures.projections import head, populate, snapshot


def _schemas(conn: psycopg.Connection[Any]) -> list[str]:
    rows = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'stratus_rm%' ORDER BY 1")
    return [r[0] for r in rows.fetchall()]


class Reader(threading.Thread):
    """Queries the live read models in a loop, as the API does, recording what it saw and any error."""

    def __init__(self, database_url: str, *, prepare_threshold: int | None) -> None:
        super().__init__(daemon=True)
        self.url = database_url
        self.prepare_threshold = prepare_threshold
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.seen: list[tuple[int, int]] = []

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True, prepare_threshold=self.prepare_threshold) as conn:
            while not self.stop.is_set():
                try:
                    position = queries.current_position(conn)
                    servers = queries.list_servers(conn, project_id=None, limit=1000, marker=None)
                    queries.list_hosts(conn)
                    queries.list_flavors(conn)
                    if servers:
                        assert queries.get_server(conn, servers[-1].id, None) is not None
                    self.seen.append((position, len(servers)))
                except BaseException as e:
                    self.errors.append(e)
                    return


@pytest.mark.timeout(180)
def test_a_rebuild_swaps_in_equal_tables_while_the_runner_writes_and_readers_read(
    app: Stratus,
    handlers: Handlers,
    rm: psycopg.Connection[Any],
    database_url: str,
    runner: threading.Thread,
) -> None:
    populate(app, instances=400, hosts=3, chunk=100)
    assert queries.wait_for_position(rm, head(app), timeout=30)
    # the writer creates as many servers as it can while the rebuild runs
    Operations(app).set_quota("proj-w", {"instances": -1, "cores": -1, "ram": -1}, {})

    # Writes keep arriving during the rebuild: new servers placed on a host.
    writing = threading.Event()
    writer_errors: list[BaseException] = []

    def write() -> None:
        try:
            i = 0
            while not writing.is_set():
                server = handlers.create_server(CreateServer(f"during-{i}", "proj-w", "u", "p1")).id
                handlers.place_instance(PlaceInstance(server, "pop-0"))
                i += 1
        except BaseException as e:
            writer_errors.append(e)

    readers = [Reader(database_url, prepare_threshold=None), Reader(database_url, prepare_threshold=0)]
    writer = threading.Thread(target=write, daemon=True)
    for t in (*readers, writer):
        t.start()
    try:
        with psycopg.connect(database_url, autocommit=True) as conn:
            result = rebuild(conn, app.recorder, app.mapper, batch_size=300)  # type: ignore[arg-type]
        # The live runner carries on in the new generation: it re-seeks from the swapped-in position.
        after_swap = handlers.create_server(CreateServer("after-swap", "proj-w", "u", "p1"))
        assert queries.wait_for_position(rm, after_swap.position, timeout=30)
        assert queries.get_server(rm, after_swap.id, "proj-w") is not None
    finally:
        writing.set()
        writer.join(30)
        for r in readers:
            r.stop.set()
            r.join(30)
    assert not writer_errors
    for r in readers:
        assert not r.errors, r.errors
        assert len(r.seen) > 10
        positions = [p for p, _ in r.seen]
        assert positions == sorted(positions), "a reader saw the read models go back in time"
    assert result.position >= result.replayed > 0
    assert _schemas(rm) == [LIVE_SCHEMA]

    # Everything the live runner applied after the swap equals a replay from scratch, row for row.
    assert queries.wait_for_position(rm, head(app), timeout=30)
    live = snapshot(rm)
    rebuild(rm, app.recorder, app.mapper, keep_old=True)  # type: ignore[arg-type]
    assert snapshot(rm, OLD_SCHEMA) == live == snapshot(rm, LIVE_SCHEMA)
    assert len(live["instances"]) > 400


def test_rebuild_creates_the_read_models_where_there_were_none(
    app: Stratus, database_url: str, db_settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    populate(app, instances=20, hosts=2, chunk=10)
    assert main(db_settings) == 0  # what `stratus rebuild` runs
    # its progress, as plain lines (no terminal here), the last one at the log's head
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith(f"stratus rebuild: replaying the log: {head(app)}/{head(app)} events (100%)"), last
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert _schemas(conn) == [LIVE_SCHEMA]
        assert queries.current_position(conn) == head(app)
        servers = queries.list_servers(conn, project_id=None, limit=100, marker=None, include_deleted=True)
        assert len(servers) == 20


def test_one_rebuild_at_a_time(app: Stratus, rm: psycopg.Connection[Any], database_url: str) -> None:
    populate(app, instances=5, hosts=1)
    with psycopg.connect(database_url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (REBUILD_LOCK,))
        with pytest.raises(RebuildInProgress):
            rebuild(rm, app.recorder, app.mapper)  # type: ignore[arg-type]
        other.execute("SELECT pg_advisory_unlock(%s)", (REBUILD_LOCK,))
    assert not schema_exists(rm, NEW_SCHEMA)
    result = rebuild(rm, app.recorder, app.mapper)  # type: ignore[arg-type]
    assert result.position == head(app) == queries.current_position(rm)


def test_a_rebuild_stopped_in_its_replay_leaves_the_live_tables_and_the_next_drops_what_it_made(
    app: Stratus, rm: psycopg.Connection[Any]
) -> None:
    populate(app, instances=20, hosts=2, chunk=10)
    rebuild(rm, app.recorder, app.mapper)  # type: ignore[arg-type]
    live = snapshot(rm)

    def stopped(position: int, head: int) -> None:  # as a rebuild killed in its replay
        raise RuntimeError("stopped")

    with pytest.raises(RuntimeError, match="stopped"):
        rebuild(rm, app.recorder, app.mapper, batch_size=10, progress=stopped)  # type: ignore[arg-type]
    assert _schemas(rm) == [LIVE_SCHEMA, NEW_SCHEMA]
    assert snapshot(rm) == live
    result = rebuild(rm, app.recorder, app.mapper)  # type: ignore[arg-type]
    assert result.position == head(app)
    assert _schemas(rm) == [LIVE_SCHEMA] and snapshot(rm) == live


def _waiting_for_a_lock(conn: psycopg.Connection[Any], timeout: float = 30.0) -> bool:
    """True once a session of this database waits for a lock (within ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        ).fetchone()
        if row is not None and row[0] > 0:
            return True
        time.sleep(0.05)
    return False


def test_a_kept_generation_is_dropped_before_the_replay_not_while_the_live_runner_waits(
    app: Stratus, rm: psycopg.Connection[Any], database_url: str
) -> None:
    """The generation a rebuild left (``keep_old``, or a rebuild that stopped before dropping it) is
    dropped by the next before its replay: a reader still in the old tables makes the rebuild wait
    there, not the live runner at the swap (the writers' lock is free meanwhile)."""
    populate(app, instances=10, hosts=1, chunk=10)
    rebuild(rm, app.recorder, app.mapper, keep_old=True)  # type: ignore[arg-type]
    failed: list[BaseException] = []

    def rebuilding() -> None:
        try:
            with psycopg.connect(database_url, autocommit=True) as conn:
                rebuild(conn, app.recorder, app.mapper)  # type: ignore[arg-type]
        except BaseException as e:  # reported by the test, below
            failed.append(e)

    with psycopg.connect(database_url) as reader:  # a transaction still reading the kept tables
        reader.execute(sql.SQL("SELECT count(*) FROM {}.instances").format(sql.Identifier(OLD_SCHEMA)))
        thread = threading.Thread(target=rebuilding, daemon=True)
        thread.start()
        try:
            assert _waiting_for_a_lock(rm), "the rebuild did not wait for the reader of the kept tables"
            with rm.transaction():  # what the live runner takes for each batch
                taken = rm.execute("SELECT pg_try_advisory_xact_lock(%s)", (WRITER_LOCK,)).fetchone()
            assert taken == (True,), "the rebuild held the writers' lock while it waited"
        finally:
            reader.rollback()
    thread.join(60)
    assert not thread.is_alive() and not failed, failed
    assert _schemas(rm) == [LIVE_SCHEMA]
    assert queries.current_position(rm) == head(app)


def _indexes(conn: psycopg.Connection[Any], schema: str, table: str | None = None) -> dict[str, str]:
    """The indexes of ``schema``'s tables (or of ``table`` alone): name -> definition, unqualified."""
    rows = conn.execute(
        "SELECT indexname, replace(indexdef, schemaname || '.', '') FROM pg_indexes "
        "WHERE schemaname = %s AND tablename = coalesce(%s, tablename)",
        (schema, table),
    )
    return dict(rows.fetchall())


def test_a_rebuild_indexes_instances_after_its_replay_as_the_schema_it_replaces(
    app: Stratus, rm: psycopg.Connection[Any], database_url: str
) -> None:
    populate(app, instances=30, hosts=2, chunk=10)
    replaying: list[dict[str, str]] = []  # the instances' indexes after each batch of the replay

    def progress(position: int, head: int) -> None:
        replaying.append(_indexes(rm, NEW_SCHEMA, "instances"))

    with psycopg.connect(database_url, autocommit=True) as conn:  # rm made the live schema, as a runner does
        rebuild(conn, app.recorder, app.mapper, batch_size=20, keep_old=True, progress=progress)  # type: ignore[arg-type]
    assert len(replaying) > 1 and all(found.keys() == {"instances_pkey"} for found in replaying), replaying
    made = _indexes(rm, OLD_SCHEMA)
    assert len(_indexes(rm, OLD_SCHEMA, "instances")) == 9
    assert _indexes(rm, LIVE_SCHEMA) == made  # every table's, names and definitions
    assert len(_as_text(rm, LIVE_SCHEMA)["instances"]) == 30


def _catalog(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    """What ``schema``'s tables are, without its name: each column (its type, nullability, default or
    generation expression), constraint, index and TOAST table."""
    rows = conn.execute(
        """
        SELECT c.relname || ' column ' || a.attnum || ' ' || a.attname || ' '
               || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull::text || ' '
               || a.attgenerated::text || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
          FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
          LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
         WHERE c.relnamespace = %(s)s::text::regnamespace AND c.relkind = 'r' AND a.attnum > 0
           AND NOT a.attisdropped
        UNION ALL
        SELECT conrelid::regclass::text || ' constraint ' || conname || ' ' || pg_get_constraintdef(oid)
          FROM pg_constraint WHERE connamespace = %(s)s::text::regnamespace
        UNION ALL
        SELECT tablename || ' index ' || indexname || ' ' || indexdef
          FROM pg_indexes WHERE schemaname = %(s)s::text
        UNION ALL
        SELECT relname || ' toast ' || (reltoastrelid <> 0)::text FROM pg_class
         WHERE relnamespace = %(s)s::text::regnamespace AND relkind = 'r'
        """,
        {"s": schema},
    )
    return sorted(r[0].replace(f"{schema}.", "") for r in rows.fetchall())


@pytest.mark.parametrize("spare", [False, True], ids=["tables-made", "spare-taken"])
def test_the_tables_a_rebuild_swaps_in_are_those_create_schema_makes(
    app: Stratus, rm: psycopg.Connection[Any], spare: bool
) -> None:
    """A rebuild makes its tables in two parts at once (``table_ddl``), their indexes after its replay;
    or it takes the spare generation made ahead of time (``prepare_spare``), the same tables."""
    populate(app, instances=5, hosts=1)
    if spare:
        assert prepare_spare(rm) and spare_state(rm) == "ready"
    result = rebuild(rm, app.recorder, app.mapper, batch_size=10)  # type: ignore[arg-type]
    assert result.spare == spare and _schemas(rm) == [LIVE_SCHEMA]
    assert _comment(rm, LIVE_SCHEMA) is None  # the spare's mark is not carried into the live schema
    create_schema(rm, "made_at_once")
    try:
        made = _catalog(rm, "made_at_once")
        assert len(made) > 400 and _catalog(rm, LIVE_SCHEMA) == made
    finally:
        rm.execute("DROP SCHEMA made_at_once CASCADE")


def _comment(conn: psycopg.Connection[Any], schema: str) -> str | None:
    row = conn.execute(
        "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s", (schema,)
    ).fetchone()
    assert row is not None, f"no schema {schema}"
    return row[0]  # type: ignore[no-any-return]


def test_a_spare_of_another_codes_tables_is_not_taken_but_dropped_then_made_again(
    app: Stratus, rm: psycopg.Connection[Any]
) -> None:
    """After a change of the read models' tables (a new code version), a spare made by the code before
    is no use: the rebuild makes its tables and drops it, and a preparation replaces it."""
    populate(app, instances=5, hosts=1)
    assert prepare_spare(rm)
    # as the code before would have made it: another table, another mark
    rm.execute(sql.SQL("ALTER TABLE {}.instances DROP COLUMN hostname").format(sql.Identifier(SPARE_SCHEMA)))
    rm.execute(sql.SQL("COMMENT ON SCHEMA {} IS 'stratus read-model spare generation, tables 0'").format(
        sql.Identifier(SPARE_SCHEMA)
    ))  # fmt: skip
    assert spare_state(rm) == "stale"
    result = rebuild(rm, app.recorder, app.mapper)  # type: ignore[arg-type]
    assert not result.spare and _schemas(rm) == [LIVE_SCHEMA]
    create_schema(rm, "made_at_once")
    try:
        assert _catalog(rm, LIVE_SCHEMA) == _catalog(rm, "made_at_once")
    finally:
        rm.execute("DROP SCHEMA made_at_once CASCADE")

    rm.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(SPARE_SCHEMA)))  # unmarked: not whole
    assert spare_state(rm) == "stale"
    assert prepare_spare(rm) and spare_state(rm) == "ready" and _comment(rm, SPARE_SCHEMA) == spare_marker()
    assert not prepare_spare(rm)  # one is ready: nothing made


def test_a_preparation_that_fails_leaves_no_spare_and_a_rebuild_makes_its_tables(
    app: Stratus, rm: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spare's tables and its mark are made in one transaction: a preparation stopped anywhere
    (here: its last table refused) leaves nothing that a rebuild would take."""
    populate(app, instances=5, hosts=1)
    table_ddl = rebuild_module.table_ddl

    def failing(schema: str, *, indexes: bool = True) -> tuple[sql.Composed, sql.Composed]:
        ours, its = table_ddl(schema, indexes=indexes)
        return ours, sql.Composed([its, sql.SQL(";SELECT 1/0")])

    monkeypatch.setattr(rebuild_module, "table_ddl", failing)
    with pytest.raises(psycopg.errors.DivisionByZero):
        prepare_spare(rm)
    assert spare_state(rm) is None and _schemas(rm) == [LIVE_SCHEMA]
    monkeypatch.setattr(rebuild_module, "table_ddl", table_ddl)
    assert not rebuild(rm, app.recorder, app.mapper).spare  # type: ignore[arg-type]
    assert queries.current_position(rm) == head(app)


def test_a_rebuild_waits_for_a_spare_being_made_and_takes_it_and_a_preparation_gives_way(
    app: Stratus, rm: psycopg.Connection[Any], database_url: str
) -> None:
    """Whoever makes, drops or takes the spare holds ``SPARE_LOCK``: a rebuild waits for a preparation
    under way, then takes what it made; a second preparation meanwhile makes nothing."""
    populate(app, instances=5, hosts=1)
    results: list[Any] = []

    def rebuilding() -> None:
        try:
            with psycopg.connect(database_url, autocommit=True) as conn:
                results.append(rebuild(conn, app.recorder, app.mapper))  # type: ignore[arg-type]
        except BaseException as e:  # reported by the test, below
            results.append(e)

    with psycopg.connect(database_url) as preparing:  # a preparation under way, in its transaction
        preparing.execute("SELECT pg_advisory_xact_lock(%s)", (SPARE_LOCK,))
        create_schema(preparing, SPARE_SCHEMA, indexes=False)
        preparing.execute(sql.SQL("COMMENT ON SCHEMA {} IS {}").format(
            sql.Identifier(SPARE_SCHEMA), sql.Literal(spare_marker())
        ))  # fmt: skip
        assert not prepare_spare(rm) and spare_state(rm) is None  # gave way, made nothing
        thread = threading.Thread(target=rebuilding, daemon=True)
        thread.start()
        try:
            assert _waiting_for_a_lock(rm), "the rebuild did not wait for the preparation under way"
        finally:
            preparing.commit()
    thread.join(60)
    assert not thread.is_alive() and len(results) == 1
    assert not isinstance(results[0], BaseException), results
    assert results[0].spare and results[0].position == head(app)
    assert _schemas(rm) == [LIVE_SCHEMA] and queries.current_position(rm) == head(app)


def test_a_spare_keeper_makes_one_at_its_start_and_again_after_each_rebuild(
    app: Stratus, rm: psycopg.Connection[Any], database_url: str, db_settings: Settings,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    populate(app, instances=5, hosts=1)
    stop = threading.Event()
    with SpareKeeper(database_url, stop) as keeper:
        assert _eventually(lambda: spare_state(rm) == "ready"), "no spare made at the keeper's start"
        assert main(db_settings) == 0  # `stratus rebuild` takes it, then says so
        assert (
            "its tables were the spare generation the projector made ahead of time" in capsys.readouterr().out
        )
        made = _eventually(lambda: keeper.made == 2 and spare_state(rm) == "ready")
        assert made, "none made after the rebuild"

        def stopped(position: int, head: int) -> None:  # as a rebuild killed in its replay
            raise RuntimeError("stopped")

        with pytest.raises(RuntimeError, match="stopped"):  # it took the spare, then failed
            rebuild(rm, app.recorder, app.mapper, progress=stopped)  # type: ignore[arg-type]
        made = _eventually(lambda: keeper.made == 3 and spare_state(rm) == "ready")
        assert made, "none made after a rebuild that failed"
        stop.set()
    assert not keeper._thread.is_alive()
    assert _schemas(rm) == [LIVE_SCHEMA, NEW_SCHEMA, SPARE_SCHEMA]  # (the failed one's, for the next to drop)
    assert queries.current_position(rm) == head(app)
    result = rebuild(rm, app.recorder, app.mapper, spare=False)  # type: ignore[arg-type]
    assert not result.spare and spare_state(rm) == "ready"  # spare=False: made its own, left the spare


def _eventually(check: Any, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def test_the_replays_commits_do_not_wait_for_the_disk_then_the_setting_is_the_callers(
    app: Stratus, database_url: str
) -> None:
    populate(app, instances=10, hosts=1, chunk=10)
    with psycopg.connect(database_url, autocommit=True) as conn:
        seen: list[str] = []

        def progress(position: int, head: int) -> None:
            seen.append(conn.execute("SHOW synchronous_commit").fetchone()[0])  # type: ignore[index]

        conn.execute("SET synchronous_commit = local")
        rebuild(conn, app.recorder, app.mapper, batch_size=10, progress=progress)  # type: ignore[arg-type]
        assert seen and set(seen) == {"off"}
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("local",)  # the caller's, again


def _as_text(conn: psycopg.Connection[Any], schema: str) -> dict[str, list[str]]:
    """Every table of a generation, each row as PostgreSQL prints it, in key order (tracking: its
    position, without the time it was written)."""
    out = {}
    for table, key in TABLES:
        row = sql.SQL("t.position::text" if table == "tracking" else "t::text")
        query = sql.SQL("SELECT {} FROM {}.{} AS t ORDER BY {}").format(
            row, sql.Identifier(schema), sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, key))
        )
        out[table] = [r[0] for r in conn.execute(query).fetchall()]
    return out


def test_a_replay_read_below_nats_py_rebuilds_the_tables_one_read_through_nats_py_does(
    app: Stratus, rm: psycopg.Connection[Any]
) -> None:
    populate(app, instances=150, hosts=3, chunk=50)  # more events than one direct-get request returns
    with replay_log(app.recorder) as source:  # type: ignore[arg-type]
        assert isinstance(source, RawLog)  # the tests' NATS URL is nats://: the raw reader is used
    # batches of 97: each batch continues the raw reader's open read where the last one stopped
    rebuild(rm, app.recorder, app.mapper, batch_size=97, raw_read=False)  # type: ignore[arg-type]
    through_nats_py = _as_text(rm, LIVE_SCHEMA)
    rebuild(rm, app.recorder, app.mapper, batch_size=97, keep_old=True)  # type: ignore[arg-type]
    assert _as_text(rm, OLD_SCHEMA) == through_nats_py == _as_text(rm, LIVE_SCHEMA)
    rebuild(rm, app.recorder, app.mapper)  # type: ignore[arg-type]  # batches of 2,000: several requests each
    assert _as_text(rm, LIVE_SCHEMA) == through_nats_py
    assert len(through_nats_py["instances"]) == 150 and through_nats_py["tracking"] == [str(head(app))]


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ws://127.0.0.1:4222", "the raw reader speaks nats:// and tls:// only (ws://127.0.0.1:4222)"),
        ("nats://127.0.0.1:1", "the raw reader cannot connect"),
    ],
)
def test_a_replay_reads_through_nats_py_when_the_raw_reader_cannot(
    settings: Settings, caplog: pytest.LogCaptureFixture, url: str, why: str
) -> None:
    bridge = NatsBridge([url])  # never started: the replay's reader is chosen before anything is read
    try:
        log = JetStreamApplicationRecorder(
            bridge, stream=settings.stream, subject_prefix=settings.subject_prefix
        )
        with caplog.at_level(logging.INFO, "stratus.rebuild"), replay_log(log) as source:
            assert source is log
    finally:
        bridge.close()
    assert f"rebuild: reading the log through nats-py: {why}" in caplog.text


def test_a_replay_whose_raw_reader_is_lost_reads_on_through_nats_py(
    app: Stratus, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    populate(app, instances=20, hosts=2, chunk=10)
    recorder = app.recorder
    reader = RawReader(settings.nats_urls, settings.stream)
    log = RawLog(recorder, reader)  # type: ignore[arg-type]
    first = log.read_messages(1, 50)
    reader.close()  # the connection lost between two batches (a NATS restart)
    with caplog.at_level(logging.WARNING, "stratus.rebuild"):
        rest = log.read_messages(51, 10_000)
    assert "rebuild: the raw reader failed" in caplog.text and "reading on through nats-py" in caplog.text
    expected = recorder.read_messages(1, 10_000)  # type: ignore[attr-defined]
    assert [_stored(m) for m in first + rest] == [_stored(m) for m in expected]
    log.close()


def _stored(msg: Any) -> tuple[dict[str, str], bytes]:
    """A message's headers and body, without what a direct get sets per request (the previous
    position in its reply)."""
    headers = {k: v for k, v in msg.headers.items() if k != "Nats-Last-Sequence"}
    return headers, bytes(msg.data)


def create_schema_in(conn: psycopg.Connection[Any], schema: str) -> None:
    with conn.transaction():
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        create_schema(conn, schema)


def test_a_replay_that_lets_carried_rows_go_reads_them_back_and_rebuilds_what_a_serial_apply_does(
    app: Stratus, rm: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    populate(app, instances=150, hosts=3, chunk=50)
    # The serial path (a projector over tables it did not make: every batch reads its rows back).
    create_schema_in(rm, "serial_check")
    Projector(app.recorder, app.mapper, rm, schema="serial_check", batch_size=97, lock=False).catch_up()  # type: ignore[arg-type]
    serial = _as_text(rm, "serial_check")
    reads: list[int] = []
    load_into = ReadModelView.load_into

    def counted(self: ReadModelView, ws: Any, keys: Any, conn: Any = None) -> None:
        reads.append(len(keys.instances) + len(keys.hosts) + len(keys.claims) + len(keys.flavors))
        load_into(self, ws, keys, conn)

    monkeypatch.setattr(ReadModelView, "load_into", counted)
    rebuild(rm, app.recorder, app.mapper, batch_size=97)  # type: ignore[arg-type]
    assert reads == [] and _as_text(rm, LIVE_SCHEMA) == serial  # every row carried: none read back
    monkeypatch.setattr(view_module, "CARRIED_ROWS", 5)  # a few rows kept: the others read back
    rebuild(rm, app.recorder, app.mapper, batch_size=97)  # type: ignore[arg-type]
    assert sum(reads) > 0 and _as_text(rm, LIVE_SCHEMA) == serial


def test_a_replay_announces_no_position_before_its_tables_are_swapped_in(
    app: Stratus, rm: psycopg.Connection[Any], database_url: str
) -> None:
    """The API's reads wait for a position on the NOTIFY channel (``queries.wait_for_position``): a
    rebuild's replay must not announce positions its schema, read by no one yet, has reached."""
    populate(app, instances=60, hosts=2, chunk=30)
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(POSITION_CHANNEL)))
        result = rebuild(rm, app.recorder, app.mapper, batch_size=50)  # type: ignore[arg-type]
        heard = [n.payload for n in listener.notifies(timeout=1.0)]
    assert heard == [str(result.position)]  # the swap's, once
