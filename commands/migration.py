"""Resize and cold migration: the commands, and the appends that move a server's claims between hosts.

Each step is one atomic append of every aggregate it changes, under each one's optimistic-concurrency
check, so a move can never leave resources counted twice or not at all:

- request (API): the instance's ``MigrationRequested`` and, for a resize, the project's usage holding
  the larger of the two flavors (an upsize is checked against the quota here, at once);
- placement (scheduler): the destination's claim for the new flavor, the source's claim handed to
  the migration (Nova's migration consumer), ``MigrationScheduled``;
- the source host stops and removes the guest (``MigratedFromSource``), the destination defines
  and starts it with the new flavor (``MigrationFinished``: VERIFY_RESIZE);
- confirm: the source's migration claim is released and the usage settles on the new flavor;
- revert: the destination removes its guest, its claim is released and the source's migration
  claim is the instance's again (``RevertedOnDest``); the source starts the guest with the old
  flavor and the usage settles on it (``ResizeReverted``);
- failure at any step before VERIFY_RESIZE: the same return to the source (``MigrationFailed``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from uuid import uuid4

from eventsourcing.domain import Aggregate

from commands import loaders
from commands.errors import InvalidInput
from commands.handlers import Handlers
from commands.host import Resources
from commands.instance import MIGRATION, RESIZE, Instance
from commands.unit_of_work import Result
from commands.usage import ProjectUsage


@dataclass(frozen=True)
class ResizeServer:
    server_id: str
    project_id: str | None  # None: an admin acting on any project's server
    flavor_ref: str
    admin: bool = False


@dataclass(frozen=True)
class MigrateServer:
    """Cold migration (admin): the same flavor on another host, ``host`` if given (microversion 2.56)."""

    server_id: str
    host: str | None = None


@dataclass(frozen=True)
class ResizeDecision:
    server_id: str
    project_id: str | None
    admin: bool = False


@dataclass(frozen=True)
class FailMigration:
    server_id: str
    code: str
    message: str
    details: str = ""
    broken: bool = False  # the guest is gone: the server ends in ERROR


class MigrationHandlers:
    def __init__(self, handlers: Handlers) -> None:
        self._h = handlers

    # -- requests (the API) ---------------------------------------------------------------------
    def resize(self, cmd: ResizeServer) -> Result:
        migration_id = str(uuid4())

        def decide() -> Result:
            inst = self._h.instance(cmd.server_id, cmd.project_id)
            flavor = self._h.flavor(cmd.flavor_ref)
            if not (cmd.admin or flavor.accessible_to(inst.project_id)):
                raise InvalidInput(f"Flavor {cmd.flavor_ref} could not be found.")
            if flavor.flavorid == str(inst.flavor["id"]):
                raise InvalidInput("When resizing, instances must change flavor!")
            if flavor.disk < int(inst.flavor["disk"]):
                raise InvalidInput("Resize error: Unable to resize disk down.")
            inst.request_migration(migration_id, RESIZE, flavor.snapshot_for_instance(), admin=cmd.admin)
            books = self._holding(inst, max(flavor.vcpus, int(inst.flavor["vcpus"])),
                                  max(flavor.ram, int(inst.flavor["ram"])))  # fmt: skip
            return Result(cmd.server_id, self._h.uow.save(inst, *books))

        return self._h.uow.retrying_on_usage(decide)

    def migrate(self, cmd: MigrateServer) -> Result:
        migration_id = str(uuid4())

        def decide() -> Result:
            inst = self._h.instance(cmd.server_id)
            if cmd.host is not None:
                self._h.host(cmd.host)  # 404 for a host that does not exist
            inst.request_migration(migration_id, MIGRATION, inst.flavor, admin=True, target_host=cmd.host)
            return Result(cmd.server_id, self._h.uow.save(inst))

        return self._h.uow.retrying(decide)

    def confirm(self, cmd: ResizeDecision) -> Result:
        def decide() -> Result:
            inst = self._h.instance(cmd.server_id, cmd.project_id)
            migration = inst.migration or {}
            inst.confirm_resize(admin=cmd.admin)
            source = self._h.host(migration["source"])
            source.release_migration(migration["id"])
            flavor = migration["new_flavor"]
            books = self._holding(inst, int(flavor["vcpus"]), int(flavor["ram"]))
            return Result(cmd.server_id, self._h.uow.save(inst, source, *books))

        return self._h.uow.retrying_on_usage(decide)

    def revert(self, cmd: ResizeDecision) -> Result:
        def decide() -> Result:
            inst = self._h.instance(cmd.server_id, cmd.project_id)
            inst.request_revert(admin=cmd.admin)
            return Result(cmd.server_id, self._h.uow.save(inst))

        return self._h.uow.retrying(decide)

    # -- the scheduler --------------------------------------------------------------------------
    def place(self, server_id: str, dest: str) -> Result:
        """Claim the new flavor on ``dest`` and hand the source's claim to the migration, atomically;
        ``InsufficientResources`` when ``dest`` has no room (the scheduler tries the next host)."""

        def decide() -> Result:
            inst = self._h.instance(server_id)
            migration = inst.migration or {}
            inst.schedule_migration(dest)
            target, source = self._h.host(dest), self._h.host(migration["source"])
            target.claim(server_id, Resources.of_flavor(migration["new_flavor"]))
            source.hand_to_migration(server_id, migration["id"])
            group = self._h.server_group_of(server_id)
            if group is not None:  # a hard (anti-)affinity refuses the host here, under its own check
                group.record_placement(server_id, dest)
            return Result(server_id, self._h.uow.save(inst, target, source, *([group] if group else [])))

        return self._h.uow.retrying(decide)

    # -- the hosts ------------------------------------------------------------------------------
    def left_source(self, server_id: str) -> Result:
        def decide() -> Result:
            inst = self._h.instance(server_id)
            inst.leave_source()
            return Result(server_id, self._h.uow.save(inst))

        return self._h.uow.retrying(decide)

    def finished(self, server_id: str, power_state: int) -> Result:
        def decide() -> Result:
            inst = self._h.instance(server_id)
            inst.finish_migration(power_state)
            return Result(server_id, self._h.uow.save(inst))

        return self._h.uow.retrying(decide)

    def left_dest(self, server_id: str) -> Result:
        """The destination removed the reverted guest: its claim goes, the source's is the instance's."""

        def decide() -> Result:
            inst = self._h.instance(server_id)
            migration = inst.migration or {}
            inst.leave_dest()
            return Result(server_id, self._h.uow.save(inst, *self._back_to_source(server_id, migration)))

        return self._h.uow.retrying(decide)

    def reverted(self, server_id: str, power_state: int) -> Result:
        def decide() -> Result:
            inst = self._h.instance(server_id)
            inst.finish_revert(power_state)
            flavor = inst.flavor
            books = self._holding(inst, int(flavor["vcpus"]), int(flavor["ram"]))
            return Result(server_id, self._h.uow.save(inst, *books))

        return self._h.uow.retrying_on_usage(decide)

    def fail(self, cmd: FailMigration) -> Result:
        """The move failed before VERIFY_RESIZE: back on the source, with the old flavor and its usage."""

        def decide() -> Result:
            inst = self._h.instance(cmd.server_id)
            migration = inst.migration or {}
            inst.fail_migration(cmd.code, cmd.message, cmd.details, broken=cmd.broken)
            hosts = self._back_to_source(cmd.server_id, migration)
            # An ERROR server keeps its host's claim and its quota (a rebuild brings it back there).
            books = self._holding(inst, int(inst.flavor["vcpus"]), int(inst.flavor["ram"]))
            return Result(cmd.server_id, self._h.uow.save(inst, *hosts, *books))

        return self._h.uow.retrying_on_usage(decide)

    # -- what the steps share -------------------------------------------------------------------
    def _back_to_source(self, server_id: str, migration: dict[str, object]) -> list[Aggregate]:
        """The destination's claim released, the source's migration claim the instance's again, and
        its server group told it is back on the source."""
        changed: list[Aggregate] = []
        if migration.get("dest"):
            dest = self._h.host(str(migration["dest"]))
            dest.release(server_id)
            changed.append(dest)
        source = self._h.host(str(migration["source"]))
        source.take_back_from_migration(str(migration["id"]))
        group = self._h.server_group_of(server_id)
        if group is not None:
            group.return_member(server_id, str(migration["source"]))
            changed.append(group)
        return [*changed, source]

    def _holding(self, inst: Instance, cores: int, ram: int) -> Sequence[ProjectUsage]:
        usage = self._h.usage(inst.project_id)
        books = loaders.usage_to_save(usage) if inst.server_id in usage.holdings else [usage]
        changed = books[-1].hold(inst.server_id, cores, ram, self._h.limits(inst.project_id))
        return books if changed else ()
