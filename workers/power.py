"""The hypervisor worker's power actions: carry out what a user asked (start, stop, reboot, pause,
unpause, suspend, resume) and record how it ended.

An action is under way while the instance's task_state is the action's (``powering-off`` for a
stop...). The worker acts only then, so a redelivered message whose action already finished, failed
or was overtaken by a delete is acknowledged unread. Every driver call is idempotent, so an action
repeated after a crash between the call and the recording of its outcome ends the same way.

Failures: a temporary one is retried with backoff; a permanent one, or a temporary one out of
retries, ends the action with ``ActionFailed``: no task, the vm_state the server had, the power
state the host sees, and the fault. A guest that no longer exists puts the server in ERROR.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable

from commands import loaders
from commands.actions import ACTIONS
from commands.bus import MessageBus
from commands.errors import Conflict, InvalidState, NotFound
from commands.instance import Instance
from commands.servers.actions import FailAction, FinishAction, FinishOffload
from commands.states import PowerState
from workers.outcome import DONE, Outcome, RetryLater, RetryPolicy
from workers.virt import (
    DomainNotFound,
    PermanentVirtError,
    PowerDriver,
    TemporaryVirtError,
    VirtDriver,
    VirtError,
)

log = logging.getLogger(__name__)

ACTION_REQUESTED = "actionrequested"
ACTION_FAILED = "compute.action_failed"


def remove_guest(driver: VirtDriver | PowerDriver, server_id: str) -> None:
    """A clean shutdown first (when the driver can), as Nova's shelve and resize do, then the guest's
    removal. A repeat after a crash between the two finds no guest: it is gone either way."""
    if isinstance(driver, PowerDriver):
        with contextlib.suppress(DomainNotFound):
            driver.power_off(server_id)
    driver.destroy(server_id)


class PowerActions:
    """One host's power actions (start, stop, reboot, pause, suspend ...) and how each ended."""

    def __init__(
        self,
        bus: MessageBus,
        driver: object,
        hostname: str,
        *,
        retry: RetryPolicy | None = None,
        respawn: Callable[[str], int] | None = None,
    ) -> None:
        """``respawn``: redefine and start a server's guest from what its instance now records (the
        compute side's, for ``rebuild``)."""
        self._bus = bus
        self._respawn = respawn
        # A driver without power operations (a test double of the spawn port) fails every action.
        self._driver = driver if isinstance(driver, PowerDriver) else None
        self.hostname = hostname
        self._retry = retry or RetryPolicy()

    def handle(self, key: str, server_id: str, attempt: int) -> Outcome:
        try:
            return self._handle(key, server_id, attempt)
        except Conflict as e:
            return self._retry.retry(attempt, e.message) or RetryLater(self._retry.delays[-1], e.message)

    def _under_way(self, key: str, server_id: str) -> Instance | None:
        """The instance if it lives here and is carrying out ``key`` still."""
        try:
            inst = loaders.instance(self._bus.uow, server_id)
        except NotFound:
            return None
        if inst.host != self.hostname or key not in ACTIONS or inst.task_state != ACTIONS[key].task_state:
            return None
        return inst

    def _handle(self, key: str, server_id: str, attempt: int) -> Outcome:
        if self._under_way(key, server_id) is None:
            # done, failed, superseded by a delete, or not ours: a replay (said, since an action that
            # was never carried out would end here too if the server were read from before it)
            log.info("%s of %s: not under way here, taken for a replay", key, server_id)
            return DONE
        if attempt > self._retry.give_up_after:
            return self._fail(
                key,
                server_id,
                f"gave up after {attempt} tries",
                f"The action was delivered {attempt} times without being settled; the worker stopped "
                "while handling it each time (see the worker's log).",
            )
        if self._driver is None:
            return self._fail(key, server_id, "this host's driver has no power operations", "")
        try:
            if key == "rebuild" and self._respawn is not None:
                power_state = self._respawn(server_id)
            elif key == "shelve":
                power_state = self._offload(self._driver, server_id)
            else:
                power_state = self._carry_out(self._driver, key, server_id)
        except DomainNotFound as e:
            return self._failed(key, server_id, e, attempt, broken=True)
        except TemporaryVirtError as e:
            retry = self._retry.retry_logged(attempt, e.message, log=log, step=key, server_id=server_id)
            if retry is not None:
                return retry
            return self._failed(key, server_id, e, attempt)
        except PermanentVirtError as e:
            return self._failed(key, server_id, e, attempt)
        # A delete that overtook the action refuses this; its own message tears the guest down.
        finish = FinishOffload if key == "shelve" else FinishAction
        with contextlib.suppress(InvalidState, NotFound):
            self._bus.handle(finish(server_id, key, power_state))
        return DONE

    @staticmethod
    def _offload(driver: PowerDriver, server_id: str) -> int:
        remove_guest(driver, server_id)
        return PowerState.SHUTDOWN

    @staticmethod
    def _carry_out(driver: PowerDriver, key: str, server_id: str) -> int:
        if key == "start":
            return driver.power_on(server_id)
        if key == "stop":
            return driver.power_off(server_id)
        if key in ("reboot", "reboot_hard"):
            return driver.reboot(server_id, hard=key == "reboot_hard")
        if key == "pause":
            return driver.pause(server_id)
        if key == "unpause":
            return driver.unpause(server_id)
        if key == "suspend":
            return driver.suspend(server_id)
        if key == "resume":
            return driver.resume(server_id)
        raise ValueError(f"unknown action {key}")  # ACTIONS and this dispatch disagree: a bug

    def _failed(
        self, key: str, server_id: str, error: VirtError, attempt: int, *, broken: bool = False
    ) -> Outcome:
        kind = "temporary, out of retries" if isinstance(error, TemporaryVirtError) else "permanent"
        log.error("%s %s failed (%s): %s", key, server_id, kind, error)
        details = (
            f"{type(error).__name__} ({kind}; hypervisor error code {error.code}; attempt {attempt}): "
            f"{error.message}"
        )
        return self._fail(key, server_id, error.message, details, broken=broken)

    def _fail(self, key: str, server_id: str, why: str, details: str, *, broken: bool = False) -> Outcome:
        action = ACTIONS[key].name
        with contextlib.suppress(InvalidState, NotFound):  # a delete overtook the action
            self._bus.handle(
                FailAction(
                    server_id,
                    key,
                    code=ACTION_FAILED,
                    message=f"Failed to {action} instance: {why}",
                    details=details,
                    power_state=None if broken else self._observed(server_id),
                    broken=broken,
                )
            )
        return DONE

    def _observed(self, server_id: str) -> int | None:
        if self._driver is None:
            return None
        try:
            return self._driver.power_state(server_id)
        except VirtError:
            return None
