"""Resize and cold migration: the commands, and the appends that move a server's claims between hosts.

Each step is one atomic append of every aggregate it changes, under each one's optimistic-concurrency
check, so a move can never leave resources counted twice or not at all:

- request (API): the instance's ``MigrationRequested`` and, for a resize, the project's usage holding
  the larger of the two flavors (an upsize is checked against the quota here, at once);
- scheduling (scheduler): the destination's claim for the new flavor, the source's claim handed to
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
from commands.host import Resources
from commands.instance import MIGRATION, RESIZE, Instance
from commands.unit_of_work import Result, UnitOfWork, retried
from commands.usage import ProjectUsage


@dataclass(frozen=True)
class ResizeServer:
    """Resize a server to another flavor."""

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
    """Confirm or revert a resize (which one: the command it is sent as)."""

    server_id: str
    project_id: str | None
    admin: bool = False


@dataclass(frozen=True)
class ConfirmResize(ResizeDecision):
    """Keep the new flavor: the source's migration claim is released."""


@dataclass(frozen=True)
class RevertResize(ResizeDecision):
    """Go back to the old flavor on the source."""


@dataclass(frozen=True)
class ScheduleMigration:
    """The scheduler chose ``dest`` for the server's move."""

    server_id: str
    dest: str


@dataclass(frozen=True)
class LeftSource:
    """The source host stopped and removed the moving guest."""

    server_id: str


@dataclass(frozen=True)
class FinishMigration:
    """The destination runs the moved guest (VERIFY_RESIZE)."""

    server_id: str
    power_state: int


@dataclass(frozen=True)
class LeftDest:
    """The destination removed the guest of a reverted resize."""

    server_id: str


@dataclass(frozen=True)
class FinishRevert:
    """The source runs the guest again, with the old flavor."""

    server_id: str
    power_state: int


@dataclass(frozen=True)
class FailMigration:
    """The move failed before VERIFY_RESIZE."""

    server_id: str
    code: str
    message: str
    details: str = ""
    broken: bool = False  # the guest is gone: the server ends in ERROR


# -- requests (the API) ---------------------------------------------------------------------------
def resize(cmd: ResizeServer, uow: UnitOfWork) -> Result:
    """A resize with a new migration id."""
    return _resize(cmd, uow, str(uuid4()))


@retried(on_usage=True)
def _resize(cmd: ResizeServer, uow: UnitOfWork, migration_id: str) -> Result:
    inst = loaders.instance(uow, cmd.server_id, cmd.project_id)
    flavor = loaders.flavor(uow, cmd.flavor_ref)
    if not (cmd.admin or flavor.accessible_to(inst.project_id)):
        raise InvalidInput(f"Flavor {cmd.flavor_ref} could not be found.")
    if flavor.flavorid == str(inst.flavor["id"]):
        raise InvalidInput("When resizing, instances must change flavor!")
    if flavor.disk < int(inst.flavor["disk"]):
        raise InvalidInput("Resize error: Unable to resize disk down.")
    inst.request_migration(migration_id, RESIZE, flavor.snapshot_for_instance(), admin=cmd.admin)
    books = _holding(uow, inst, max(flavor.vcpus, int(inst.flavor["vcpus"])),
                     max(flavor.ram, int(inst.flavor["ram"])))  # fmt: skip
    return Result(cmd.server_id, uow.save(inst, *books))


def migrate(cmd: MigrateServer, uow: UnitOfWork) -> Result:
    """A cold migration with a new migration id."""
    return _migrate(cmd, uow, str(uuid4()))


@retried
def _migrate(cmd: MigrateServer, uow: UnitOfWork, migration_id: str) -> Result:
    inst = loaders.instance(uow, cmd.server_id)
    if cmd.host is not None:
        loaders.host(uow, cmd.host)  # 404 for a host that does not exist
    inst.request_migration(migration_id, MIGRATION, inst.flavor, admin=True, target_host=cmd.host)
    return Result(cmd.server_id, uow.save(inst))


@retried(on_usage=True)
def confirm(cmd: ConfirmResize, uow: UnitOfWork) -> Result:
    """The usage settles on the new flavor."""
    inst = loaders.instance(uow, cmd.server_id, cmd.project_id)
    migration = inst.migration or {}
    inst.confirm_resize(admin=cmd.admin)
    source = loaders.host(uow, migration["source"])
    source.release_migration(migration["id"])
    flavor = migration["new_flavor"]
    books = _holding(uow, inst, int(flavor["vcpus"]), int(flavor["ram"]))
    return Result(cmd.server_id, uow.save(inst, source, *books))


@retried
def revert(cmd: RevertResize, uow: UnitOfWork) -> Result:
    """The hosts undo the move (``left_dest``, ``reverted``)."""
    inst = loaders.instance(uow, cmd.server_id, cmd.project_id)
    inst.request_revert(admin=cmd.admin)
    return Result(cmd.server_id, uow.save(inst))


# -- the scheduler --------------------------------------------------------------------------------
@retried
def schedule(cmd: ScheduleMigration, uow: UnitOfWork) -> Result:
    """Claim the new flavor on ``dest`` and hand the source's claim to the migration, atomically;
    ``InsufficientResources`` when ``dest`` has no room (the scheduler tries the next host)."""
    server_id, dest = cmd.server_id, cmd.dest
    inst = loaders.instance(uow, server_id)
    migration = inst.migration or {}
    inst.schedule_migration(dest)
    target, source = loaders.host(uow, dest), loaders.host(uow, migration["source"])
    target.claim(server_id, Resources.of_flavor(migration["new_flavor"]))
    source.hand_to_migration(server_id, migration["id"])
    group = loaders.server_group_of(uow, server_id)
    if group is not None:  # a hard (anti-)affinity refuses the host here, under its own check
        group.record_placement(server_id, dest)
    return Result(server_id, uow.save(inst, target, source, *([group] if group else [])))


# -- the hosts ------------------------------------------------------------------------------------
@retried
def left_source(cmd: LeftSource, uow: UnitOfWork) -> Result:
    """The guest is gone from the source."""
    inst = loaders.instance(uow, cmd.server_id)
    inst.leave_source()
    return Result(cmd.server_id, uow.save(inst))


@retried
def finished(cmd: FinishMigration, uow: UnitOfWork) -> Result:
    """The server waits for its resize to be confirmed or reverted."""
    inst = loaders.instance(uow, cmd.server_id)
    inst.finish_migration(cmd.power_state)
    return Result(cmd.server_id, uow.save(inst))


@retried
def left_dest(cmd: LeftDest, uow: UnitOfWork) -> Result:
    """The destination's claim goes, the source's is the instance's."""
    inst = loaders.instance(uow, cmd.server_id)
    migration = inst.migration or {}
    inst.leave_dest()
    return Result(cmd.server_id, uow.save(inst, *_back_to_source(uow, cmd.server_id, migration)))


@retried(on_usage=True)
def reverted(cmd: FinishRevert, uow: UnitOfWork) -> Result:
    """The usage settles on the old flavor."""
    inst = loaders.instance(uow, cmd.server_id)
    inst.finish_revert(cmd.power_state)
    flavor = inst.flavor
    books = _holding(uow, inst, int(flavor["vcpus"]), int(flavor["ram"]))
    return Result(cmd.server_id, uow.save(inst, *books))


@retried(on_usage=True)
def fail(cmd: FailMigration, uow: UnitOfWork) -> Result:
    """Back on the source, with the old flavor and its usage."""
    inst = loaders.instance(uow, cmd.server_id)
    migration = inst.migration or {}
    inst.fail_migration(cmd.code, cmd.message, cmd.details, broken=cmd.broken)
    hosts = _back_to_source(uow, cmd.server_id, migration)
    # An ERROR server keeps its host's claim and its quota (a rebuild brings it back there).
    books = _holding(uow, inst, int(inst.flavor["vcpus"]), int(inst.flavor["ram"]))
    return Result(cmd.server_id, uow.save(inst, *hosts, *books))


# -- what the steps share -------------------------------------------------------------------------
def _back_to_source(uow: UnitOfWork, server_id: str, migration: dict[str, object]) -> list[Aggregate]:
    """The destination's claim released, the source's migration claim the instance's again, and
    its server group told it is back on the source."""
    changed: list[Aggregate] = []
    if migration.get("dest"):
        dest = loaders.host(uow, str(migration["dest"]))
        dest.release(server_id)
        changed.append(dest)
    source = loaders.host(uow, str(migration["source"]))
    source.take_back_from_migration(str(migration["id"]))
    group = loaders.server_group_of(uow, server_id)
    if group is not None:
        group.return_member(server_id, str(migration["source"]))
        changed.append(group)
    return [*changed, source]


def _holding(uow: UnitOfWork, inst: Instance, cores: int, ram: int) -> Sequence[ProjectUsage]:
    usage = loaders.usage(uow, inst.project_id)
    books = loaders.usage_to_save(usage) if inst.server_id in usage.holdings else [usage]
    changed = books[-1].hold(inst.server_id, cores, ram, uow.limits(inst.project_id))
    return books if changed else ()
