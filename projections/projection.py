"""Applying the log to the read models: exactly once, one PostgreSQL transaction per batch.

``ReadModels`` is an eventsourcing ``Projection``: ``process_event`` dispatches each domain event
class to a pure function of ``projections.apply``. Its view, ``ReadModelView``, is a
``TrackingRecorder`` over one schema's tables that holds the rows a batch touches in memory.

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

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID

import psycopg
from eventsourcing.dispatch import singledispatchmethod
from eventsourcing.persistence import Mapper, Tracking, TrackingRecorder
from eventsourcing.projection import Projection
from eventsourcing.utils import get_topic
from psycopg import sql
from psycopg.types.json import Jsonb

from commands.flavor import Flavor
from commands.host import Host
from commands.instance import Instance
from projections import apply, identity, metadefs, migrations, operations
from projections.catalog import HANDLED as CATALOG_EVENTS
from projections.catalog import statements as catalog_statements
from projections.schema import (
    CLAIM_COLUMNS,
    FLAVOR_COLUMNS,
    HOST_COLUMNS,
    INSTANCE_COLUMNS,
    LIVE_SCHEMA,
    POSITION_CHANNEL,
    WRITER_LOCK,
)
from stratus.eventstore import EventStoreUnavailable
from stratus.eventstore.envelope import decode_message
from stratus.quarantine import Quarantine, described
from stratus.serialization import dumps

log = logging.getLogger("stratus.projector")

Row = dict[str, Any]
ClaimKey = tuple[UUID, str]

# How long a projector following the log lets commits gather after being woken by one (``run``).
LINGER_SECONDS = 0.02

# The domain's event classes are made by eventsourcing's @event decorator, out of mypy's sight.
InstanceRequested: type = Instance.Requested  # type: ignore[attr-defined]
InstanceScheduled: type = Instance.Scheduled  # type: ignore[attr-defined]
InstanceFaulted: type = Instance.Faulted  # type: ignore[attr-defined]
InstanceSpawningStarted: type = Instance.SpawningStarted  # type: ignore[attr-defined]
InstanceSpawned: type = Instance.Spawned  # type: ignore[attr-defined]
InstanceDeletionRequested: type = Instance.DeletionRequested  # type: ignore[attr-defined]
InstanceDeleted: type = Instance.Deleted  # type: ignore[attr-defined]
InstanceUpdated: type = Instance.Updated  # type: ignore[attr-defined]
InstanceMetadataUpdated: type = Instance.MetadataUpdated  # type: ignore[attr-defined]
InstanceTagsUpdated: type = Instance.TagsUpdated  # type: ignore[attr-defined]
InstanceActionRequested: type = Instance.ActionRequested  # type: ignore[attr-defined]
InstanceActionFinished: type = Instance.ActionFinished  # type: ignore[attr-defined]
InstanceActionFailed: type = Instance.ActionFailed  # type: ignore[attr-defined]
InstancePowerStateSynced: type = Instance.PowerStateSynced  # type: ignore[attr-defined]
InstanceLocked: type = Instance.Locked  # type: ignore[attr-defined]
InstanceImageChanged: type = Instance.ImageChanged  # type: ignore[attr-defined]
InstanceBootDataChanged: type = Instance.BootDataChanged  # type: ignore[attr-defined]
InstanceStateReset: type = Instance.StateReset  # type: ignore[attr-defined]
InstanceZonePinned: type = Instance.ZonePinned  # type: ignore[attr-defined]
InstanceOffloaded: type = Instance.Offloaded  # type: ignore[attr-defined]
InstanceUnshelveRequested: type = Instance.UnshelveRequested  # type: ignore[attr-defined]
InstanceUnlocked: type = Instance.Unlocked  # type: ignore[attr-defined]
InstanceUnshelveFailed: type = Instance.UnshelveFailed  # type: ignore[attr-defined]
HostRegistered: type = Host.Registered  # type: ignore[attr-defined]
HostInstanceClaimed: type = Host.InstanceClaimed  # type: ignore[attr-defined]
HostInstanceReleased: type = Host.InstanceReleased  # type: ignore[attr-defined]
FlavorCreated: type = Flavor.Created  # type: ignore[attr-defined]
FlavorDeleted: type = Flavor.Deleted  # type: ignore[attr-defined]


class EventLog(Protocol):
    """What the projector needs of the event store (``stratus.eventstore``'s recorder)."""

    def read_messages(
        self, start: int, limit: int, *, stop: int | None = None, subject_filter: str | None = None
    ) -> list[Any]: ...

    def max_notification_id(self) -> int | None: ...

    def wait_for_position(self, gt: int, timeout: float) -> int: ...


# -- the view -------------------------------------------------------------------------------------
@dataclass
class _WorkingSet:
    instances: dict[UUID, Row] = field(default_factory=dict)
    hosts: dict[UUID, Row] = field(default_factory=dict)
    claims: dict[ClaimKey, Row | None] = field(default_factory=dict)
    flavors: dict[UUID, Row] = field(default_factory=dict)
    dirty_instances: set[UUID] = field(default_factory=set)
    dirty_hosts: set[UUID] = field(default_factory=set)
    dirty_claims: set[ClaimKey] = field(default_factory=set)
    dirty_flavors: set[UUID] = field(default_factory=set)
    # Writes that need no row read first (the identity tables), run in order after the others.
    statements: list[identity.Statement] = field(default_factory=list)
    position: int | None = None


@dataclass(frozen=True)
class Keys:
    """The rows a batch of events may read, loaded in one query per table before it is applied."""

    instances: frozenset[UUID] = frozenset()
    hosts: frozenset[UUID] = frozenset()
    claims: frozenset[ClaimKey] = frozenset()
    flavors: frozenset[UUID] = frozenset()


class ReadModelView(TrackingRecorder):
    """The read-model tables of one schema, seen through the rows of the batch being applied.

    ``load`` fills the working set inside the batch's transaction, the projection reads and
    replaces rows in memory, and ``flush`` writes the changed ones and the tracking position.
    """

    def __init__(self, conn: psycopg.Connection[Any], schema: str = LIVE_SCHEMA) -> None:
        self.conn = conn
        self.schema = schema
        self._s = sql.Identifier(schema)
        self._ws: _WorkingSet | None = None

    # -- TrackingRecorder ---------------------------------------------------------------------
    def max_tracking_id(self, application_name: str) -> int | None:
        row = self.conn.execute(sql.SQL("SELECT position FROM {}.tracking").format(self._s)).fetchone()
        return int(row[0]) if row else None

    def insert_tracking(self, tracking: Tracking) -> None:
        """Within a batch, the position is written by ``flush``; outside one, at once."""
        if self._ws is not None:
            self._ws.position = max(self._ws.position or 0, tracking.notification_id)
            return
        self.conn.execute(
            sql.SQL("UPDATE {}.tracking SET position = %s, updated_at = now() WHERE position < %s").format(
                self._s
            ),
            (tracking.notification_id, tracking.notification_id),
        )

    # -- the batch's working set --------------------------------------------------------------
    def load(self, keys: Keys) -> None:
        """Fetch the rows ``keys`` names: one query per table, all sent in one round trip."""
        ws = self._ws = _WorkingSet()
        with self.conn.pipeline():
            instances = self._select("instances", INSTANCE_COLUMNS, "id = ANY(%s)", keys.instances)
            hosts = self._select("hosts", HOST_COLUMNS, "id = ANY(%s)", keys.hosts)
            pairs = list(keys.claims)
            where = "(host_id, instance_id) IN (SELECT * FROM unnest(%s::uuid[], %s::text[]))"
            by_pair = ([h for h, _ in pairs], [i for _, i in pairs])
            claims = self._select("host_claims", CLAIM_COLUMNS, where, keys.claims, *by_pair)
            flavors = self._select("flavors", FLAVOR_COLUMNS, "id = ANY(%s)", keys.flavors)
        ws.instances = {row["id"]: row for row in _rows(instances)}
        ws.hosts = {row["id"]: row for row in _rows(hosts)}
        ws.claims = {(row["host_id"], row["instance_id"]): row for row in _rows(claims)}
        ws.flavors = {row["id"]: row for row in _rows(flavors)}

    def _select(
        self, table: str, columns: Sequence[str], where: str, keys: frozenset[Any], *params: Any
    ) -> psycopg.Cursor[Row] | None:
        """Send the query (in pipeline mode its rows are fetched later); None when no key asks for it."""
        if not keys:
            return None
        query = sql.SQL("SELECT {} FROM {}.{} WHERE {}").format(
            sql.SQL(", ").join(map(sql.Identifier, columns)),
            self._s,
            sql.Identifier(table),
            sql.SQL(where),  # type: ignore[arg-type]
        )
        cur = self.conn.cursor(row_factory=psycopg.rows.dict_row)
        cur.execute(query, params or (list(keys),))
        return cur

    @property
    def ws(self) -> _WorkingSet:
        if self._ws is None:
            raise RuntimeError("the view is used outside a batch")
        return self._ws

    def instance(self, instance_id: UUID) -> Row | None:
        return self.ws.instances.get(instance_id)

    def put_instance(self, row: Row, tracking: Tracking) -> None:
        self.ws.instances[row["id"]] = row
        self.ws.dirty_instances.add(row["id"])
        self.insert_tracking(tracking)

    def host(self, host_id: UUID) -> Row | None:
        return self.ws.hosts.get(host_id)

    def put_host(self, row: Row, tracking: Tracking) -> None:
        self.ws.hosts[row["id"]] = row
        self.ws.dirty_hosts.add(row["id"])
        self.insert_tracking(tracking)

    def claim(self, host_id: UUID, instance_id: str) -> Row | None:
        return self.ws.claims.get((host_id, instance_id))

    def put_claim(self, row: Row) -> None:
        key = (row["host_id"], row["instance_id"])
        self.ws.claims[key] = row
        self.ws.dirty_claims.add(key)

    def drop_claim(self, host_id: UUID, instance_id: str) -> None:
        key = (host_id, instance_id)
        self.ws.claims[key] = None
        self.ws.dirty_claims.add(key)

    def flavor(self, flavor_uuid: UUID) -> Row | None:
        return self.ws.flavors.get(flavor_uuid)

    def put_flavor(self, row: Row, tracking: Tracking) -> None:
        self.ws.flavors[row["id"]] = row
        self.ws.dirty_flavors.add(row["id"])
        self.insert_tracking(tracking)

    def execute(self, statements: Iterable[identity.Statement], tracking: Tracking) -> None:
        self.ws.statements.extend(statements)
        self.insert_tracking(tracking)

    def flush(self, position: int) -> None:
        """Write every changed row, then the tracking position and its NOTIFY (delivered at commit)."""
        with self.conn.pipeline():
            self._write(position)
        self._ws = None

    def _write(self, position: int) -> None:
        ws = self.ws
        self._upsert("instances", INSTANCE_COLUMNS, ("id",), [ws.instances[k] for k in ws.dirty_instances])
        self._upsert("hosts", HOST_COLUMNS, ("id",), [ws.hosts[k] for k in ws.dirty_hosts])
        self._upsert("flavors", FLAVOR_COLUMNS, ("flavorid",), [ws.flavors[k] for k in ws.dirty_flavors])
        kept = [row for k in ws.dirty_claims if (row := ws.claims[k]) is not None]
        gone = [k for k in ws.dirty_claims if ws.claims[k] is None]
        self._upsert("host_claims", CLAIM_COLUMNS, ("host_id", "instance_id"), kept)
        if gone:
            with self.conn.cursor() as cur:
                cur.executemany(
                    sql.SQL("DELETE FROM {}.host_claims WHERE host_id = %s AND instance_id = %s").format(
                        self._s
                    ),
                    gone,
                )
        for statement, params in ws.statements:
            self.conn.execute(sql.SQL(statement).format(s=self._s), params)  # type: ignore[arg-type]
        self.conn.execute(
            sql.SQL("UPDATE {}.tracking SET position = %s, updated_at = now()").format(self._s), (position,)
        )
        self.conn.execute("SELECT pg_notify(%s, %s)", (POSITION_CHANNEL, str(position)))

    def discard(self) -> None:
        self._ws = None

    def _upsert(self, table: str, columns: Sequence[str], key: Sequence[str], rows: list[Row]) -> None:
        if not rows:
            return
        updates = [c for c in columns if c not in key]
        query = sql.SQL("INSERT INTO {}.{} ({}) VALUES ({}) ON CONFLICT ({}) DO UPDATE SET {}").format(
            self._s,
            sql.Identifier(table),
            sql.SQL(", ").join(map(sql.Identifier, columns)),
            sql.SQL(", ").join(sql.Placeholder() * len(columns)),
            sql.SQL(", ").join(map(sql.Identifier, key)),
            sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in updates),
        )
        with self.conn.cursor() as cur:
            cur.executemany(query, [tuple(_adapt(row[c]) for c in columns) for row in rows])


def _rows(cur: psycopg.Cursor[Row] | None) -> list[Row]:
    if cur is None:
        return []
    with cur:
        return cur.fetchall()


def _adapt(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return Jsonb(value, dumps=_dumps_str)
    return value


def _dumps_str(obj: Any) -> str:
    return dumps(obj).decode()


# -- the projection -------------------------------------------------------------------------------
class ReadModels(Projection[ReadModelView]):
    """Instances, hosts (with their claims) and flavors, from the domain's events."""

    name = "stratus_rm"
    handled: tuple[type, ...] = (
        InstanceRequested, InstanceScheduled, InstanceFaulted, InstanceSpawningStarted, InstanceSpawned,
        InstanceDeletionRequested, InstanceDeleted,
        InstanceUpdated, InstanceMetadataUpdated, InstanceTagsUpdated,
        InstanceActionRequested, InstanceActionFinished, InstanceActionFailed, InstancePowerStateSynced,
        InstanceLocked, InstanceUnlocked, InstanceImageChanged, InstanceBootDataChanged, InstanceOffloaded,
        InstanceUnshelveRequested, InstanceUnshelveFailed, InstanceStateReset, InstanceZonePinned,
        *migrations.INSTANCE_EVENTS,
        HostRegistered, HostInstanceClaimed, HostInstanceReleased, *migrations.HOST_EVENTS,
        FlavorCreated, FlavorDeleted,
        *identity.HANDLED,
        *CATALOG_EVENTS,
        *operations.HANDLED,
        *metadefs.HANDLED,
    )  # fmt: skip
    topics: tuple[str, ...] = tuple(get_topic(cls) for cls in handled)

    @staticmethod
    def keys(events: Iterable[Any]) -> Keys:
        instances: set[UUID] = set()
        hosts: set[UUID] = set()
        claims: set[ClaimKey] = set()
        flavors: set[UUID] = set()
        for e in events:
            if isinstance(e, Instance.Event):
                instances.add(e.originator_id)
            elif isinstance(e, Host.Event):
                hosts.add(e.originator_id)
                if isinstance(e, HostInstanceReleased):
                    claims.add((e.originator_id, e.instance_id))  # type: ignore[attr-defined]
                elif isinstance(e, migrations.HOST_EVENTS):
                    claims.update((e.originator_id, k) for k in migrations.claim_keys(e))
            elif isinstance(e, Flavor.Event):
                flavors.add(e.originator_id)
        return Keys(frozenset(instances), frozenset(hosts), frozenset(claims), frozenset(flavors))

    @singledispatchmethod
    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """Identity events become their statements; others the read models do not show change
        nothing but the tracking position."""
        at = tracking.notification_id
        statements = (
            identity.statements(domain_event, at)
            or operations.statements(domain_event, at)
            or metadefs.statements(domain_event, at)
        )
        self.view.execute(statements, tracking)

    # -- instances ----------------------------------------------------------------------------
    @process_event.register(InstanceRequested)
    def _(self, e: Any, tracking: Tracking) -> None:
        self.view.put_instance(apply.instance_requested(e, tracking.notification_id), tracking)

    @process_event.register(InstanceScheduled)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_scheduled, e, tracking)

    @process_event.register(InstanceFaulted)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_faulted, e, tracking)

    @process_event.register(InstanceSpawningStarted)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_spawning_started, e, tracking)

    @process_event.register(InstanceSpawned)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_spawned, e, tracking)

    @process_event.register(InstanceDeletionRequested)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_deletion_requested, e, tracking)

    @process_event.register(InstanceDeleted)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_deleted, e, tracking)

    @process_event.register(InstanceActionRequested)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_action_requested, e, tracking)

    @process_event.register(InstanceActionFinished)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_action_finished, e, tracking)

    @process_event.register(InstanceActionFailed)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_action_failed, e, tracking)

    @process_event.register(InstancePowerStateSynced)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_power_state_synced, e, tracking)

    def _instance(self, fn: Any, e: Any, tracking: Tracking) -> None:
        row = self.view.instance(e.originator_id)
        if row is None:  # an event of an instance whose creation the log does not hold
            self.view.insert_tracking(tracking)
            return
        self.view.put_instance(fn(row, e, tracking.notification_id), tracking)

    @process_event.register(InstanceUpdated)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_updated, e, tracking)

    @process_event.register(InstanceMetadataUpdated)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_metadata_updated, e, tracking)

    @process_event.register(InstanceTagsUpdated)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_tags_updated, e, tracking)

    @process_event.register(InstanceOffloaded)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_offloaded, e, tracking)

    @process_event.register(InstanceUnshelveRequested)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_unshelve_requested, e, tracking)

    @process_event.register(InstanceUnshelveFailed)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_unshelve_failed, e, tracking)

    @process_event.register(InstanceImageChanged)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_image_changed, e, tracking)

    @process_event.register(InstanceZonePinned)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_zone_pinned, e, tracking)

    @process_event.register(InstanceStateReset)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_state_reset, e, tracking)

    @process_event.register(InstanceBootDataChanged)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_boot_data_changed, e, tracking)

    @process_event.register(InstanceLocked)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_locked, e, tracking)

    @process_event.register(InstanceUnlocked)
    def _(self, e: Any, tracking: Tracking) -> None:
        self._instance(apply.instance_unlocked, e, tracking)

    # -- images and key pairs (projections.catalog: statements, no row read first) ------------
    def _catalog(self, e: Any, tracking: Tracking) -> None:
        self.view.execute(catalog_statements(e, tracking.notification_id), tracking)

    for _event_class in CATALOG_EVENTS:
        process_event.register(_event_class)(_catalog)
    del _event_class

    # -- hosts --------------------------------------------------------------------------------
    @process_event.register(HostRegistered)
    def _(self, e: Any, tracking: Tracking) -> None:
        self.view.put_host(apply.host_registered(e, tracking.notification_id), tracking)

    @process_event.register(HostInstanceClaimed)
    def _(self, e: Any, tracking: Tracking) -> None:
        host = self.view.host(e.originator_id)
        if host is None:
            self.view.insert_tracking(tracking)
            return
        host, claim = apply.instance_claimed(host, e, tracking.notification_id)
        self.view.put_claim(claim)
        self.view.put_host(host, tracking)

    @process_event.register(HostInstanceReleased)
    def _(self, e: Any, tracking: Tracking) -> None:
        host = self.view.host(e.originator_id)
        if host is None:
            self.view.insert_tracking(tracking)
            return
        claim = self.view.claim(e.originator_id, e.instance_id)
        self.view.drop_claim(e.originator_id, e.instance_id)
        self.view.put_host(apply.instance_released(host, claim, e, tracking.notification_id), tracking)

    # -- resizes and migrations (projections.migrations) --------------------------------------
    def _moved(self, e: Any, tracking: Tracking) -> None:
        row = self.view.instance(e.originator_id)
        if row is None:
            self.view.insert_tracking(tracking)
            return
        at = tracking.notification_id
        self.view.put_instance(migrations.instance_row(row, e, at), tracking)
        self.view.execute(migrations.statements(row, e, at), tracking)

    for _event_class in migrations.INSTANCE_EVENTS:
        process_event.register(_event_class)(_moved)
    del _event_class

    def _claim_moved(self, e: Any, tracking: Tracking) -> None:
        host = self.view.host(e.originator_id)
        if host is None:
            self.view.insert_tracking(tracking)
            return
        at = tracking.notification_id
        if type(e) in (migrations.MigrationReleased,):
            claim = self.view.claim(e.originator_id, e.migration_id)
            self.view.drop_claim(e.originator_id, e.migration_id)
            self.view.put_host(migrations.migration_released(host, claim, e, at), tracking)
            return
        keys = migrations.claim_keys(e)
        old = keys[0] if type(e) in (migrations.ClaimHandedToMigration,) else keys[1]
        host, moved, left = migrations.moved_claim(host, self.view.claim(e.originator_id, old), e, at)
        self.view.drop_claim(e.originator_id, left)
        if moved is not None:
            self.view.put_claim(moved)
        self.view.put_host(host, tracking)

    for _event_class in migrations.HOST_EVENTS:
        process_event.register(_event_class)(_claim_moved)
    del _event_class

    # -- flavors ------------------------------------------------------------------------------
    @process_event.register(FlavorCreated)
    def _(self, e: Any, tracking: Tracking) -> None:
        self.view.put_flavor(apply.flavor_created(e, tracking.notification_id), tracking)

    @process_event.register(FlavorDeleted)
    def _(self, e: Any, tracking: Tracking) -> None:
        row = self.view.flavor(e.originator_id)
        if row is None:
            self.view.insert_tracking(tracking)
            return
        self.view.put_flavor(apply.flavor_deleted(row, e, tracking.notification_id), tracking)


# -- the batch loop -------------------------------------------------------------------------------
@dataclass(frozen=True)
class BatchResult:
    applied: bool  # False: the tracking position was not where the batch starts; nothing written
    position: int  # the tracking position after the call (where to read the log from next)
    events: int = 0  # log entries the batch covered
    processed: int = 0  # of which domain events the read models show


@dataclass(frozen=True)
class Entry:
    """One log entry of a batch: its decoded domain event if the read models show it, or why it
    could not be decoded (then it is quarantined, never applied)."""

    position: int
    topic: str
    originator_id: str
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

    @property
    def events(self) -> list[tuple[Any, Tracking]]:
        return [(e.event, Tracking(self.name, e.position)) for e in self.entries if e.event is not None]

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
    applied, a reader thread already fetches and decodes the next one.
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
    ) -> None:
        if not conn.autocommit:
            raise ValueError("the projector needs an autocommit connection (one transaction per batch)")
        self.log = log
        self.mapper = mapper
        self.conn = conn
        self.schema = schema
        self.batch_size = batch_size
        self.lock = lock
        self.view = ReadModelView(conn, schema)
        self.projection = ReadModels(self.view)
        self._topics = frozenset(ReadModels.topics)
        self.quarantine = quarantine
        self.part = part

    def position(self) -> int:
        return self.view.max_tracking_id(self.projection.name) or 0

    def read(self, after: int, limit: int | None = None) -> list[Any]:
        """The log's messages after position ``after`` (as stored: decoded by ``fetch``)."""
        return self.log.read_messages(after + 1, limit or self.batch_size)

    def fetch(self, after: int) -> Batch:
        """Read the next batch after ``after`` and decode the events the read models show (pure)."""
        return self._decoded(after, self.read(after))

    def _decoded(self, after: int, msgs: Sequence[Any]) -> Batch:
        return Batch(after, [self._entry(m) for m in msgs], self.projection.name)

    def _entry(self, msg: Any) -> Entry:
        """One message as an entry; one that cannot be decoded is kept with its error (to quarantine)."""
        try:
            notification, envelope = decode_message(msg)
        except Exception as e:  # a garbled envelope: whatever decoding raises is this event's fault
            position, topic, originator = described(msg)
            return Entry(position, topic, originator, error=e)
        entry = Entry(notification.id, envelope.topic, str(envelope.originator_id))
        if notification.topic not in self._topics:
            return entry
        try:
            event = self.mapper.to_domain_event(notification)
        except Exception as e:  # decoding and upcasting are pure: a failure is the event's own
            return Entry(entry.position, entry.topic, entry.originator_id, error=e)
        return Entry(entry.position, entry.topic, entry.originator_id, event=event)

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
        at, topic, originator = entry.position, entry.topic, entry.originator_id
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
        with self.conn.pipeline(), self.conn.transaction():
            if self.lock:
                self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
            row = self.conn.execute(
                sql.SQL("SELECT position FROM {}.tracking FOR UPDATE").format(sql.Identifier(self.schema))
            ).fetchone()
            current = int(row[0]) if row else 0
            if current != batch.after:
                return BatchResult(False, current)
            try:
                self.view.load(ReadModels.keys(e for e, _ in batch.events))
                for event, tracking in batch.events:
                    self.projection.process_event(event, tracking)
                self.view.flush(batch.last)
            finally:
                self.view.discard()
        return BatchResult(True, batch.last, len(batch.entries), len(batch.events))

    def step(self, after: int) -> BatchResult:
        """Read the next batch after ``after`` and apply it."""
        return self.apply_batch(self.fetch(after))

    def catch_up(self, until: int | None = None) -> int:
        """Apply batches until the log has nothing more (or ``until`` is reached); the final position."""
        stop = threading.Event()
        return self._follow(stop, until=until)

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
                position = self.apply_batch(batch).position
            ahead.cancel()
        return position
