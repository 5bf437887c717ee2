"""``LifecycleHandlers`` and ``ReconciliationHandlers``: a server's actions
(``commands.servers.actions``) and what its host found of it (``commands.servers.reconcile``) as
methods over the bus, for callers written before there was one."""

from __future__ import annotations

from commands.handlers import Handlers
from commands.servers import reconcile
from commands.servers.actions import (
    FailAction,
    FinishAction,
    FinishOffload,
    LockServer,
    PinZone,
    RebuildServer,
    RequestAction,
    ResetServerState,
    UnlockServer,
    UnshelveServer,
)
from commands.servers.reconcile import RecordStrayGuests, SyncPowerState
from commands.unit_of_work import Result


class LifecycleHandlers:
    """Each method sends its command to the bus."""

    def __init__(self, handlers: Handlers) -> None:
        self._h = handlers

    def request_action(self, cmd: RequestAction) -> Result:
        """``RequestAction``."""
        return self._h.bus.handle(cmd)

    def rebuild(self, cmd: RebuildServer) -> Result:
        """``RebuildServer``."""
        return self._h.bus.handle(cmd)

    def unshelve(self, cmd: UnshelveServer) -> Result:
        """``UnshelveServer``."""
        return self._h.bus.handle(cmd)

    def finish_offload(self, cmd: FinishAction) -> Result:
        """``FinishOffload``."""
        return self._h.bus.handle(FinishOffload(cmd.server_id, cmd.action, cmd.power_state))

    def finish_action(self, cmd: FinishAction) -> Result:
        """``FinishAction``."""
        return self._h.bus.handle(cmd)

    def fail_action(self, cmd: FailAction) -> Result:
        """``FailAction``."""
        return self._h.bus.handle(cmd)

    def pin_zone(self, cmd: PinZone) -> Result:
        """``PinZone``."""
        return self._h.bus.handle(cmd)

    def reset_state(self, cmd: ResetServerState) -> Result:
        """``ResetServerState``."""
        return self._h.bus.handle(cmd)

    def lock(self, cmd: LockServer) -> Result:
        """``LockServer``."""
        return self._h.bus.handle(cmd)

    def unlock(self, cmd: UnlockServer) -> Result:
        """``UnlockServer``."""
        return self._h.bus.handle(cmd)


class ReconciliationHandlers:
    """Each method sends its command to the bus."""

    def __init__(self, handlers: Handlers) -> None:
        self._h = handlers

    def sync_power_state(self, cmd: SyncPowerState) -> bool:
        """``SyncPowerState``: True when the report changed the server."""
        return self._h.bus.handle(cmd)

    def deleted_instance(self, server_id: str) -> bool:
        """``commands.servers.reconcile.deleted_instance``."""
        return reconcile.deleted_instance(self._h.uow, server_id)

    def record_strays(self, cmd: RecordStrayGuests) -> bool:
        """``RecordStrayGuests``: True when the census changed."""
        return self._h.bus.handle(cmd)
