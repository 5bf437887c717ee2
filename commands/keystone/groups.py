"""A group's use cases: create, update, delete, and its members."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from commands.identity import DEFAULT_DOMAIN_ID, Group
from commands.keystone import loaders
from commands.unit_of_work import Result, UnitOfWork, retried


@dataclass(frozen=True)
class CreateGroup:
    """Create a group of users in a domain."""

    name: str
    domain_id: str = DEFAULT_DOMAIN_ID
    description: str = ""


@dataclass(frozen=True)
class UpdateGroup:
    """Change a group's name or description."""

    group_id: str
    name: str | None = None
    description: str | None = None


@dataclass(frozen=True)
class DeleteGroup:
    """Delete a group."""

    group_id: str


@dataclass(frozen=True)
class AddGroupUser:
    """Make a user a member of a group."""

    group_id: str
    user_id: str


@dataclass(frozen=True)
class RemoveGroupUser:
    """Take a user out of a group."""

    group_id: str
    user_id: str


def create_group(cmd: CreateGroup, uow: UnitOfWork, new_identity_id: Callable[[], str]) -> Result:
    if cmd.domain_id != DEFAULT_DOMAIN_ID:
        loaders.domain(uow, cmd.domain_id)
    group, _ = Group.create(new_identity_id(), cmd.name, cmd.domain_id, cmd.description)
    return loaders.create_named(uow, group, "group", cmd.domain_id, cmd.name)


@retried
def update_group(cmd: UpdateGroup, uow: UnitOfWork) -> Result:
    group = loaders.group(uow, cmd.group_id)
    names = loaders.renamed(uow, "group", group.domain_id, group.name, cmd.name or group.name, cmd.group_id)
    group.update(name=cmd.name, description=cmd.description)
    return Result(cmd.group_id, uow.save(group, *names))


@retried
def delete_group(cmd: DeleteGroup, uow: UnitOfWork) -> Result:
    group = loaders.group(uow, cmd.group_id)
    group.delete()
    return Result(
        cmd.group_id, uow.save(group, *loaders.release_name(uow, "group", group.domain_id, group.name))
    )


@retried
def add_group_user(cmd: AddGroupUser, uow: UnitOfWork) -> Result:
    loaders.user(uow, cmd.user_id)
    group = loaders.group(uow, cmd.group_id)
    group.add(cmd.user_id)
    return Result(cmd.group_id, uow.save(group))


@retried
def remove_group_user(cmd: RemoveGroupUser, uow: UnitOfWork) -> Result:
    group = loaders.group(uow, cmd.group_id)
    group.remove(cmd.user_id)
    return Result(cmd.group_id, uow.save(group))
