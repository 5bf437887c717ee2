"""Rebuild the read models from the whole log, then swap them in without stopping readers.

Why: a fix in the projection, a new column, or doubt about the data all have the same answer in an
event-sourced system: replay. The replay fills fresh tables in the schema ``stratus_rm_new`` while
the live runner keeps serving ``stratus_rm``; the secondary indexes of ``instances`` are built once the
replay is done, not kept up to date through it. Then, holding the writers' advisory lock (so the live
runner is between batches), it applies the last few events and renames the schemas in one
transaction. Readers name ``stratus_rm.<table>`` and see either the old or the new generation,
never neither; the live runner's next batch finds the tracking position moved and re-seeks.

Making the new schema's tables (~160 files, ~90 of them synced to the disk) is most of what a
rebuild costs whatever the log's length, so it can be done ahead of time: ``prepare_spare`` makes
``stratus_rm_spare`` (the tables ``create_schema(indexes=False)`` makes, marked with a digest of
their DDL once they are whole) and a rebuild that finds one of its own code's renames it to
``stratus_rm_new`` instead of making the tables. The projector process keeps one ready
(``SpareKeeper``, started by ``processes/projector.py``): at its start and after every rebuild.

Run it as ``stratus rebuild`` (its composition root: ``processes/rebuild.py``); tests call ``rebuild``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import Mapper
from psycopg import sql

from projections import schema
from projections.projector import EventLog, Projector, connection_like
from projections.rawlog import replay_log
from projections.schema import (
    LIVE_SCHEMA,
    POSITION_CHANNEL,
    REBUILD_LOCK,
    SPARE_LOCK,
    WRITER_LOCK,
    analyze,
    index_ddl,
    schema_exists,
    table_ddl,
)
from stratus.eventstore.signing import Verifier
from stratus.quarantine import Quarantine

NEW_SCHEMA = f"{LIVE_SCHEMA}_new"
OLD_SCHEMA = f"{LIVE_SCHEMA}_old"
# A generation's empty tables made ahead of time for the next rebuild (``prepare_spare``).
SPARE_SCHEMA = f"{LIVE_SCHEMA}_spare"
# The NOTIFY channel on which a rebuild says it ended (and may have taken the spare).
SPARE_CHANNEL = f"{LIVE_SCHEMA}_spare"

log = logging.getLogger("stratus.rebuild")


class RebuildError(Exception):
    """The rebuild could not be completed."""


class RebuildInProgress(RebuildError):
    """Another rebuild holds the rebuild lock on this database."""


@dataclass(frozen=True)
class RebuildResult:
    """What a rebuild did: the position swapped in, the one its replay reached, how long it took."""

    position: int  # the log position the swapped-in read models had reached at the swap
    replayed: int  # the position the replay reached before taking the lock for the swap
    seconds: float
    # of which the replay up to ``replayed``: the part that grows with the log (the rest, a fresh
    # schema made, analysed and swapped in, costs about the same whatever the log's length)
    replay_seconds: float = 0.0
    # whether the new tables were a spare generation made ahead of time (``prepare_spare``)
    spare: bool = False


def rebuild(
    conn: psycopg.Connection[Any],
    log: EventLog,
    mapper: Mapper[UUID],
    *,
    batch_size: int = 2000,
    keep_old: bool = False,
    quarantine: Quarantine | None = None,
    trust: Verifier | None = None,
    progress: Callable[[int, int], None] | None = None,
    raw_read: bool = True,
    spare: bool = True,
) -> RebuildResult:
    """Replay ``log`` into a new schema and swap it in as ``stratus_rm``; ``conn`` must be autocommit.

    ``keep_old`` leaves the previous generation as ``stratus_rm_old`` (for comparison) instead of
    dropping it. ``quarantine``: where events the replay cannot apply are recorded (part ``rebuild``)
    and skipped; without one such an event stops the rebuild (``PoisonEvent``). ``trust``: refuses
    events as the live projector does (docs/trust.md), so that a rebuild equals the live models.
    ``progress``: told ``(position, head)`` after each batch of the replay. ``raw_read``: the replay
    reads the log below nats-py where it can (``projections.rawlog``); False: through ``log`` alone.
    ``spare``: take the spare generation (``prepare_spare``) if one of this code's tables is ready;
    False: make the tables, leaving a spare as it is.
    """
    if not conn.autocommit:
        raise ValueError("rebuild needs an autocommit connection (it manages its own transactions)")
    started = time.monotonic()
    got = conn.execute("SELECT pg_try_advisory_lock(%s)", (REBUILD_LOCK,)).fetchone()
    if not got or not got[0]:
        raise RebuildInProgress("another rebuild is running against this database")
    try:
        with replay_log(log, raw=raw_read) as source, _Beside(conn) as beside:
            projector = Projector(
                source, mapper, conn, schema=NEW_SCHEMA, batch_size=batch_size, lock=False,
                quarantine=quarantine, part="rebuild", trust=trust, fresh=True,
            )  # fmt: skip
            with _commits_not_waiting_for_the_disk(conn):
                took_spare = _new_generation(conn, beside, spare=spare)
                # Replay up to the log's head, again while writers appended more than a batch meanwhile,
                # so that the lock below is held for a batch at most (each pass is bounded by the head
                # it saw).
                head = _head(log)
                if progress is not None:
                    projector.progress = lambda position: progress(position, head)
                replay_started = time.monotonic()
                replayed = projector.catch_up(until=head)
                while (head := _head(log)) - replayed > batch_size:
                    replayed = projector.catch_up(until=head)
                # each index in one pass over its table, two at once, the live runner not held
                beside.run(conn, *index_ddl(NEW_SCHEMA))
                replay_seconds = time.monotonic() - replay_started  # the index builds are the replay's work
                analyze(conn, NEW_SCHEMA)  # its first readers are planned on statistics, not on guesses
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
                # The live runner now waits for this lock: apply what arrived during the replay, up to the
                # log's head as of now (writers may keep appending; the live runner follows from here).
                position = projector.catch_up(until=_head(log))
                if schema_exists(conn, LIVE_SCHEMA):  # (no stratus_rm_old: _new_generation dropped it)
                    conn.execute(
                        sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(
                            sql.Identifier(LIVE_SCHEMA), sql.Identifier(OLD_SCHEMA)
                        )
                    )
                conn.execute(
                    sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(
                        sql.Identifier(NEW_SCHEMA), sql.Identifier(LIVE_SCHEMA)
                    )
                )
                conn.execute("SELECT pg_notify(%s, %s)", (POSITION_CHANNEL, str(position)))
            if not keep_old:
                # Waits for readers still inside a statement on the old tables; new ones use the new tables.
                # Its commit does not wait for the disk: lost in a crash, the next rebuild drops them.
                with conn.transaction():
                    conn.execute(
                        sql.SQL(
                            "SET LOCAL synchronous_commit TO off; DROP SCHEMA IF EXISTS {} CASCADE"
                        ).format(sql.Identifier(OLD_SCHEMA))
                    )
    finally:
        if not conn.broken:  # a lost session has released its locks already
            # and says it ended, whether or not it took the spare (or got through): a keeper makes one
            conn.execute("SELECT pg_advisory_unlock(%s), pg_notify(%s, '')", (REBUILD_LOCK, SPARE_CHANNEL))
    return RebuildResult(position, replayed, time.monotonic() - started, replay_seconds, took_spare)


def _new_generation(conn: psycopg.Connection[Any], beside: _Beside, *, spare: bool) -> bool:
    """Make ``stratus_rm_new`` as ``create_schema(indexes=False)`` makes it (its indexes are made once
    the replay is done), after dropping what an earlier rebuild left: its new tables (it stopped
    before its swap), the ones it replaced (kept, or it stopped before dropping them). Dropped here,
    not at the swap, where the live runner would wait for it (and for any reader of the old tables).
    A rebuild stopped in between leaves a part of the tables in ``stratus_rm_new``, which no one
    reads and the next rebuild drops.

    ``spare``: a spare generation of this code's tables, if one is ready, is renamed to
    ``stratus_rm_new`` instead (True returned); one of another code's is dropped (its tables are
    not this code's). A preparation under way is waited for (it holds ``SPARE_LOCK``)."""
    with conn.transaction():
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {}, {} CASCADE").format(
                sql.Identifier(NEW_SCHEMA), sql.Identifier(OLD_SCHEMA)
            )
        )
        if spare:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SPARE_LOCK,))
            found = spare_state(conn)
            if found == "ready":
                conn.execute(
                    sql.SQL("ALTER SCHEMA {} RENAME TO {}; COMMENT ON SCHEMA {} IS NULL").format(
                        sql.Identifier(SPARE_SCHEMA), sql.Identifier(NEW_SCHEMA), sql.Identifier(NEW_SCHEMA)
                    )
                )
                return True
            if found == "stale":
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(SPARE_SCHEMA)))
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(NEW_SCHEMA)))
    beside.run(conn, *table_ddl(NEW_SCHEMA, indexes=False))
    return False


@functools.cache
def spare_marker() -> str:
    """What a whole spare generation of this code's tables says in its schema's comment: a digest
    of the DDL that made them (another code's tables, after a change of the schema, say another)."""
    ddl = "".join(part.as_string(None) for part in schema.table_ddl(SPARE_SCHEMA, indexes=False))
    return f"stratus read-model spare generation, tables {hashlib.sha256(ddl.encode()).hexdigest()[:32]}"


def spare_state(conn: psycopg.Connection[Any]) -> str | None:
    """``ready`` (a spare of this code's tables), ``stale`` (another code's), None (no spare)."""
    row = conn.execute(
        "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s", (SPARE_SCHEMA,)
    ).fetchone()
    if row is None:
        return None
    return "ready" if row[0] == spare_marker() else "stale"


def prepare_spare(conn: psycopg.Connection[Any]) -> bool:
    """Make ``stratus_rm_spare`` for the next rebuild, unless one of this code's tables is ready; True
    if it made one. ``conn`` must be autocommit.

    One transaction makes the tables ``create_schema(indexes=False)`` makes and marks the schema
    (``spare_marker``): a preparation that fails or dies leaves nothing, or the spare that was there.
    A spare of another code's tables is dropped first. False at once, making nothing, while another
    session prepares or takes the spare (it holds ``SPARE_LOCK``). The commit does not wait for the
    disk: lost in a crash, there is no spare, and the next rebuild makes its tables."""
    if not conn.autocommit:
        raise ValueError("prepare_spare needs an autocommit connection (it manages its own transaction)")
    spare = sql.Identifier(SPARE_SCHEMA)
    with conn.transaction():
        got = conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (SPARE_LOCK,)).fetchone()
        if not got or not got[0] or spare_state(conn) == "ready":
            return False
        made = sql.SQL(
            "SET LOCAL synchronous_commit TO off; DROP SCHEMA IF EXISTS {} CASCADE; CREATE SCHEMA {};"
        ).format(spare, spare)
        marked = sql.SQL(";COMMENT ON SCHEMA {} IS {}").format(spare, sql.Literal(spare_marker()))
        conn.execute(sql.Composed([made, *table_ddl(SPARE_SCHEMA, indexes=False), marked]))
    return True


class _Beside:
    """A second connection of the rebuild's own, opened while the first works, to run half of the
    rebuild's DDL at once with the first: the tables of the new generation (PostgreSQL syncs each
    btree it builds to the disk, ~90 for a generation's keys, unique constraints and TOAST indexes,
    1.2-1.5 ms each here, and one backend waited for each in turn), then the indexes of
    ``instances`` (each its own pass over the table; ``CREATE INDEX``'s lock does not conflict with
    itself). Its commits do not wait for the disk either (the swap's commit flushes them)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="rebuild-beside")
        self._opening = self._pool.submit(_opened_beside, conn)

    def __enter__(self) -> _Beside:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown()  # after the opening, whatever happened meanwhile
        if self._opening.exception() is None:  # (an error opening it was raised where it was used)
            self._opening.result().close()

    def run(self, conn: psycopg.Connection[Any], ours: sql.Composed, its: sql.Composed) -> None:
        """``ours`` on ``conn`` and ``its`` on the second connection, at once, each in a transaction."""
        made = self._pool.submit(lambda: _in_transaction(self._opening.result(), its))
        try:
            _in_transaction(conn, ours)
        finally:
            wait([made])  # the second connection is never left working
        made.result()


def _opened_beside(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    other = connection_like(conn)
    other.execute("SET synchronous_commit TO off")
    return other


def _in_transaction(conn: psycopg.Connection[Any], statements: sql.Composed) -> None:
    with conn.transaction():
        conn.execute(statements)


@contextlib.contextmanager
def _commits_not_waiting_for_the_disk(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """The commits before the swap (the new tables made, the replay's, the index builds) return
    before their WAL is flushed (``synchronous_commit`` off: 0.4 ms a commit instead of 2 here, and
    up to ~100 ms when other work keeps the disk busy). Nothing is lost that matters: a crash of
    PostgreSQL ends the rebuild and the next one drops the new schema whatever it holds, and the
    swap's commit, synchronous again, flushes everything written before it."""
    row = conn.execute("SELECT current_setting('synchronous_commit')").fetchone()
    conn.execute("SELECT set_config('synchronous_commit', 'off', false)")
    try:
        yield
    finally:
        if row is not None and not (conn.closed or conn.broken):
            conn.execute("SELECT set_config('synchronous_commit', %s, false)", (row[0],))


def _head(log: EventLog) -> int:
    return log.max_notification_id() or 0


class SpareKeeper:
    """Keeps a spare generation ready for the next rebuild (``prepare_spare``), in a thread with a
    connection of its own: one at its start and one after every rebuild (a rebuild's NOTIFY on
    ``SPARE_CHANNEL`` when it ends), so that the rebuild operators run finds its tables made. The
    long-lived process that runs it (the projector) pays for the tables, not the rebuild. PostgreSQL
    away or failing: logged, tried again ``retry`` seconds later. A context manager: started on
    entry, stopped and joined on exit (or once ``stop`` is set)."""

    def __init__(self, url: str, stop: threading.Event, *, retry: float = 10.0) -> None:
        self._url, self._stop, self._retry = url, stop, retry
        self._ended = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rebuild-spare", daemon=True)
        self.made = 0  # spares made (for tests and probes)

    def __enter__(self) -> SpareKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._ended.set()
        self._thread.join(30)

    def _stopping(self) -> bool:
        return self._stop.is_set() or self._ended.is_set()

    def _run(self) -> None:
        while not self._stopping():
            try:
                with psycopg.connect(
                    self._url, autocommit=True, application_name="stratus-rebuild-spare"
                ) as conn:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(SPARE_CHANNEL)))
                    self._prepare(conn)
                    while not self._stopping():
                        if any(True for _ in conn.notifies(timeout=1.0, stop_after=1)):
                            self._prepare(conn)
            except psycopg.Error as e:
                log.warning("rebuild: could not prepare a spare generation (%s: %s); trying again in %.0f s",
                            type(e).__name__, e, self._retry)  # fmt: skip
                deadline = time.monotonic() + self._retry
                while not self._stopping() and time.monotonic() < deadline:
                    self._ended.wait(0.5)

    def _prepare(self, conn: psycopg.Connection[Any]) -> None:
        started = time.monotonic()
        if prepare_spare(conn):
            self.made += 1
            log.info(
                "rebuild: a spare generation made for the next rebuild in %.2f s", time.monotonic() - started
            )
