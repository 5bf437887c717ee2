"""The read models' dispatch: one table, ``RULES``, from event class to what the event does to them.

A ``Rule`` says which rows an event reads (loaded for its whole batch, one query per table, before
the batch is applied) and how it changes the read models: a row through a pure function of
``projections.apply`` or ``projections.migrations``, or SQL statements from the tables written
without reading (``projections.statements``: identity, images, key pairs, metadata definitions,
the operator-facing tables). ``ReadModels``, the eventsourcing ``Projection``, looks each event up in
the table; its ``topics`` (the events the projector decodes) and the rows a batch loads (``keys``)
are computed from it, so declaring a projection is adding a line to the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from eventsourcing.persistence import Tracking
from eventsourcing.projection import Projection
from eventsourcing.utils import get_topic

from commands.flavor import Flavor
from commands.host import Host
from commands.instance import Instance
from projections import apply, identity, images, keypairs, metadefs, migrations, operations
from projections.statements import Statements
from projections.view import Keys, ReadModelView, Row

Apply = Callable[[ReadModelView, Any, int], None]  # (the batch's view, the event, its log position)
RowKey = tuple[str, Any]  # a row an event reads: ("instances" | "hosts" | "claims" | "flavors", key)


def _nothing(e: Any) -> Iterable[RowKey]:
    return ()


@dataclass(frozen=True)
class _Own:
    """The row of the event's own aggregate in ``table`` (what most events read: ``ReadModels.keys``
    takes their ids without a call per event)."""

    table: str

    def __call__(self, e: Any) -> Iterable[RowKey]:
        return ((self.table, e.originator_id),)


def _own(table: str) -> Callable[[Any], Iterable[RowKey]]:
    """The row of the event's own aggregate in ``table``."""
    return _Own(table)


@dataclass(frozen=True)
class Rule:
    """What one event class does to the read models: ``apply`` it to the batch's view, after the
    rows ``reads`` names (for one event) have been loaded with the batch's others."""

    apply: Apply
    reads: Callable[[Any], Iterable[RowKey]] = _nothing


# -- rows: read, changed by a pure function, written back --------------------------------------------
def _instance_requested(view: ReadModelView, e: Instance.Requested, at: int) -> None:
    view.put_instance(apply.instance_requested(e, at))


def _instance(change: Callable[[Row, Any, int], Row]) -> Rule:
    """An instance event: the instance's row as ``change`` makes it. An event of an instance whose
    creation the log does not hold changes nothing (but the tracking position, as every event)."""

    def apply_(view: ReadModelView, e: Any, at: int) -> None:
        row = view.instance(e.originator_id)
        if row is not None:
            view.put_instance(change(row, e, at))

    return Rule(apply_, _own("instances"))


def _moved(move: migrations.Move) -> Rule:
    """A resize's or migration's event: the instance row and the ``migrations`` row."""

    def apply_(view: ReadModelView, e: Any, at: int) -> None:
        row = view.instance(e.originator_id)
        if row is not None:
            view.put_instance(move.instance(row, e, at))
            view.execute(move.migration(row, e, at))

    return Rule(apply_, _own("instances"))


def _host_registered(view: ReadModelView, e: Host.Registered, at: int) -> None:
    view.put_host(apply.host_registered(e, at))


HostChange = Callable[[ReadModelView, Row, Any, int], Row]  # (view, host row, event, position) -> row


def _host(change: HostChange) -> Apply:
    """A host event: the host's row as ``change`` makes it (``change`` moves the host's claims in the
    view too). An event of a host the log never registered changes nothing but the position."""

    def apply_(view: ReadModelView, e: Any, at: int) -> None:
        host = view.host(e.originator_id)
        if host is not None:
            view.put_host(change(view, host, e, at))

    return apply_


def _instance_claimed(view: ReadModelView, host: Row, e: Host.InstanceClaimed, at: int) -> Row:
    host, claim = apply.instance_claimed(host, e, at)
    view.put_claim(claim)
    return host


def _released(consumer: str, release: Callable[[Row, Row | None, Any, int], Row]) -> HostChange:
    """A claim given up by the consumer the event's field ``consumer`` names (an instance, or a
    migration): its row goes, and ``release`` counts it off the host."""

    def change(view: ReadModelView, host: Row, e: Any, at: int) -> Row:
        consumer_id = getattr(e, consumer)
        claim = view.claim(e.originator_id, consumer_id)
        view.drop_claim(e.originator_id, consumer_id)
        return release(host, claim, e, at)

    return change


def _claim_moved(view: ReadModelView, host: Row, e: Any, at: int) -> Row:
    """A claim handed from an instance to its migration, or taken back (``Host.ClaimHandedToMigration``,
    ``Host.ClaimTakenBack``): the claim row under its new consumer id."""
    old = e.instance_id if isinstance(e, Host.ClaimHandedToMigration) else e.migration_id
    host, moved, left = migrations.moved_claim(host, view.claim(e.originator_id, old), e, at)
    view.drop_claim(e.originator_id, left)
    if moved is not None:
        view.put_claim(moved)
    return host


def _host_and_claims(*consumers: str) -> Callable[[Any], Iterable[RowKey]]:
    """The host's row and its claims by the consumer ids the event's fields ``consumers`` name."""
    return lambda e: (
        ("hosts", e.originator_id),
        *(("claims", (e.originator_id, getattr(e, c))) for c in consumers),
    )


def _flavor_created(view: ReadModelView, e: Flavor.Created, at: int) -> None:
    view.put_flavor(apply.flavor_created(e, at))


def _flavor_deleted(view: ReadModelView, e: Flavor.Deleted, at: int) -> None:
    row = view.flavor(e.originator_id)
    if row is not None:
        view.put_flavor(apply.flavor_deleted(row, e, at))


# -- statements: computed from the event alone, run after the batch's rows -----------------------------
def _statements(statements: Statements) -> Rule:
    def apply_(view: ReadModelView, e: Any, at: int) -> None:
        view.execute(statements(e, at))

    return Rule(apply_)


def _one_rule_each(*tables: Mapping[type, Rule]) -> dict[type, Rule]:
    """The tables merged into one; an event class in two of them is a mistake (one would win)."""
    merged: dict[type, Rule] = {}
    for table in tables:
        twice = merged.keys() & table.keys()
        if twice:
            raise TypeError(f"event classes with two rules: {sorted(c.__qualname__ for c in twice)}")
        merged.update(table)
    return merged


_ROWS: dict[type, Rule] = {
    # instances
    Instance.Requested: Rule(_instance_requested),
    Instance.Scheduled: _instance(apply.instance_scheduled),
    Instance.Faulted: _instance(apply.instance_faulted),
    Instance.SpawningStarted: _instance(apply.instance_spawning_started),
    Instance.Spawned: _instance(apply.instance_spawned),
    Instance.DeletionRequested: _instance(apply.instance_deletion_requested),
    Instance.Deleted: _instance(apply.instance_deleted),
    Instance.Updated: _instance(apply.instance_updated),
    Instance.MetadataUpdated: _instance(apply.instance_metadata_updated),
    Instance.TagsUpdated: _instance(apply.instance_tags_updated),
    Instance.ActionRequested: _instance(apply.instance_action_requested),
    Instance.ActionFinished: _instance(apply.instance_action_finished),
    Instance.ActionFailed: _instance(apply.instance_action_failed),
    Instance.PowerStateSynced: _instance(apply.instance_power_state_synced),
    Instance.Locked: _instance(apply.instance_locked),
    Instance.Unlocked: _instance(apply.instance_unlocked),
    Instance.ImageChanged: _instance(apply.instance_image_changed),
    Instance.BootDataChanged: _instance(apply.instance_boot_data_changed),
    Instance.Offloaded: _instance(apply.instance_offloaded),
    Instance.UnshelveRequested: _instance(apply.instance_unshelve_requested),
    Instance.UnshelveFailed: _instance(apply.instance_unshelve_failed),
    Instance.StateReset: _instance(apply.instance_state_reset),
    Instance.ZonePinned: _instance(apply.instance_zone_pinned),
    # hosts and their claims
    Host.Registered: Rule(_host_registered),
    Host.InstanceClaimed: Rule(_host(_instance_claimed), _own("hosts")),
    Host.InstanceReleased: Rule(
        _host(_released("instance_id", apply.instance_released)), _host_and_claims("instance_id")
    ),
    Host.ClaimHandedToMigration: Rule(_host(_claim_moved), _host_and_claims("instance_id", "migration_id")),
    Host.ClaimTakenBack: Rule(_host(_claim_moved), _host_and_claims("instance_id", "migration_id")),
    Host.MigrationReleased: Rule(
        _host(_released("migration_id", migrations.migration_released)), _host_and_claims("migration_id")
    ),
    # flavors
    Flavor.Created: Rule(_flavor_created),
    Flavor.Deleted: Rule(_flavor_deleted, _own("flavors")),
}
RULES: dict[type, Rule] = _one_rule_each(
    _ROWS,
    {cls: _moved(move) for cls, move in migrations.INSTANCE_MOVES.items()},  # resizes and migrations
    *(
        {cls: _statements(statements) for cls, statements in table.items()}
        for table in (identity.APPLY, images.APPLY, keypairs.APPLY, operations.APPLY, metadefs.APPLY)
    ),
)
_TRACK_ONLY = Rule(lambda view, e, at: None)  # an event the read models do not show
# ``RULES``' reads by event class: the table of the event's own row, or (another row or several)
# the rule's ``reads``; an event class in neither reads nothing
_OWN_TABLE: dict[type, str] = {cls: r.reads.table for cls, r in RULES.items() if isinstance(r.reads, _Own)}
_OTHER_READS: dict[type, Callable[[Any], Iterable[RowKey]]] = {
    cls: r.reads for cls, r in RULES.items() if not isinstance(r.reads, _Own) and r.reads is not _nothing
}


class ReadModels(Projection[ReadModelView]):
    """The read models (instances, hosts with their claims, flavors, and the tables written by
    statements) as a projection of the domain's events: each event applied by its ``RULES`` entry."""

    name = "stratus_rm"
    handled: tuple[type, ...] = tuple(RULES)
    topics: tuple[str, ...] = tuple(get_topic(cls) for cls in handled)

    @staticmethod
    def keys(events: Iterable[Any]) -> Keys:
        """The rows the ``events`` of one batch read, per table."""
        wanted: dict[str, set[Any]] = {"instances": set(), "hosts": set(), "claims": set(), "flavors": set()}
        own, other = _OWN_TABLE, _OTHER_READS
        for e in events:
            table = own.get(type(e))
            if table is not None:  # ``RULES``' reads looked up per class, once (``_OWN_TABLE``)
                wanted[table].add(e.originator_id)
            elif (reads := other.get(type(e))) is not None:
                for table, key in reads(e):
                    wanted[table].add(key)
        return Keys(**{table: frozenset(keys) for table, keys in wanted.items()})

    def process_event(self, domain_event: Any, tracking: Tracking) -> None:
        """Apply ``domain_event``; one the read models do not show moves only the tracking position."""
        self.apply_at(domain_event, tracking.notification_id)
        self.view.insert_tracking(tracking)

    def apply_at(self, domain_event: Any, position: int) -> None:
        """``process_event`` with the event's log position alone (what the projector calls: no
        ``Tracking`` made per event)."""
        RULES.get(type(domain_event), _TRACK_ONLY).apply(self.view, domain_event, position)
