"""The follower: applies the log to the read models exactly once, one PostgreSQL transaction per batch.

What each event does is ``projections.readmodels``' table (``RULES``); the rows a batch touches are
held by its view, ``projections.view.ReadModelView``. This module is the loop around them.

``Projector.apply`` is the unit of exactly-once: in one transaction it takes the writers' advisory
lock, re-reads the tracking position, and applies the batch only if the batch starts right after
that position (otherwise another runner or a rebuild's swap moved it: nothing is written and the
caller re-seeks). The changed rows, the new tracking position (the batch's last log position,
whether or not the projection cared about the events) and a NOTIFY commit together.

No event stops the projector. A failure of PostgreSQL itself (the connection lost, a serialization
failure, a deadlock, a cancelled statement, a disk full, a table missing) is not an event's: the
batch is retried in place, then the runner backs off and reconnects. A batch that PostgreSQL refuses
for what its events carry (``EVENT_CAUSED``: a NUL in a text value, a constraint an event breaks),
or that an apply function fails, is taken for one an event causes: the batch is bisected, each half
in its own transaction under the same rules, down to the single event(s) that fail; those are
quarantined (``stratus.quarantine``: recorded, alerted) and skipped in a transaction that only
advances the tracking position, and every other event is applied once. An event that cannot even be
decoded is quarantined before its batch is applied.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple, Protocol
from uuid import UUID

import psycopg
from eventsourcing.persistence import Mapper
from psycopg import sql

from projections.queries import read_json_with_orjson
from projections.rawlog import StoredMessage
from projections.readmodels import ReadModels
from projections.schema import LIVE_SCHEMA, WRITER_LOCK
from projections.view import Carried, ReadModelView, _WorkingSet
from stratus import metrics
from stratus.eventstore import EventStoreUnavailable
from stratus.eventstore.envelope import decode_notification
from stratus.eventstore.signing import INSTANCE_KIND, PLACING, InOrder, Verifier
from stratus.eventstore.subjects import SubjectLayout
from stratus.quarantine import Quarantine, described, position_of

log = logging.getLogger("stratus.projector")

# How long a projector following the log lets commits gather after being woken by one (``run``).
LINGER_SECONDS = 0.02
# A replay's first batch (``_replay``), its later ones twice the one before up to the batch size:
# the writer has nothing to write until the first batch is read and applied (~40 ms for 2,000 events).
FIRST_REPLAY_BATCH = 250
# The interpreter's switch interval while a replay's three threads run (CPython's: 5 ms). The writer
# waits for PostgreSQL up to 10 times a batch, and each time it must take the GIL back from the reader
# decoding, which keeps it up to the interval: 2,000 events took the writer 50-60 ms beside the
# reader and ~20 ms alone (docs/performance.md, "the live catch-up").
REPLAY_SWITCH_INTERVAL = 0.0005


class EventLog(Protocol):
    """What the projector needs of the event store (``stratus.eventstore``'s recorder)."""

    def read_messages(
        self, start: int, limit: int, *, stop: int | None = None, subject_filter: str | None = None
    ) -> list[Any]: ...

    def max_notification_id(self) -> int | None: ...

    def wait_for_position(self, gt: int, timeout: float) -> int: ...

    layout: SubjectLayout


@dataclass(frozen=True)
class BatchResult:
    """What applying one batch did: whether it was applied, and where the tracking position is."""

    applied: bool  # False: the tracking position was not where the batch starts; nothing written
    position: int  # the tracking position after the call (where to read the log from next)
    events: int = 0  # log entries the batch covered
    processed: int = 0  # of which domain events the read models show


class Entry(NamedTuple):
    """One log entry of a batch: its decoded domain event if the read models show it, or why it
    could not be decoded (then it is quarantined, never applied). A named tuple, not a frozen
    dataclass: one is made per event read, and a tuple is made in a third of the time."""

    position: int
    topic: str
    originator_id: UUID | str
    event: Any = None
    error: Exception | None = None


@dataclass(frozen=True)
class Batch:
    """Log entries right after position ``after``, and the domain events among them, decoded."""

    after: int
    entries: Sequence[Entry]
    name: str = ReadModels.name

    @property
    def notifications(self) -> Sequence[Entry]:
        return self.entries

    @cached_property  # read several times per transaction (keys, apply); the entries never change
    def events(self) -> list[Entry]:
        """The entries whose domain events the read models show (each with its log position)."""
        return [e for e in self.entries if e.event is not None]

    @property
    def last(self) -> int:
        return self.entries[-1].position if self.entries else self.after

    def halves(self) -> tuple[Batch, Batch]:
        middle = len(self.entries) // 2
        left = Batch(self.after, self.entries[:middle], self.name)
        return left, Batch(left.last, self.entries[middle:], self.name)


# Failures of PostgreSQL itself that a retry of the same batch on the same connection may not meet.
RETRY_IN_PLACE: tuple[type[Exception], ...] = (
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.LockNotAvailable,
    psycopg.errors.QueryCanceled,
)
# What PostgreSQL answers when a value or a change an event carries cannot be stored (a NUL in text,
# a constraint, a value too large for an index); the batch is then bisected to find the event.
EVENT_CAUSED: tuple[type[Exception], ...] = (
    psycopg.DataError,
    psycopg.IntegrityError,
    psycopg.errors.ProgramLimitExceeded,
    psycopg.errors.PipelineAborted,  # what follows such an error inside the batch's pipeline
)
# Failures of the event store: the runner reconnects and re-seeks.
LOG_TEMPORARY: tuple[type[Exception], ...] = (EventStoreUnavailable, TimeoutError)
# How often a batch failing in passing (``RETRY_IN_PLACE``) is tried on the same connection before
# the runner takes over (backoff, reconnect), and the pause before the first retry (doubling).
ATTEMPTS = 5
FIRST_DELAY = 0.1


class PoisonEvent(Exception):
    """An event the projector cannot apply, met with no quarantine to record it in."""


class Projector:
    """Reads the log in batches and applies each batch to one schema's read models, exactly once.

    ``lock=True`` (the live schema) takes the writers' advisory lock in every batch transaction;
    a rebuild filling its own schema runs without it until its swap. ``conn`` must be an
    autocommit connection: the projector opens one transaction per batch. While a batch is being
    applied, a reader thread already fetches and decodes the next one. ``trust``: checks each
    event's signer (docs/trust.md), in log order (``InOrder``: a host's key only on its own servers'
    events); an event it refuses is quarantined like one that cannot be decoded.
    """

    def __init__(
        self,
        log: EventLog,
        mapper: Mapper[UUID],
        conn: psycopg.Connection[Any],
        *,
        schema: str = LIVE_SCHEMA,
        batch_size: int = 500,
        lock: bool = True,
        quarantine: Quarantine | None = None,
        part: str = "projector",
        trust: Verifier | None = None,
        progress: Callable[[int], None] | None = None,
        fresh: bool = False,
    ) -> None:
        if not conn.autocommit:
            raise ValueError("the projector needs an autocommit connection (one transaction per batch)")
        self.log = log
        self.mapper = mapper
        self.conn = conn
        self.schema = schema
        self.batch_size = batch_size
        self.lock = lock
        # fresh: a rebuild's own schema, its new rows written with COPY (``ReadModelView.copy_new``)
        self.view = ReadModelView(conn, schema, fresh=fresh)
        self.projection = ReadModels(self.view)
        self._topics = frozenset(ReadModels.topics)
        self.quarantine = quarantine
        self.part = part
        self.trust = InOrder(trust, self._placing) if trust is not None else None
        self.progress = progress  # told the position after each batch (a rebuild's progress bar)

    def position(self) -> int:
        return self.view.max_tracking_id(self.projection.name) or 0

    def read(self, after: int, limit: int | None = None) -> list[Any]:
        """The log's messages after position ``after`` (as stored: decoded by ``fetch``)."""
        return self.log.read_messages(after + 1, limit or self.batch_size)

    def fetch(self, after: int, limit: int | None = None) -> Batch:
        """Read the next batch after ``after`` (``limit`` entries, else a batch's) and decode the
        events the read models show (pure)."""
        return self._decoded(after, self.read(after, limit))

    def _decoded(self, after: int, msgs: Sequence[Any]) -> Batch:
        entry = self._entry
        return Batch(after, [entry(m) for m in msgs], self.projection.name)

    def _entry(self, msg: Any) -> Entry:
        """One message as an entry; one that cannot be decoded is kept with its error (to quarantine).
        A message read below nats-py (``projections.rawlog``) finds its envelope in its raw headers."""
        try:
            notification = msg.notification() if type(msg) is StoredMessage else decode_notification(msg)
        except Exception as e:  # a garbled envelope: whatever decoding raises is this event's fault
            return Entry(*described(msg), error=e)
        position, topic, originator = notification.id, notification.topic, notification.originator_id
        refused = self.trust.refusal(msg.headers or {}, bytes(msg.data), position) if self.trust else None
        if refused is not None:
            return Entry(position, topic, originator, error=refused)
        if topic not in self._topics:
            return Entry(position, topic, originator)
        try:
            event = self.mapper.to_domain_event(notification)
        except Exception as e:  # decoding and upcasting are pure: a failure is the event's own
            return Entry(position, topic, originator, error=e)
        return Entry(position, topic, originator, event)  # positional: the tuple made a third faster

    def _placing(self, after: int, upto: int) -> list[tuple[int, Any, bytes]]:
        """What the trust check folds before its first batch when the projector starts from a
        position past 1 (or skips ahead): ``placing_events``."""
        return placing_events(self.log, after, upto)

    def apply(self, msgs: Sequence[Any], after: int) -> BatchResult:
        """Apply ``msgs`` (the log's entries right after position ``after``) in one transaction."""
        return self.apply_batch(self._decoded(after, msgs))

    def apply_batch(self, batch: Batch) -> BatchResult:
        """Apply ``batch``; an event that fails it is quarantined and skipped, the rest applied once.

        Raises only what the runner recovers from: PostgreSQL or the event store away."""
        if not batch.entries:
            return BatchResult(True, batch.after)
        for entry in batch.entries:
            if entry.error is not None:
                self._quarantine(entry, entry.error)
        return self._bisecting(batch)

    def _bisecting(self, batch: Batch) -> BatchResult:
        failure = self._attempt(batch)
        if isinstance(failure, BatchResult):
            return failure
        if len(batch.entries) == 1:
            self._quarantine(batch.entries[0], failure)
            return self._skip(batch)
        left_half, right_half = batch.halves()
        left = self._bisecting(left_half)
        if not left.applied:
            return left
        right = self._bisecting(right_half)
        if not right.applied:
            return right
        return BatchResult(True, right.position, left.events + right.events, left.processed + right.processed)

    def _attempt(self, batch: Batch) -> BatchResult | Exception:
        """One transaction for ``batch``, retried in place while PostgreSQL fails it in passing.

        Returns the error that failed it if an event may be its cause (then the batch is bisected);
        raises what is PostgreSQL's or the event store's own failure (the runner backs off)."""
        delay = FIRST_DELAY
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return self._apply_once(batch)
            except LOG_TEMPORARY:
                raise
            except psycopg.Error as e:
                if self.conn.closed or self.conn.broken or not isinstance(e, EVENT_CAUSED + RETRY_IN_PLACE):
                    raise  # PostgreSQL away, out of disk, a table missing: not an event's fault
                if isinstance(e, EVENT_CAUSED):
                    return e
                if attempt == ATTEMPTS:
                    raise
                log.warning("%s: batch after %d failed (%s), retrying in %.1f s", self.part, batch.after,
                            type(e).__name__, delay)  # fmt: skip
                time.sleep(delay)
                delay *= 2
            except Exception as e:  # decoding is done: an apply function failed on this batch's events
                return e
        raise AssertionError("unreachable")

    def _quarantine(self, entry: Entry, error: Exception) -> None:
        if self.quarantine is None:
            raise PoisonEvent(f"event at position {entry.position} cannot be applied") from error
        at, topic, originator = entry.position, entry.topic, str(entry.originator_id)
        self.quarantine.record(self.part, position=at, topic=topic, originator_id=originator, error=error)

    def _skip(self, batch: Batch) -> BatchResult:
        """Advance the tracking position over ``batch`` (one quarantined event), applying nothing."""
        entries = [Entry(e.position, e.topic, e.originator_id) for e in batch.entries]
        result = self._apply_once(Batch(batch.after, entries, batch.name))
        return BatchResult(result.applied, result.position, result.events, 0)

    def _apply_once(self, batch: Batch) -> BatchResult:
        # Pipeline mode groups the statements into a few round trips (BEGIN with the lock and the
        # tracking read, the loads, the writes with COMMIT). The server still runs them in order: the
        # tracking table's name is resolved only once the lock is held.
        if self.view.fresh:
            return self._apply_fresh(batch)
        with self.conn.pipeline(), self.conn.transaction():
            current = self._locked_position()
            if current != batch.after:
                return BatchResult(False, current)
            try:
                self._process(batch)
                self.view.flush(batch.last)
            finally:
                self.view.discard()
        return BatchResult(True, batch.last, len(batch.entries), len(batch.events))

    def _apply_fresh(self, batch: Batch) -> BatchResult:
        """``_apply_once`` into a rebuild's fresh tables: the same transaction, with the batch's new
        rows COPYed between the pipelined reads and the pipelined writes (COPY leaves pipeline mode)."""
        with self.conn.transaction():
            try:
                with self.conn.pipeline():
                    current = self._locked_position()
                    if current != batch.after:
                        return BatchResult(False, current)
                    self._process(batch)
                self.view.copy_new()
                self.view.flush(batch.last)
            finally:
                self.view.discard()
        return BatchResult(True, batch.last, len(batch.entries), len(batch.events))

    def _process(self, batch: Batch) -> None:
        """Load the rows ``batch`` reads and apply its events to them, in the view (its transaction's
        statements sent, nothing written yet). The batch's last position, written by ``flush``, is
        the tracking of every event in it."""
        self.view.load(ReadModels.keys(e.event for e in batch.events))
        apply = self.projection.apply_at
        for entry in batch.events:
            apply(entry.event, entry.position)

    def _locked_position(self) -> int:
        """The tracking position, read under the writers' lock when this projector takes it."""
        if self.lock:
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
        row = self.conn.execute(self._tracking_for_update).fetchone()
        return int(row[0]) if row else 0

    @cached_property
    def _tracking_for_update(self) -> bytes:
        """The tracking row's read under its lock, composed once (as each batch read it)."""
        query = sql.SQL("SELECT position FROM {}.tracking FOR UPDATE").format(sql.Identifier(self.schema))
        return query.as_bytes(self.conn)

    def step(self, after: int) -> BatchResult:
        """Read the next batch after ``after`` and apply it."""
        return self.apply_batch(self.fetch(after))

    def catch_up(self, until: int | None = None, stop: threading.Event | None = None) -> int:
        """Apply batches until the log has nothing more (or ``until`` is reached, or ``stop`` is set);
        the final position."""
        return self._follow(stop if stop is not None else threading.Event(), until=until)

    def run(self, stop: threading.Event, *, idle_wait: float = 0.5, linger: float = LINGER_SECONDS) -> int:
        """Follow the log until ``stop`` is set: batches while behind, a blocking wait when caught up.

        ``linger``: once woken by a commit, how long to let further commits gather before reading, so
        that one read and one transaction cover several commits (a boot makes four) instead of each
        paying its own; it is what the read model may lag behind the log when the log is busy."""
        return self._follow(stop, idle_wait=idle_wait, linger=linger)

    def _follow(
        self,
        stop: threading.Event,
        *,
        until: int | None = None,
        idle_wait: float | None = None,
        linger: float = 0.0,
    ) -> int:
        if idle_wait is None:  # catching up: PostgreSQL's work beside ours
            return self._replay(stop, until)
        position = self.position()
        with ThreadPoolExecutor(1, thread_name_prefix=f"{self.schema}-read") as reader:
            ahead: Future[Batch] = reader.submit(self.fetch, position)
            while not stop.is_set() and (until is None or position < until):
                batch = ahead.result()
                if batch.after != position:  # read ahead from a position that did not hold
                    ahead = reader.submit(self.fetch, position)
                    continue
                if not batch.entries:
                    if idle_wait is None:
                        break
                    if self.log.wait_for_position(position, idle_wait) > position and linger:
                        stop.wait(linger)
                    ahead = reader.submit(self.fetch, position)
                    continue
                ahead = reader.submit(self.fetch, batch.last)
                result = self.apply_batch(batch)
                position = result.position
                if self.lock:  # the live read models' (a rebuild's schema is not served yet)
                    metrics.PROJECTOR_POSITION.set(position)
                    metrics.PROJECTOR_EVENTS.inc(result.events)
                if self.progress is not None:
                    self.progress(position)
            ahead.cancel()
        return position

    def _replay(self, stop: threading.Event, until: int | None) -> int:
        """``catch_up`` (a rebuild's replay, the live projector's catch-up) with PostgreSQL's work
        beside ours: a writer thread writes batch N (its own transaction, as ``apply_batch``'s) while
        this thread applies batch N+1 in memory, on the rows batch N left (``Carried``: rows this
        replay wrote are not read back), and the reader thread reads and decodes batch N+2.

        Serial, each of the three waited for the others' work in turn (the rows read back, the
        commit, the next batch), and a rebuild ran at half a core. A batch that fails in memory or
        in the writer (PostgreSQL refuses a value, the tracking position moved, a rebuild swapped
        in other tables) is applied again by ``apply_batch`` from the committed position (it
        bisects, quarantines, retries), and the replay goes on without the carried rows. The writer
        writes the batches' new rows with COPY, into the live tables too (``ReadModelView.copies``).

        The first batches are smaller (``FIRST_REPLAY_BATCH``, doubling up to the batch size), so that
        the writer starts early; nothing is read past ``until``; and the interpreter switches threads
        every ``REPLAY_SWITCH_INTERVAL`` meanwhile, so that the writer gets the GIL back soon after
        each answer of PostgreSQL."""
        position, tables = self._tables()
        # rows kept only for this call: between two, other batches may have written the tables
        carried = Carried()
        carried.complete = position == 0  # nothing applied yet: the tables are empty
        head = position  # where the applied batches reach (``position``: where the committed ones do)
        prefix = f"{self.schema}-"
        # smaller batches first when there is more than one to read
        more = until is None or until - position > self.batch_size
        sizes = _growing(FIRST_REPLAY_BATCH if more else self.batch_size, self.batch_size)
        with (
            _switching_every(REPLAY_SWITCH_INTERVAL),
            ThreadPoolExecutor(1, thread_name_prefix=prefix + "read") as reader,
            ThreadPoolExecutor(1, thread_name_prefix=prefix + "write") as writer,
            contextlib.ExitStack() as opened,
        ):
            # The writer COPYs the batches' new rows, live tables too: each working set knows which
            # rows the tables hold (``ReadModelView.copy_new``); ``apply_batch`` upserts as always.
            opened.callback(setattr, self.view, "copies", self.view.copies)
            self.view.copies = True
            second: list[psycopg.Connection[Any]] = []

            def reading() -> psycopg.Connection[Any]:
                """A connection of this replay's own to read rows with beside the writer's."""
                if not second:
                    second.append(opened.enter_context(connection_like(self.conn)))
                return second[0]

            def read_ahead(after: int) -> Future[Batch]:
                size = next(sizes)
                if size < self.batch_size:  # one of the first batches
                    return reader.submit(self.fetch, after, size)
                return reader.submit(self.fetch, after)

            ahead = read_ahead(position)
            writing: tuple[Batch, Future[None]] | None = None  # the batch the writer has
            while True:
                batch: Batch | None = None
                if not stop.is_set() and (until is None or head < until):
                    batch = ahead.result()
                    if batch.after != head:  # read ahead from a position that did not hold
                        ahead = read_ahead(head)
                        continue
                    if not batch.entries:
                        batch = None
                    elif until is None or batch.last < until:  # none past ``until``: no read to end
                        ahead = read_ahead(batch.last)
                ws = self._in_memory(batch, carried, reading) if batch is not None else None
                failed = writing[1].exception() if writing is not None else None  # waits for the write
                if writing is not None and failed is None:
                    position = self._written(writing[0].last, len(writing[0].entries))
                writing = None
                if failed is not None or (batch is not None and ws is None):
                    # on its own from the committed position: ``apply_batch`` bisects, quarantines, retries
                    if failed is not None:
                        log.warning("%s: batch after %d failed in the writer (%s), applied again on its own",
                                    self.part, position, type(failed).__name__)  # fmt: skip
                    carried.clear()
                    _settled(ahead)  # the read ahead is done before this thread reads: one reader at a time
                    position, tables = self._tables()  # what is committed (the writer is done)
                    result = self.apply_batch(self.fetch(position))
                    head = position = self._written(result.position, result.events)
                    ahead = read_ahead(head)
                    continue
                if batch is None or ws is None:
                    break
                for entry in batch.entries:
                    if entry.error is not None:
                        self._quarantine(entry, entry.error)
                carried.keep(ws)
                writing = (batch, writer.submit(self._write_batch, batch, ws, tables))
                head = batch.last
            ahead.cancel()
        return position

    def _in_memory(
        self, batch: Batch, carried: Carried, reading: Callable[[], psycopg.Connection[Any]]
    ) -> _WorkingSet | None:
        """``batch`` applied to the carried rows, those not carried read on the ``reading``
        connection while the writer writes the batch before on its own: a row not carried is in
        no batch the writer has not committed (``Carried`` keeps the two newest batches' rows
        whatever its bound). None if that failed (an apply function raised)."""
        ws, unknown = carried.working_set(ReadModels.keys(e.event for e in batch.events))
        if not unknown.empty:
            self.view.load_into(ws, unknown, reading())
            ws.stored_instances |= unknown.instances & ws.instances.keys()
            ws.stored_claims |= unknown.claims & ws.claims.keys()
        self.view.begin(ws)
        apply = self.projection.apply_at
        try:
            for entry in batch.events:
                apply(entry.event, entry.position)
        except Exception:  # an apply function failed on this batch: ``apply_batch`` finds the event
            return None
        finally:
            self.view.discard()
        return ws

    def _write_batch(self, batch: Batch, ws: _WorkingSet, tables: int) -> None:
        """The writer thread's part of ``_replay``: ``_apply_once``'s transaction for ``ws``, which
        starts from rows carried from earlier batches: it is refused (``_Moved``) unless the tables
        are those the replay began on (a rebuild swaps in others) at the position the batch follows."""
        with self.conn.transaction():
            with self.conn.pipeline():
                current = self._locked_position()
                now = self.conn.execute(self._tracking_table).fetchone()
            if current != batch.after or now is None or now[0] != tables:
                raise _Moved(f"the read models moved to {current}, the batch follows {batch.after}")
            self.view.copy_new(ws)
            self.view.flush(batch.last, ws)

    def _tables(self) -> tuple[int, int]:
        """The tracking position, and which tracking table holds it (its oid: a rebuild's swap
        brings another)."""
        with self.conn.pipeline():
            position = self.position()
            row = self.conn.execute(self._tracking_table).fetchone()
        return position, int(row[0]) if row else 0

    @cached_property
    def _tracking_table(self) -> bytes:
        query = sql.SQL("SELECT {}::regclass::oid").format(sql.Literal(f"{self.schema}.tracking"))
        return query.as_bytes(self.conn)

    def _written(self, position: int, events: int = 0) -> int:
        """Report ``position`` committed, after ``events`` more (metrics, progress); the position."""
        if self.lock:
            metrics.PROJECTOR_POSITION.set(position)
            metrics.PROJECTOR_EVENTS.inc(events)
        if self.progress is not None:
            self.progress(position)
        return position


def _growing(first: int, most: int) -> Iterator[int]:
    """``first``, then each twice the one before, up to ``most`` and ``most`` for ever after."""
    size = min(first, most)
    while True:
        yield size
        size = min(size * 2, most)


class _SwitchInterval:
    """``sys.setswitchinterval`` lowered while any replay of the process runs, restored after the
    last (replays may overlap: a rebuild's and the live projector's in one test process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._saved = 0.0

    @contextlib.contextmanager
    def __call__(self, seconds: float) -> Iterator[None]:
        with self._lock:
            if self._running == 0:
                self._saved = sys.getswitchinterval()
                sys.setswitchinterval(min(seconds, self._saved))
            self._running += 1
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1
                if self._running == 0:
                    sys.setswitchinterval(self._saved)


_switching_every = _SwitchInterval()


def _settled(future: Future[Any]) -> None:
    """``future`` cancelled, or else finished (its outcome not wanted)."""
    if not future.cancel():
        with contextlib.suppress(Exception):
            future.result()


def connection_like(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """Another autocommit connection to ``conn``'s database, as ``conn`` was opened (its parameters,
    its password if it gave one), JSON read as the read models read it."""
    password = conn.pgconn.password
    other = psycopg.connect(
        conn.info.dsn, autocommit=True, **({"password": password.decode()} if password else {})
    )
    read_json_with_orjson(other)
    return other


class _Moved(Exception):
    """The tracking position was not where a batch handed to the writer starts."""


def placing_events(log: Any, after: int, upto: int) -> list[tuple[int, Any, bytes]]:
    """The events that place servers (``signing.PLACING``) after position ``after`` up to ``upto``,
    in order, as (position, headers, body): one filtered read of ``instance.*.<type>`` per type
    (tests/bench/bench_placements.py measures it at 10,000 servers, docs/trust.md)."""
    found: list[tuple[int, Any, bytes]] = []
    for type_ in PLACING:
        subject = f"{log.layout.prefix}.{INSTANCE_KIND}.*.{type_}"
        start = after + 1
        while start <= upto:
            msgs = log.read_messages(start, 1000, stop=upto, subject_filter=subject)
            if not msgs:
                break
            found += [(position_of(m), m.headers or {}, bytes(m.data)) for m in msgs]
            start = position_of(msgs[-1]) + 1
    return sorted(found, key=lambda f: f[0])
