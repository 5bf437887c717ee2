"""``MigrationHandlers``: resize and cold migration (``commands.servers.moves``) as methods over the
bus, for callers written before there was one."""

from __future__ import annotations

from commands.handlers import Handlers
from commands.servers.moves import (
    ConfirmResize,
    FailMigration,
    FinishMigration,
    FinishRevert,
    LeftDest,
    LeftSource,
    MigrateServer,
    ResizeDecision,
    ResizeServer,
    RevertResize,
    ScheduleMigration,
)
from commands.unit_of_work import Result


class MigrationHandlers:
    """The steps of a move, each one command of ``commands.servers.moves``."""

    def __init__(self, handlers: Handlers) -> None:
        self._h = handlers

    def resize(self, cmd: ResizeServer) -> Result:
        """``ResizeServer``."""
        return self._h.bus.handle(cmd)

    def migrate(self, cmd: MigrateServer) -> Result:
        """``MigrateServer``."""
        return self._h.bus.handle(cmd)

    def confirm(self, cmd: ResizeDecision) -> Result:
        """``ConfirmResize``."""
        return self._h.bus.handle(ConfirmResize(cmd.server_id, cmd.project_id, cmd.admin))

    def revert(self, cmd: ResizeDecision) -> Result:
        """``RevertResize``."""
        return self._h.bus.handle(RevertResize(cmd.server_id, cmd.project_id, cmd.admin))

    def place(self, server_id: str, dest: str) -> Result:
        """``ScheduleMigration``."""
        return self._h.bus.handle(ScheduleMigration(server_id, dest))

    def left_source(self, server_id: str) -> Result:
        """``LeftSource``."""
        return self._h.bus.handle(LeftSource(server_id))

    def finished(self, server_id: str, power_state: int) -> Result:
        """``FinishMigration``."""
        return self._h.bus.handle(FinishMigration(server_id, power_state))

    def left_dest(self, server_id: str) -> Result:
        """``LeftDest``."""
        return self._h.bus.handle(LeftDest(server_id))

    def reverted(self, server_id: str, power_state: int) -> Result:
        """``FinishRevert``."""
        return self._h.bus.handle(FinishRevert(server_id, power_state))

    def fail(self, cmd: FailMigration) -> Result:
        """``FailMigration``."""
        return self._h.bus.handle(cmd)
