"""Resizes and cold migrations in the read models: the instance row, the hosts' claims, and the
``migrations`` table (os-migrations), from the Instance's and the Host's move events.

Pure functions like ``projections.apply``: rows in, rows (or statements) out.
"""

from __future__ import annotations

from typing import Any

from commands.host import Host
from commands.instance import Instance
from commands.states import TaskState
from projections.apply import Row, _instance, _touched, fault_of
from projections.identity import Statement

MigrationRequested: type = Instance.MigrationRequested  # type: ignore[attr-defined]
MigrationScheduled: type = Instance.MigrationScheduled  # type: ignore[attr-defined]
MigratedFromSource: type = Instance.MigratedFromSource  # type: ignore[attr-defined]
MigrationFinished: type = Instance.MigrationFinished  # type: ignore[attr-defined]
MigrationFailed: type = Instance.MigrationFailed  # type: ignore[attr-defined]
ResizeConfirmed: type = Instance.ResizeConfirmed  # type: ignore[attr-defined]
RevertRequested: type = Instance.RevertRequested  # type: ignore[attr-defined]
RevertedOnDest: type = Instance.RevertedOnDest  # type: ignore[attr-defined]
ResizeReverted: type = Instance.ResizeReverted  # type: ignore[attr-defined]
INSTANCE_EVENTS: tuple[type, ...] = (
    MigrationRequested, MigrationScheduled, MigratedFromSource, MigrationFinished, MigrationFailed,
    ResizeConfirmed, RevertRequested, RevertedOnDest, ResizeReverted,
)  # fmt: skip

ClaimHandedToMigration: type = Host.ClaimHandedToMigration  # type: ignore[attr-defined]
ClaimTakenBack: type = Host.ClaimTakenBack  # type: ignore[attr-defined]
MigrationReleased: type = Host.MigrationReleased  # type: ignore[attr-defined]
HOST_EVENTS: tuple[type, ...] = (ClaimHandedToMigration, ClaimTakenBack, MigrationReleased)

# Nova's migration statuses after each event.
_STATUS = {
    MigrationScheduled: "migrating",
    MigratedFromSource: "post-migrating",
    MigrationFinished: "finished",
    MigrationFailed: "error",
    ResizeConfirmed: "confirmed",
    RevertRequested: "reverting",
    ResizeReverted: "reverted",
}


# -- the instance row -----------------------------------------------------------------------------
def instance_row(row: Row, e: Any, position: int) -> Row:
    cls = type(e)
    if cls is MigrationRequested:
        return _instance(row, e, position, task_state=TaskState.RESIZE_PREP)
    if cls is MigrationScheduled:
        return _instance(row, e, position, task_state=TaskState.RESIZE_MIGRATING)
    if cls is MigratedFromSource:
        return _instance(row, e, position, task_state=TaskState.RESIZE_MIGRATED)
    if cls is MigrationFinished:
        return _instance(row, e, position, host=e.dest, flavor=dict(e.flavor), vm_state="resized",
                         task_state=None, power_state=e.power_state)  # fmt: skip
    if cls is MigrationFailed:
        fault = fault_of(e)
        return _instance(row, e, position, host=e.source, flavor=dict(e.flavor), vm_state=e.vm_state,
                         task_state=None, fault=fault)  # fmt: skip
    if cls is ResizeConfirmed:
        return _instance(row, e, position, vm_state=e.vm_state)
    if cls is RevertRequested:
        return _instance(row, e, position, task_state=TaskState.RESIZE_REVERTING)
    if cls is RevertedOnDest:
        return _instance(row, e, position, host=e.source, flavor=dict(e.flavor))
    return _instance(row, e, position, vm_state=e.vm_state, task_state=None, power_state=e.power_state)


def statements(instance: Row, e: Any, position: int) -> list[Statement]:
    """The ``migrations`` row the event creates or moves on (Nova's fields and statuses)."""
    cls = type(e)
    if cls is MigrationRequested:
        target = e.target_host
        return [(
            "INSERT INTO {s}.migrations (id, number, instance_uuid, project_id, user_id, migration_type, "
            "status, source_compute, source_node, dest_compute, dest_node, dest_host, old_flavor_id, "
            "new_flavor_id, created_at, updated_at, position) "
            "VALUES (%s, %s, %s, %s, %s, %s, 'pre-migrating', %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (id) DO NOTHING",
            (e.migration_id, position, e.originator_id, instance["project_id"], instance["user_id"],
             e.migration_type, e.source, e.source, target, target, target, str(e.old_flavor["id"]),
             str(e.new_flavor["id"]), e.timestamp, e.timestamp, position),
        )]  # fmt: skip
    if cls is MigrationScheduled:
        return [(
            "UPDATE {s}.migrations SET status = 'migrating', dest_compute = %s, dest_node = %s, "
            "dest_host = %s, updated_at = %s, position = %s WHERE id = %s",
            (e.dest, e.dest, e.dest, e.timestamp, position, e.migration_id),
        )]  # fmt: skip
    status = _STATUS.get(cls)
    if status is None:
        return []
    return [(
        "UPDATE {s}.migrations SET status = %s, updated_at = %s, position = %s WHERE id = %s",
        (status, e.timestamp, position, e.migration_id),
    )]  # fmt: skip


# -- the hosts' claims ----------------------------------------------------------------------------
def claim_keys(e: Any) -> list[str]:
    """The claim rows (by consumer id) a host event reads."""
    cls = type(e)
    return [e.migration_id] if cls is MigrationReleased else [e.instance_id, e.migration_id]


def moved_claim(host: Row, claim: Row | None, e: Any, position: int) -> tuple[Row, Row | None, str]:
    """(the host, the claim under its new consumer id, the consumer id it leaves) for a hand-over or
    a take-back; the claim stays counted on the host, as one running VM less or more."""
    to_migration = type(e) is ClaimHandedToMigration
    old, new = (e.instance_id, e.migration_id) if to_migration else (e.migration_id, e.instance_id)
    moved = None if claim is None else {**claim, "instance_id": new, "position": position}
    vms = host["running_vms"] + (-1 if to_migration else 1) if claim is not None else host["running_vms"]
    return _touched(host, e, position, running_vms=vms), moved, old


def migration_released(host: Row, claim: Row | None, e: Any, position: int) -> Row:
    if claim is None:
        return _touched(host, e, position)
    return _touched(
        host,
        e,
        position,
        vcpus_used=host["vcpus_used"] - claim["vcpus"],
        memory_mb_used=host["memory_mb_used"] - claim["memory_mb"],
        disk_gb_used=host["disk_gb_used"] - claim["disk_gb"],
    )
