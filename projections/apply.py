"""Pure functions from (read-model row, domain event) to the next row.

No I/O and no raising: each function returns new dicts keyed by the columns of
``projections.schema``. ``position`` is the event's log position, stamped on every row it touches;
``version`` is the aggregate version the row reflects.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from commands.flavor import Flavor
from commands.host import Host
from commands.instance import Instance
from commands.states import PowerState, TaskState, VmState, api_status

Row = dict[str, Any]
# A row's status from its states, each pair worked out once: an instance event makes its row's status
# (a rebuild, ~15,600 times in 20,000 events) from a few dozen pairs at most.
_status = lru_cache(maxsize=1024)(api_status)


def _touched(row: Row, event: Any, position: int, **changes: Any) -> Row:
    new = {**row, **changes, "version": event.originator_version, "position": position}
    if "updated_at" in row:
        new["updated_at"] = event.timestamp
    return new


def fault_of(event: Any, **recorded: str) -> Row:
    """The fault an event records, as the instances table keeps it (``recorded`` overrides fields)."""
    fields = {name: recorded.get(name, getattr(event, name, "")) for name in ("code", "message", "details")}
    return {**fields, "created": event.timestamp.isoformat().replace("+00:00", "Z")}


# -- instances ------------------------------------------------------------------------------------
def _instance(row: Row, event: Any, position: int, **changes: Any) -> Row:
    new = _touched(row, event, position, **changes)
    new["status"] = _status(new["vm_state"], new["task_state"])
    return new


_REQUESTED_STATUS = api_status(VmState.BUILDING, TaskState.SCHEDULING)


def instance_requested(event: Instance.Requested, position: int) -> Row:
    row: Row = {
        "id": event.originator_id,
        "name": event.name,
        "project_id": event.project_id,
        "user_id": event.user_id,
        "flavor": dict(event.flavor),
        "image_ref": event.image_ref or "",
        "metadata": dict(event.metadata or {}),
        "availability_zone": event.availability_zone,
        "description": event.description,
        "key_name": event.key_name,
        "ports": list(event.ports or []),
        "tags": list(event.tags or []),
        "reservation_id": event.reservation_id,
        "image": event.image,
        "user_data": event.user_data,
        "launch_index": event.launch_index,
        "access_ip_v4": event.access_ip_v4,
        "access_ip_v6": event.access_ip_v6,
        "hostname": event.hostname,
        "disk_config": event.disk_config,
        "config_drive": event.config_drive,
        "locked_by": None,
        "locked_reason": None,
        "vm_state": VmState.BUILDING,
        "task_state": TaskState.SCHEDULING,
        "power_state": PowerState.NOSTATE,
        "host": None,
        "fault": None,
        "created_at": event.timestamp,
        "updated_at": event.timestamp,
        "launched_at": None,
        "deleted_at": None,
        "deleted": False,
        # what ``_instance`` would add, made here rather than by a second copy of the whole row
        "version": event.originator_version,
        "position": position,
        "status": _REQUESTED_STATUS,
    }
    return row


def instance_updated(row: Row, event: Instance.Updated, position: int) -> Row:
    return _instance(
        row,
        event,
        position,
        name=event.name,
        description=event.description,
        access_ip_v4=event.access_ip_v4,
        access_ip_v6=event.access_ip_v6,
        hostname=event.hostname,
        disk_config=event.disk_config,
    )


def instance_metadata_updated(row: Row, event: Instance.MetadataUpdated, position: int) -> Row:
    metadata = {k: v for k, v in (row["metadata"] or {}).items() if k not in event.removed}
    metadata.update(event.changed)
    return _instance(row, event, position, metadata=metadata)


def instance_tags_updated(row: Row, event: Instance.TagsUpdated, position: int) -> Row:
    return _instance(row, event, position, tags=list(event.tags))


def instance_offloaded(row: Row, event: Instance.Offloaded, position: int) -> Row:
    return _instance(row, event, position, host=None)


def instance_unshelve_requested(row: Row, event: Instance.UnshelveRequested, position: int) -> Row:
    if getattr(event, "repin", False):
        return _instance(
            row, event, position, task_state=TaskState.UNSHELVING, availability_zone=event.availability_zone
        )
    return _instance(row, event, position, task_state=TaskState.UNSHELVING)


def instance_zone_pinned(row: Row, event: Instance.ZonePinned, position: int) -> Row:
    return _instance(row, event, position, availability_zone=event.availability_zone)


def instance_unshelve_failed(row: Row, event: Instance.UnshelveFailed, position: int) -> Row:
    fault = fault_of(event)
    return _instance(row, event, position, task_state=None, fault=fault)


def instance_image_changed(row: Row, event: Instance.ImageChanged, position: int) -> Row:
    return _instance(row, event, position, image_ref=event.image_ref or "", image=event.image)


def instance_state_reset(row: Row, event: Instance.StateReset, position: int) -> Row:
    return _instance(row, event, position, vm_state=event.vm_state, task_state=None)


def instance_boot_data_changed(row: Row, event: Instance.BootDataChanged, position: int) -> Row:
    return _instance(row, event, position, key_name=event.key_name, user_data=event.user_data)


def instance_locked(row: Row, event: Instance.Locked, position: int) -> Row:
    return _instance(row, event, position, locked_by=event.locked_by, locked_reason=event.reason)


def instance_unlocked(row: Row, event: Instance.Unlocked, position: int) -> Row:
    return _instance(row, event, position, locked_by=None, locked_reason=None)


def instance_scheduled(row: Row, event: Instance.Scheduled, position: int) -> Row:
    return _instance(row, event, position, host=event.host, task_state=None)


def instance_faulted(row: Row, event: Instance.Faulted, position: int) -> Row:
    fault = fault_of(event)
    return _instance(row, event, position, vm_state=VmState.ERROR, task_state=None, fault=fault)


def instance_spawning_started(row: Row, event: Instance.SpawningStarted, position: int) -> Row:
    return _instance(row, event, position, task_state=TaskState.SPAWNING)


def instance_spawned(row: Row, event: Instance.Spawned, position: int) -> Row:
    return _instance(
        row,
        event,
        position,
        vm_state=VmState.ACTIVE,
        task_state=None,
        power_state=event.power_state,
        launched_at=event.timestamp,
    )


def instance_deletion_requested(row: Row, event: Instance.DeletionRequested, position: int) -> Row:
    return _instance(row, event, position, task_state=TaskState.DELETING)


def instance_deleted(row: Row, event: Instance.Deleted, position: int) -> Row:
    return _instance(
        row,
        event,
        position,
        vm_state=VmState.DELETED,
        task_state=None,
        power_state=PowerState.NOSTATE,
        deleted=True,
        deleted_at=event.timestamp,
    )


# -- hosts ----------------------------------------------------------------------------------------
def host_registered(event: Host.Registered, position: int) -> Row:
    row: Row = {
        "id": event.originator_id,
        "hostname": event.hostname,
        "hypervisor_type": event.hypervisor_type,
        "vcpus": event.vcpus,
        "memory_mb": event.memory_mb,
        "disk_gb": event.disk_gb,
        "cpu_allocation_ratio": float(event.cpu_allocation_ratio),
        "ram_allocation_ratio": float(event.ram_allocation_ratio),
        "disk_allocation_ratio": float(event.disk_allocation_ratio),
        "vcpus_used": 0,
        "memory_mb_used": 0,
        "disk_gb_used": 0,
        "running_vms": 0,
        "created_at": event.timestamp,
        "updated_at": event.timestamp,
    }
    return _touched(row, event, position)


def instance_claimed(host: Row, event: Host.InstanceClaimed, position: int) -> tuple[Row, Row]:
    """The host's usage grows by the claim; the claim is kept to be subtracted on release."""
    claim: Row = {
        "host_id": host["id"],
        "instance_id": event.instance_id,
        "vcpus": event.vcpus,
        "memory_mb": event.memory_mb,
        "disk_gb": event.disk_gb,
        "claimed_at": event.timestamp,
        "position": position,
    }
    new = _touched(
        host,
        event,
        position,
        vcpus_used=host["vcpus_used"] + event.vcpus,
        memory_mb_used=host["memory_mb_used"] + event.memory_mb,
        disk_gb_used=host["disk_gb_used"] + event.disk_gb,
        running_vms=host["running_vms"] + 1,
    )
    return new, claim


def instance_released(host: Row, claim: Row | None, event: Host.InstanceReleased, position: int) -> Row:
    """The host's usage shrinks by what the instance had claimed (nothing if it held no claim)."""
    if claim is None:
        return _touched(host, event, position)
    return _touched(
        host,
        event,
        position,
        vcpus_used=host["vcpus_used"] - claim["vcpus"],
        memory_mb_used=host["memory_mb_used"] - claim["memory_mb"],
        disk_gb_used=host["disk_gb_used"] - claim["disk_gb"],
        running_vms=host["running_vms"] - 1,
    )


# -- flavors --------------------------------------------------------------------------------------
def flavor_created(event: Flavor.Created, position: int) -> Row:
    row: Row = {
        "flavorid": event.flavorid,
        "id": event.originator_id,
        "name": event.name,
        "vcpus": event.vcpus,
        "ram": event.ram,
        "disk": event.disk,
        "ephemeral": event.ephemeral,
        "swap": event.swap,
        "rxtx_factor": float(event.rxtx_factor),
        "is_public": bool(event.is_public),
        "description": event.description,
        "deleted": False,
        "created_at": event.timestamp,
        "deleted_at": None,
    }
    return _touched(row, event, position)


def flavor_deleted(row: Row, event: Flavor.Deleted, position: int) -> Row:
    return _touched(row, event, position, deleted=True, deleted_at=event.timestamp)


# -- power actions --------------------------------------------------------------------------------
def instance_action_requested(row: Row, event: Instance.ActionRequested, position: int) -> Row:
    return _instance(row, event, position, task_state=event.task_state)


def instance_action_finished(row: Row, event: Instance.ActionFinished, position: int) -> Row:
    return _instance(
        row, event, position, vm_state=event.vm_state, task_state=None, power_state=event.power_state
    )


def instance_action_failed(row: Row, event: Instance.ActionFailed, position: int) -> Row:
    fault = fault_of(event)
    return _instance(
        row,
        event,
        position,
        vm_state=event.vm_state,
        task_state=None,
        power_state=event.power_state,
        fault=fault,
    )


def instance_power_state_synced(row: Row, event: Instance.PowerStateSynced, position: int) -> Row:
    """What the host found; a guest missing from its host leaves the server in ERROR with a fault."""
    changes: dict[str, Any] = {"vm_state": event.vm_state, "power_state": event.power_state}
    if event.vm_state == VmState.ERROR:
        changes["fault"] = fault_of(event, code="compute.guest_missing", message=event.reason, details="")
    return _instance(row, event, position, **changes)
