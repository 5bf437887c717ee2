"""The hypervisor worker's part in a resize or cold migration (``commands.servers.moves`` decides).

Four steps, each triggered by the event that names this host in its payload and carried out only
while the instance is still at that step (so a redelivery after the step was recorded is a no-op,
and a redelivery after a crash in the middle repeats idempotent driver calls):

- ``MigrationScheduled`` (the source): a clean shutdown, then the guest is removed;
- ``MigratedFromSource`` (the destination): the guest is defined with the new flavor and started
  (left shut off if the server was stopped);
- ``RevertRequested`` (the destination): the guest is removed;
- ``RevertedOnDest`` (the source): the guest is defined with the old flavor and started again.

A failure before VERIFY_RESIZE returns the server to its source (``MigrationFailed``): in its old
state if its guest is still there, in ERROR with the fault if not. Temporary hypervisor errors are
retried with backoff first, as every other step's.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from commands import loaders
from commands.bus import MessageBus
from commands.errors import Conflict, InvalidState, NotFound
from commands.instance import Instance
from commands.servers.moves import FailMigration, FinishMigration, FinishRevert, LeftDest, LeftSource
from commands.states import TaskState
from workers.outcome import DONE, Outcome, RetryLater, RetryPolicy
from workers.power import remove_guest
from workers.virt import DomainNotFound, GuestSpec, PowerDriver, TemporaryVirtError, VirtDriver, VirtError

log = logging.getLogger(__name__)

MIGRATION_FAILED = "compute.migration_failed"
MIGRATION_SCHEDULED = "migrationscheduled"
MIGRATED_FROM_SOURCE = "migratedfromsource"
REVERT_REQUESTED = "revertrequested"
REVERTED_ON_DEST = "revertedondest"
# Which host carries out the step each event starts: the payload field that names it.
ACTING_HOST = {
    MIGRATION_SCHEDULED: "source",
    MIGRATED_FROM_SOURCE: "dest",
    REVERT_REQUESTED: "dest",
    REVERTED_ON_DEST: "source",
}


class Moves:
    """One host's steps of a resize or cold migration, as the source or the destination."""

    def __init__(
        self,
        bus: MessageBus,
        driver: VirtDriver,
        hostname: str,
        *,
        guest: Callable[[Instance], GuestSpec],
        retry: RetryPolicy | None = None,
    ) -> None:
        """``guest``: the guest a server's instance defines now (its flavor, image, console)."""
        self._bus = bus
        self._driver = driver
        self._power = driver if isinstance(driver, PowerDriver) else None
        self._guest = guest
        self.hostname = hostname
        self._retry = retry or RetryPolicy()

    def pending(self, inst: Instance) -> str | None:
        """The step this host has to carry out for ``inst`` now (its trigger's event type), if any."""
        move = inst.migration
        if move is None:
            return None
        here = {side for side in ("source", "dest") if move.get(side) == self.hostname}
        task = inst.task_state
        if task == TaskState.RESIZE_MIGRATING and "source" in here:
            return MIGRATION_SCHEDULED
        if task == TaskState.RESIZE_MIGRATED and "dest" in here:
            return MIGRATED_FROM_SOURCE
        if task == TaskState.RESIZE_REVERTING and inst.host == self.hostname:
            return REVERT_REQUESTED if "dest" in here else REVERTED_ON_DEST
        return None

    def handle(self, event_type: str, server_id: str, attempt: int) -> Outcome:
        try:
            inst = loaders.instance(self._bus.uow, server_id)
        except NotFound:
            return DONE
        if self.pending(inst) != event_type:
            return DONE  # done, failed, overtaken by a delete, or another host's step: a replay
        try:
            if attempt > self._retry.give_up_after:
                return self._fail(inst, event_type, f"gave up after {attempt} tries", "", broken=True)
            return self._step(inst, event_type, attempt)
        except Conflict as e:
            return self._retry.retry(attempt, e.message) or RetryLater(self._retry.delays[-1], e.message)

    def _step(self, inst: Instance, event_type: str, attempt: int) -> Outcome:
        server_id = inst.server_id
        try:
            if event_type == MIGRATION_SCHEDULED:
                remove_guest(self._driver, server_id)
                record: Callable[[], Any] = lambda: self._bus.handle(LeftSource(server_id))  # noqa: E731
            elif event_type == REVERT_REQUESTED:
                self._driver.destroy(server_id)
                record = lambda: self._bus.handle(LeftDest(server_id))  # noqa: E731
            else:  # define and start the guest: the new flavor here, or the old one back at the source
                to_dest = event_type == MIGRATED_FROM_SOURCE
                power_state = self._start(
                    inst, (inst.migration or {})["new_flavor" if to_dest else "old_flavor"]
                )
                finish = FinishMigration if event_type == MIGRATED_FROM_SOURCE else FinishRevert
                record = lambda: self._bus.handle(finish(server_id, power_state))  # noqa: E731
        except TemporaryVirtError as e:
            retry = self._retry.retry_logged(
                attempt, e.message, log=log, step=event_type, server_id=server_id
            )
            if retry is not None:
                return retry
            return self._failed(inst, event_type, e, attempt)
        except VirtError as e:
            return self._failed(inst, event_type, e, attempt)
        try:
            record()
        except (InvalidState, NotFound):
            # A delete overtook the move; a guest this step started here must not outlive it.
            if event_type in (MIGRATED_FROM_SOURCE, REVERTED_ON_DEST) and self._gone(server_id):
                with contextlib.suppress(VirtError):
                    self._driver.destroy(server_id)
        return DONE

    def _start(self, inst: Instance, flavor: dict[str, Any]) -> int:
        self._driver.destroy(inst.server_id)  # a half-made guest of an earlier attempt (and its drive)
        guest = replace(self._guest(inst), vcpus=int(flavor["vcpus"]), memory_mb=int(flavor["ram"]))
        power_state = self._driver.spawn(guest)
        if (inst.migration or {}).get("stopped") and self._power is not None:
            power_state = self._power.power_off(inst.server_id)  # a stopped server stays stopped
        return power_state

    def _gone(self, server_id: str) -> bool:
        try:
            loaders.instance(self._bus.uow, server_id)
        except NotFound:
            return True
        return False

    def _failed(self, inst: Instance, event_type: str, error: VirtError, attempt: int) -> Outcome:
        kind = "temporary, out of retries" if isinstance(error, TemporaryVirtError) else "permanent"
        log.error("%s %s failed (%s): %s", event_type, inst.server_id, kind, error)
        details = (
            f"{type(error).__name__} ({kind}; hypervisor error code {error.code}; attempt {attempt}): "
            f"{error.message}"
        )
        # Only a source that never let go of its guest leaves the server usable where it was.
        broken = event_type != MIGRATION_SCHEDULED or self._missing(inst.server_id)
        return self._fail(inst, event_type, error.message, details, broken=broken)

    def _missing(self, server_id: str) -> bool:
        try:
            self._driver.power_state(server_id)
        except DomainNotFound:
            return True
        except VirtError:
            return True  # cannot tell: do not claim the guest is fine
        return False

    def _fail(self, inst: Instance, event_type: str, why: str, details: str, *, broken: bool) -> Outcome:
        action = "migrate" if (inst.migration or {}).get("type") == "migration" else "resize"
        step = "revert" if event_type in (REVERT_REQUESTED, REVERTED_ON_DEST) else action
        if event_type in (MIGRATED_FROM_SOURCE, REVERT_REQUESTED):
            with contextlib.suppress(VirtError):
                self._driver.destroy(inst.server_id)  # leave no half-made or stale guest behind
        with contextlib.suppress(InvalidState, NotFound):  # a delete overtook the move
            self._bus.handle(
                FailMigration(
                    inst.server_id,
                    MIGRATION_FAILED,
                    f"Failed to {step} instance: {why}",
                    details,
                    broken=broken,
                )
            )
        return DONE
