"""Nova's instance state vocabulary (vm_state, task_state, power_state) and its API status map.

Values and the status table come from nova/compute/vm_states.py, task_states.py, power_state.py
and nova/api/openstack/common.py, so that clients written for Nova read our servers unchanged.
"""

from __future__ import annotations


class VmState:
    """Nova's vm_state values."""

    ACTIVE = "active"
    BUILDING = "building"
    PAUSED = "paused"
    SUSPENDED = "suspended"
    STOPPED = "stopped"
    RESCUED = "rescued"
    RESIZED = "resized"
    SOFT_DELETED = "soft-delete"
    DELETED = "deleted"
    ERROR = "error"
    SHELVED = "shelved"
    SHELVED_OFFLOADED = "shelved_offloaded"


class TaskState:
    """Nova's task_state values."""

    SCHEDULING = "scheduling"
    SPAWNING = "spawning"
    DELETING = "deleting"
    POWERING_ON = "powering-on"
    POWERING_OFF = "powering-off"
    REBOOTING = "rebooting"
    REBOOTING_HARD = "rebooting_hard"
    PAUSING = "pausing"
    UNPAUSING = "unpausing"
    SUSPENDING = "suspending"
    RESUMING = "resuming"
    REBUILDING = "rebuilding"
    SHELVING = "shelving"
    UNSHELVING = "unshelving"
    RESIZE_PREP = "resize_prep"
    RESIZE_MIGRATING = "resize_migrating"
    RESIZE_MIGRATED = "resize_migrated"
    RESIZE_FINISH = "resize_finish"
    RESIZE_REVERTING = "resize_reverting"


class PowerState:
    """Nova's power_state values (libvirt's domain states)."""

    NOSTATE = 0
    RUNNING = 1
    PAUSED = 3
    SHUTDOWN = 4
    CRASHED = 6
    SUSPENDED = 7


# Nova's names of the power states (nova/compute/power_state.py STATE_MAP), as its diagnostics and
# versioned notifications give them.
POWER_STATE_NAMES = {
    PowerState.NOSTATE: "pending",
    PowerState.RUNNING: "running",
    PowerState.PAUSED: "paused",
    PowerState.SHUTDOWN: "shutdown",
    PowerState.CRASHED: "crashed",
    PowerState.SUSPENDED: "suspended",
}


_STATUS_BY_VM_STATE = {
    VmState.ACTIVE: "ACTIVE",
    VmState.BUILDING: "BUILD",
    VmState.STOPPED: "SHUTOFF",
    VmState.RESIZED: "VERIFY_RESIZE",
    VmState.PAUSED: "PAUSED",
    VmState.SUSPENDED: "SUSPENDED",
    VmState.RESCUED: "RESCUE",
    VmState.ERROR: "ERROR",
    VmState.DELETED: "DELETED",
    VmState.SOFT_DELETED: "SOFT_DELETED",
    VmState.SHELVED: "SHELVED",
    VmState.SHELVED_OFFLOADED: "SHELVED_OFFLOADED",
}

_ACTIVE_STATUS_BY_TASK = {
    "rebooting": "REBOOT",
    "reboot_pending": "REBOOT",
    "reboot_started": "REBOOT",
    "rebooting_hard": "HARD_REBOOT",
    "reboot_pending_hard": "HARD_REBOOT",
    "reboot_started_hard": "HARD_REBOOT",
    "rebuilding": "REBUILD",
    "rebuild_block_device_mapping": "REBUILD",
    "rebuild_spawning": "REBUILD",
    "migrating": "MIGRATING",
    "resize_prep": "RESIZE",
    "resize_migrating": "RESIZE",
    "resize_migrated": "RESIZE",
    "resize_finish": "RESIZE",
}


_REBUILD_TASKS = ("rebuilding", "rebuild_block_device_mapping", "rebuild_spawning")
_RESIZE_TASKS = ("resize_prep", "resize_migrating", "resize_migrated", "resize_finish")


def api_status(vm_state: str, task_state: str | None) -> str:
    """The `status` Nova's API shows for a vm_state/task_state pair."""
    if vm_state == VmState.ACTIVE and task_state in _ACTIVE_STATUS_BY_TASK:
        return _ACTIVE_STATUS_BY_TASK[task_state]
    if vm_state == VmState.STOPPED and task_state in _RESIZE_TASKS:
        return "RESIZE"
    if vm_state == VmState.RESIZED and task_state == TaskState.RESIZE_REVERTING:
        return "REVERT_RESIZE"
    if vm_state in (VmState.STOPPED, VmState.ERROR) and task_state in _REBUILD_TASKS:
        return "REBUILD"
    return _STATUS_BY_VM_STATE.get(vm_state, "UNKNOWN")
