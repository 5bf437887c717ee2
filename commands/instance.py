"""Instance: a server, with Nova's vm_state / task_state / power_state machine.

Public methods check Nova's guards and raise domain errors; the private ``@event`` methods record
facts and only assign state.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from commands.errors import InvalidState, NotFound
from commands.states import PowerState, TaskState, VmState


class Instance(Aggregate):
    @event("Requested")
    def __init__(
        self,
        name: str,
        project_id: str,
        user_id: str,
        flavor: dict[str, Any],
        image_ref: str,
        metadata: dict[str, str],
        availability_zone: str | None,
        request_key: str | None,
    ) -> None:
        self.name = name
        self.project_id = project_id
        self.user_id = user_id
        self.flavor = flavor
        self.image_ref = image_ref
        self.metadata = metadata
        self.availability_zone = availability_zone
        self.request_key = request_key
        self.vm_state = VmState.BUILDING
        self.task_state: str | None = TaskState.SCHEDULING
        self.power_state = PowerState.NOSTATE
        self.host: str | None = None
        self.fault: dict[str, Any] | None = None

    @classmethod
    def request(cls, server_id: UUID, **fields: Any) -> Instance:
        """A new server, under an id chosen by the caller (random, or derived from a request key)."""
        return cls._create(cls.Requested, id=server_id, **fields)  # type: ignore[attr-defined]

    @property
    def server_id(self) -> str:
        return str(self.id)

    @property
    def deleted(self) -> bool:
        return self.vm_state == VmState.DELETED

    def _ensure_exists(self) -> None:
        if self.deleted:
            raise NotFound(f"Instance {self.id} could not be found.")

    def _guard(self, action: str, vm_states: tuple[str, ...], task_states: tuple[str | None, ...]) -> None:
        self._ensure_exists()
        if self.vm_state not in vm_states or self.task_state not in task_states:
            raise InvalidState(
                f"Cannot '{action}' instance {self.id} while it is in "
                f"vm_state {self.vm_state}, task_state {self.task_state}"
            )

    # -- scheduling -----------------------------------------------------------------------------
    def schedule(self, host: str) -> None:
        self._guard("schedule", (VmState.BUILDING,), (TaskState.SCHEDULING,))
        self._scheduled(host)

    @event("Scheduled")
    def _scheduled(self, host: str) -> None:
        self.host = host
        self.task_state = None

    def fail(self, code: str, message: str, details: str = "") -> None:
        """Record a fault and put the instance into ERROR (Nova: instance fault + vm_state error)."""
        self._ensure_exists()
        message, details = message[:255], details[:65535]
        fault = {"code": code, "message": message, "details": details}
        if self.vm_state == VmState.ERROR and self.fault == fault:
            return  # the same failure reported twice (a redelivered message): one fact, recorded once
        self._faulted(code, message, details)

    @event("Faulted")
    def _faulted(self, code: str, message: str, details: str) -> None:
        self.vm_state = VmState.ERROR
        self.task_state = None
        self.fault = {"code": code, "message": message, "details": details}

    # -- spawning on the host -------------------------------------------------------------------
    def start_spawning(self, host: str) -> None:
        self._guard("spawn", (VmState.BUILDING,), (None,))
        if self.host != host:
            raise InvalidState(f"Instance {self.id} is placed on {self.host}, not on {host}")
        self._spawning_started()

    @event("SpawningStarted")
    def _spawning_started(self) -> None:
        self.task_state = TaskState.SPAWNING

    def finish_spawning(self, power_state: int) -> None:
        self._guard("spawn", (VmState.BUILDING,), (TaskState.SPAWNING,))
        self._spawned(power_state)

    @event("Spawned")
    def _spawned(self, power_state: int) -> None:
        self.vm_state = VmState.ACTIVE
        self.task_state = None
        self.power_state = power_state

    # -- deletion -------------------------------------------------------------------------------
    def request_delete(self) -> bool:
        """Start deleting; False when a deletion is already under way (a retried delete)."""
        self._ensure_exists()
        if self.task_state == TaskState.DELETING:
            return False
        self._deletion_requested()
        return True

    @event("DeletionRequested")
    def _deletion_requested(self) -> None:
        self.task_state = TaskState.DELETING

    @property
    def needs_host_cleanup(self) -> bool:
        """A host holds (or may hold) a domain and a claim for this instance."""
        return self.host is not None

    def mark_deleted(self) -> None:
        self._ensure_exists()
        self._deleted()

    @event("Deleted")
    def _deleted(self) -> None:
        self.vm_state = VmState.DELETED
        self.task_state = None
        self.power_state = PowerState.NOSTATE
