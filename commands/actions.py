"""Nova's server actions as data: where each may start, its task state while under way, where it ends.

The guards are Nova's (``nova/compute/api.py``, ``check_instance_state``); the task states and the
instance-action event names are Nova's too, so ``openstack server event list`` reads the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from commands.states import PowerState, TaskState, VmState


@dataclass(frozen=True)
class PowerAction:
    """One power action: where it may start, and the states it passes through."""

    key: str  # what the events record: ``reboot`` is a soft reboot, ``reboot_hard`` a hard one
    name: str  # Nova's action name (guard messages, instance actions)
    vm_states: tuple[str, ...]  # where it may start
    task_states: tuple[str | None, ...]
    task_state: str  # while the host carries it out
    vm_state: str  # when it is done
    power_state: int  # what the guest should report when it is done
    event: str  # Nova's instance-action event name


_ANY_REBOOT = (None, TaskState.REBOOTING)
ACTIONS: dict[str, PowerAction] = {
    a.key: a
    for a in (
        PowerAction(
            "start", "start", (VmState.STOPPED,), (None,), TaskState.POWERING_ON,
            VmState.ACTIVE, PowerState.RUNNING, "compute_start_instance",
        ),
        PowerAction(
            "stop", "stop", (VmState.ACTIVE, VmState.ERROR), (None,), TaskState.POWERING_OFF,
            VmState.STOPPED, PowerState.SHUTDOWN, "compute_stop_instance",
        ),
        PowerAction(
            "reboot", "reboot", (VmState.ACTIVE,), (None,), TaskState.REBOOTING,
            VmState.ACTIVE, PowerState.RUNNING, "compute_reboot_instance",
        ),
        PowerAction(
            "reboot_hard", "reboot",
            (VmState.ACTIVE, VmState.STOPPED, VmState.PAUSED, VmState.SUSPENDED, VmState.ERROR),
            _ANY_REBOOT, TaskState.REBOOTING_HARD,
            VmState.ACTIVE, PowerState.RUNNING, "compute_reboot_instance",
        ),
        PowerAction(
            "pause", "pause", (VmState.ACTIVE,), (None,), TaskState.PAUSING,
            VmState.PAUSED, PowerState.PAUSED, "compute_pause_instance",
        ),
        PowerAction(
            "unpause", "unpause", (VmState.PAUSED,), (None,), TaskState.UNPAUSING,
            VmState.ACTIVE, PowerState.RUNNING, "compute_unpause_instance",
        ),
        PowerAction(
            "suspend", "suspend", (VmState.ACTIVE,), (None,), TaskState.SUSPENDING,
            VmState.SUSPENDED, PowerState.SHUTDOWN, "compute_suspend_instance",
        ),
        PowerAction(
            "resume", "resume", (VmState.SUSPENDED,), (None,), TaskState.RESUMING,
            VmState.ACTIVE, PowerState.RUNNING, "compute_resume_instance",
        ),
        # the guest is shut down and removed, the host's resources freed (Nova's shelve with
        # shelved_offload_time = 0: offloaded at once); unshelve places it again (Instance.unshelve)
        PowerAction(
            "shelve", "shelve", (VmState.ACTIVE, VmState.STOPPED, VmState.PAUSED, VmState.SUSPENDED), (None,),
            TaskState.SHELVING, VmState.SHELVED_OFFLOADED, PowerState.SHUTDOWN, "compute_shelve_instance",
        ),
        # the guest is redefined from the server's new image and started (Nova: ACTIVE, STOPPED or ERROR)
        PowerAction(
            "rebuild", "rebuild", (VmState.ACTIVE, VmState.STOPPED, VmState.ERROR), (None,),
            TaskState.REBUILDING, VmState.ACTIVE, PowerState.RUNNING, "compute_rebuild_instance",
        ),
    )
}  # fmt: skip

# Who locked a server (Nova's ``locked_by``): its owner, or an admin (then only an admin unlocks it).
LOCKED_BY_OWNER = "owner"
LOCKED_BY_ADMIN = "admin"
