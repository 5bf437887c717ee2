"""The hypervisor worker's steps for one host: spawn a scheduled instance, tear down a deleted one.

Each step reads the instance's current state first, so a redelivered message either completes
the step or finds it done. Virtualization failures arrive as the port's two kinds: temporary ones
are retried with backoff (the message comes back), permanent ones, and temporary ones that
outlast the retries, become a fault on the instance, which releases its resources on the host.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from commands import loaders
from commands.bus import MessageBus
from commands.errors import Conflict, InvalidState, NotFound
from commands.hosts.register import RegisterHost
from commands.instance import Instance
from commands.servers.delete import FinishDeletion
from commands.servers.spawn import FailInstance, FinishSpawning, StartSpawning
from commands.states import TaskState, VmState
from stratus.imagestore import ImageStore, StoreError
from workers.config_drive import ConfigDrives
from workers.console import console_log
from workers.guest_network import MetadataNetwork
from workers.outcome import DONE, Outcome, RetryLater, RetryPolicy
from workers.virt import (
    BootImage,
    GuestSpec,
    PermanentVirtError,
    PowerDriver,
    TemporaryVirtError,
    VirtDriver,
    VirtError,
)

log = logging.getLogger(__name__)

SPAWN_FAILED = "compute.spawn_failed"
DELETE_FAILED = "compute.delete_failed"

SCHEDULED = "scheduled"
DELETION_REQUESTED = "deletionrequested"


class BootImages:
    """Direct kernel boot from the image service: the kernel and ramdisk a server's image names.

    An image whose ``kernel_id`` property names a kernel image boots that kernel (with the
    ``ramdisk_id`` image as its initramfs and ``os_command_line`` as its command line); the files
    are the image store's (``<data dir>/images/<id>/<sha256>``), found through the images'
    ``Uploaded`` events in the log. An image without a kernel boots nothing (fine for the test
    driver). A kernel whose data is gone is a permanent failure of the spawn.
    """

    def __init__(self, bus: MessageBus, store: ImageStore) -> None:
        self._bus = bus
        self._store = store

    def __call__(self, inst: Instance) -> BootImage | None:
        image = inst.image or {}
        if not image.get("kernel_id"):
            return None
        ramdisk = image.get("ramdisk_id")
        return BootImage(
            kernel=self._file(image["kernel_id"], "kernel"),
            initrd=self._file(ramdisk, "ramdisk") if ramdisk else None,
            cmdline=image.get("os_command_line") or "console=ttyS0",
        )

    def _file(self, image_id: str, role: str) -> str:
        try:
            image = loaders.image(self._bus.uow, image_id)
        except NotFound:
            raise PermanentVirtError(f"The {role} image {image_id} does not exist") from None
        if not image.os_hash_value:
            raise PermanentVirtError(f"The {role} image {image_id} has no data")
        try:
            path = self._store.path(image.image_id, image.os_hash_value)
        except StoreError as e:
            raise PermanentVirtError(f"The {role} image {image_id}: {e}") from e
        if not path.is_file():
            raise PermanentVirtError(f"The {role} image {image_id} has no data in the image store at {path}")
        return str(path.absolute())  # libvirtd runs elsewhere: a relative path means nothing to it


class Compute:
    """One host's spawn and delete steps: each reads the instance first, acts through the virt driver,
    and records the outcome (or a fault) by sending commands to the bus."""

    def __init__(
        self,
        bus: MessageBus,
        driver: VirtDriver,
        hostname: str,
        *,
        instances_path: Path,
        boot_image: Callable[[Instance], BootImage | None] = lambda _inst: None,
        retry: RetryPolicy | None = None,
        console_logs: bool = True,
        config_drives: ConfigDrives | None = None,
        metadata_network: MetadataNetwork | None = None,
    ) -> None:
        self._bus = bus
        self._metadata_network = metadata_network  # None: guests without a network
        self._config_drives = config_drives  # None: no config drives on this host (a simulated one)
        self._driver = driver
        self.hostname = hostname
        self._instances_path = instances_path
        self._console_logs = console_logs  # False: guests that print nothing (a simulated host's)
        self._boot_image = boot_image
        self._retry = retry or RetryPolicy()

    def register(self) -> None:
        """Register this host with the inventory its hypervisor reports (a no-op when known)."""
        inv = self._driver.inventory()
        self._bus.handle(
            RegisterHost(self.hostname, inv.vcpus, inv.memory_mb, inv.disk_gb, inv.hypervisor_type)
        )

    def handle(self, event_type: str, server_id: str, attempt: int) -> Outcome:
        """React to one instance event (``attempt``: how many times it has been delivered)."""
        if attempt > self._retry.give_up_after:
            return self._give_up(event_type, server_id, attempt)
        try:
            if event_type == SCHEDULED:
                return self._spawn(server_id, attempt)
            if event_type == DELETION_REQUESTED:
                return self._delete(server_id, attempt)
        except Conflict as e:
            return self._retry.retry(attempt, e.message) or RetryLater(self._retry.delays[-1], e.message)
        return DONE

    def guest(self, inst: Instance) -> GuestSpec:
        console = console_log(self._instances_path, inst.server_id) if self._console_logs else None
        return GuestSpec(
            uuid=inst.server_id,
            vcpus=int(inst.flavor["vcpus"]),
            memory_mb=int(inst.flavor["ram"]),
            boot=self._boot_image(inst),
            console_log=str(console) if console is not None else None,
            config_drive=self._config_drives.build(inst) if self._config_drives is not None else None,
            metadata_proxy=(
                self._metadata_network.proxy_command(inst.server_id, inst.project_id)
                if self._metadata_network is not None
                else None
            ),
            mac=next((str(p["mac"]) for p in inst.ports if p.get("mac")), None),
        )

    def _remove_config_drive(self, server_id: str) -> None:
        if self._config_drives is not None:
            self._config_drives.remove(server_id)

    def respawn(self, server_id: str) -> int:
        """Tear the server's guest down and define and start it again from what the log records now
        (a rebuild's new image), shut off again if the server was stopped (as Nova rebuilds a stopped
        server); safe to repeat after a crash at any point."""
        inst = loaders.instance(self._bus.uow, server_id)
        self._driver.destroy(server_id)
        power_state = self._driver.spawn(self.guest(inst))
        if inst.vm_state == VmState.STOPPED and isinstance(self._driver, PowerDriver):
            power_state = self._driver.power_off(server_id)
        return power_state

    def give_up(self, event_type: str, server_id: str, details: str) -> None:
        """The step for ``event_type`` was quarantined: a server still being built here, or still
        being deleted, gets the fault the step's own failure would have given it (``details``)."""
        inst = self._load(server_id)
        if inst is None:
            return
        if event_type == SCHEDULED and inst.vm_state == VmState.BUILDING:
            code, action = SPAWN_FAILED, "spawn"
        elif event_type == DELETION_REQUESTED and inst.task_state == TaskState.DELETING:
            code, action = DELETE_FAILED, "delete"
        else:
            return
        log.error("%s %s failed: %s", action, server_id, details)
        message = f"Failed to {action} instance on host {self.hostname}"
        self._bus.handle(FailInstance(server_id, code=code, message=message, details=details))

    # -- steps ----------------------------------------------------------------------------------
    def _load(self, server_id: str) -> Instance | None:
        """The instance if it lives on this host; None when it is gone or elsewhere."""
        try:
            inst = loaders.instance(self._bus.uow, server_id)
        except NotFound:
            return None
        return inst if inst.host == self.hostname else None

    def _spawn(self, server_id: str, attempt: int) -> Outcome:
        inst = self._load(server_id)
        if inst is None or inst.vm_state not in (VmState.BUILDING, VmState.SHELVED_OFFLOADED):
            return DONE  # gone, elsewhere, or already spawned or failed: a replay
        if inst.task_state is None:
            try:
                self._bus.handle(StartSpawning(server_id, self.hostname))
            except (InvalidState, NotFound):
                return DONE  # a deletion got in first; its own message tears down
        elif inst.task_state != TaskState.SPAWNING:
            return DONE  # deleting: the DeletionRequested message does the work
        try:
            power_state = self._driver.spawn(self.guest(inst))
        except TemporaryVirtError as e:
            retry = self._retry.retry_logged(attempt, e.message, log=log, step="spawn", server_id=server_id)
            if retry is not None:
                return retry
            return self._fault(server_id, e, attempt)
        except PermanentVirtError as e:
            return self._fault(server_id, e, attempt)
        try:
            self._bus.handle(FinishSpawning(server_id, power_state))
        except (InvalidState, NotFound):
            # Lost a race with a delete: the guest we just started must go again.
            return self._delete(server_id, attempt)
        return DONE

    def _fault(self, server_id: str, error: VirtError, attempt: int) -> Outcome:
        inst = self._load(server_id)
        if inst is None:
            return DONE
        if inst.task_state == TaskState.DELETING:
            return self._delete(server_id, attempt)
        self._remove_config_drive(server_id)  # a failed spawn leaves no metadata behind on the host
        self._record_fault(server_id, SPAWN_FAILED, "spawn", error, attempt)
        return DONE

    def _delete(self, server_id: str, attempt: int) -> Outcome:
        inst = self._load(server_id)
        if inst is None:
            return DONE  # already deleted (a replay), or not on this host
        # Whatever the instance's state now, a DeletionRequested is never taken back.
        try:
            self._driver.destroy(server_id)
            self._remove_config_drive(server_id)
        except TemporaryVirtError as e:
            retry = self._retry.retry_logged(attempt, e.message, log=log, step="delete", server_id=server_id)
            if retry is not None:
                return retry
            self._record_fault(server_id, DELETE_FAILED, "delete", e, attempt)
            return DONE
        except PermanentVirtError as e:
            # Nova's answer: the server goes to ERROR and the user may delete it again.
            self._record_fault(server_id, DELETE_FAILED, "delete", e, attempt)
            return DONE
        self._bus.handle(FinishDeletion(server_id))
        return DONE

    def _give_up(self, event_type: str, server_id: str, attempt: int) -> Outcome:
        """A message that keeps coming back because handling it kills the worker: record a fault."""
        inst = self._load(server_id)
        if inst is None:
            return DONE
        if event_type == SCHEDULED and inst.vm_state == VmState.BUILDING:
            code, action = SPAWN_FAILED, "spawn"
        elif event_type == DELETION_REQUESTED:
            code, action = DELETE_FAILED, "delete"
        else:
            return DONE
        log.error("%s %s: giving up after %d deliveries", action, server_id, attempt)
        self._bus.handle(
            FailInstance(
                server_id,
                code=code,
                message=f"Failed to {action} instance: gave up after {attempt} tries",
                details=f"The {event_type} event was delivered {attempt} times without being settled; "
                "the worker stopped while handling it each time (see the worker's log).",
            )
        )
        return DONE

    def _record_fault(self, server_id: str, code: str, action: str, error: VirtError, attempt: int) -> None:
        kind = "temporary, out of retries" if isinstance(error, TemporaryVirtError) else "permanent"
        log.error("%s %s failed (%s): %s", action, server_id, kind, error)
        self._bus.handle(
            FailInstance(
                server_id,
                code=code,
                message=f"Failed to {action} instance: {error.message}",
                details=f"{type(error).__name__} ({kind}; hypervisor error code {error.code}; "
                f"attempt {attempt}): {error.message}",
            )
        )
