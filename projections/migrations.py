"""Resizes and cold migrations in the read models: the instance row, the hosts' claims, and the
``migrations`` table (os-migrations), from the Instance's and the Host's move events.

Pure functions like ``projections.apply``: rows in, rows (or statements) out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from commands.host import Host
from commands.instance import Instance
from commands.states import TaskState
from projections.apply import Row, _instance, _touched, fault_of
from projections.statements import Statement

InstanceChange = Callable[[Row, Any, int], Row]  # (the instance row, the event, its position) -> row
MigrationWrites = Callable[[Row, Any, int], list[Statement]]  # ... -> the ``migrations`` row's writes


@dataclass(frozen=True)
class Move:
    """What one of the Instance's move events does to the read models: the instance row after it,
    and the writes to its ``migrations`` row (Nova's fields and statuses)."""

    instance: InstanceChange
    migration: MigrationWrites


def _task(task_state: str) -> InstanceChange:
    return lambda row, e, position: _instance(row, e, position, task_state=task_state)


def _finished(row: Row, e: Instance.MigrationFinished, position: int) -> Row:
    return _instance(row, e, position, host=e.dest, flavor=dict(e.flavor), vm_state="resized",
                     task_state=None, power_state=e.power_state)  # fmt: skip


def _failed(row: Row, e: Instance.MigrationFailed, position: int) -> Row:
    return _instance(row, e, position, host=e.source, flavor=dict(e.flavor), vm_state=e.vm_state,
                     task_state=None, fault=fault_of(e))  # fmt: skip


def _confirmed(row: Row, e: Instance.ResizeConfirmed, position: int) -> Row:
    return _instance(row, e, position, vm_state=e.vm_state)


def _reverted_on_dest(row: Row, e: Instance.RevertedOnDest, position: int) -> Row:
    return _instance(row, e, position, host=e.source, flavor=dict(e.flavor))


def _reverted(row: Row, e: Instance.ResizeReverted, position: int) -> Row:
    return _instance(row, e, position, vm_state=e.vm_state, task_state=None, power_state=e.power_state)


def _requested(instance: Row, e: Instance.MigrationRequested, position: int) -> list[Statement]:
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


def _scheduled(instance: Row, e: Instance.MigrationScheduled, position: int) -> list[Statement]:
    return [(
        "UPDATE {s}.migrations SET status = 'migrating', dest_compute = %s, dest_node = %s, "
        "dest_host = %s, updated_at = %s, position = %s WHERE id = %s",
        (e.dest, e.dest, e.dest, e.timestamp, position, e.migration_id),
    )]  # fmt: skip


def _status(status: str | None) -> MigrationWrites:
    """The migration's status after the event (Nova's); None: the event leaves the row as it is."""

    def writes(instance: Row, e: Any, position: int) -> list[Statement]:
        if status is None:
            return []
        return [(
            "UPDATE {s}.migrations SET status = %s, updated_at = %s, position = %s WHERE id = %s",
            (status, e.timestamp, position, e.migration_id),
        )]  # fmt: skip

    return writes


# -- the instance row and the migrations table, per event ------------------------------------------
INSTANCE_MOVES: dict[type, Move] = {
    Instance.MigrationRequested: Move(_task(TaskState.RESIZE_PREP), _requested),
    Instance.MigrationScheduled: Move(_task(TaskState.RESIZE_MIGRATING), _scheduled),
    Instance.MigratedFromSource: Move(_task(TaskState.RESIZE_MIGRATED), _status("post-migrating")),
    Instance.MigrationFinished: Move(_finished, _status("finished")),
    Instance.MigrationFailed: Move(_failed, _status("error")),
    Instance.ResizeConfirmed: Move(_confirmed, _status("confirmed")),
    Instance.RevertRequested: Move(_task(TaskState.RESIZE_REVERTING), _status("reverting")),
    Instance.RevertedOnDest: Move(_reverted_on_dest, _status(None)),
    Instance.ResizeReverted: Move(_reverted, _status("reverted")),
}


# -- the hosts' claims ----------------------------------------------------------------------------
def moved_claim(
    host: Row, claim: Row | None, e: Host.ClaimHandedToMigration | Host.ClaimTakenBack, position: int
) -> tuple[Row, Row | None, str]:
    """(the host, the claim under its new consumer id, the consumer id it leaves) for a hand-over or
    a take-back; the claim stays counted on the host, as one running VM less or more."""
    to_migration = isinstance(e, Host.ClaimHandedToMigration)
    old, new = (e.instance_id, e.migration_id) if to_migration else (e.migration_id, e.instance_id)
    moved = None if claim is None else {**claim, "instance_id": new, "position": position}
    vms = host["running_vms"] + (-1 if to_migration else 1) if claim is not None else host["running_vms"]
    return _touched(host, e, position, running_vms=vms), moved, old


def migration_released(host: Row, claim: Row | None, e: Host.MigrationReleased, position: int) -> Row:
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
