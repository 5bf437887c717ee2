"""A role's use cases: create, update, delete, and the roles it implies."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from commands.identity import Role
from commands.keystone import loaders
from commands.unit_of_work import Result, UnitOfWork, retried


@dataclass(frozen=True)
class CreateRole:
    """Create a role."""

    name: str
    description: str = ""


@dataclass(frozen=True)
class UpdateRole:
    """Change a role's name or description."""

    role_id: str
    name: str | None = None
    description: str | None = None


@dataclass(frozen=True)
class DeleteRole:
    """Delete a role."""

    role_id: str


@dataclass(frozen=True)
class ImplyRole:
    """Make a role imply another (Keystone's implied roles)."""

    prior_role_id: str
    implied_role_id: str


@dataclass(frozen=True)
class StopImplyingRole:
    """Make a role stop implying another."""

    prior_role_id: str
    implied_role_id: str


def create_role(cmd: CreateRole, uow: UnitOfWork, new_identity_id: Callable[[], str]) -> Result:
    role, _ = Role.create(new_identity_id(), cmd.name, cmd.description)
    return loaders.create_named(uow, role, "role", "", cmd.name)


@retried
def update_role(cmd: UpdateRole, uow: UnitOfWork) -> Result:
    role = loaders.role(uow, cmd.role_id)
    names = loaders.renamed(uow, "role", "", role.name, cmd.name or role.name, cmd.role_id)
    role.update(name=cmd.name, description=cmd.description)
    return Result(cmd.role_id, uow.save(role, *names))


@retried
def delete_role(cmd: DeleteRole, uow: UnitOfWork) -> Result:
    role = loaders.role(uow, cmd.role_id)
    role.delete()
    return Result(cmd.role_id, uow.save(role, *loaders.release_name(uow, "role", "", role.name)))


@retried
def imply_role(cmd: ImplyRole, uow: UnitOfWork) -> Result:
    loaders.role(uow, cmd.implied_role_id)
    prior = loaders.role(uow, cmd.prior_role_id)
    prior.imply(cmd.implied_role_id)
    return Result(cmd.prior_role_id, uow.save(prior))


@retried
def stop_implying_role(cmd: StopImplyingRole, uow: UnitOfWork) -> Result:
    prior = loaders.role(uow, cmd.prior_role_id)
    prior.stop_implying(cmd.implied_role_id)
    return Result(cmd.prior_role_id, uow.save(prior))
