"""Role assignments: a role given to (or taken from) a user or a group on a project, a domain or the
system. ``GrantRole``/``RevokeRole`` are a user's on a project (the common case); ``AssignRole``/
``UnassignRole`` any other ``Assignment``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from commands.identity import Domain, Project, System
from commands.keystone import loaders
from commands.unit_of_work import Result, UnitOfWork, retried


@dataclass(frozen=True)
class GrantRole:
    """Grant a user a role on a project."""

    project_id: str
    user_id: str
    role_id: str


@dataclass(frozen=True)
class RevokeRole:
    """Revoke a user's role on a project."""

    project_id: str
    user_id: str
    role_id: str


@dataclass(frozen=True)
class Assignment:
    """A role given to a user or a group (``actor`` ``user``/``group``) on a project or a domain."""

    scope: str  # "project", "domain" or "system" (scope_id "all")
    scope_id: str
    actor: str  # "user" or "group"
    actor_id: str
    role_id: str


@dataclass(frozen=True)
class AssignRole:
    """Give the assignment's role (again: no change); the user or group and the role must exist."""

    assignment: Assignment


@dataclass(frozen=True)
class UnassignRole:
    """Take the assignment's role away."""

    assignment: Assignment


@retried
def grant_role(cmd: GrantRole, uow: UnitOfWork) -> Result:
    loaders.user(uow, cmd.user_id)
    loaders.role(uow, cmd.role_id)
    project = loaders.project(uow, cmd.project_id)
    project.grant(cmd.user_id, cmd.role_id)
    return Result(cmd.project_id, uow.save(project))


@retried
def revoke_role(cmd: RevokeRole, uow: UnitOfWork) -> Result:
    project = loaders.project(uow, cmd.project_id)
    project.revoke(cmd.user_id, cmd.role_id)
    return Result(cmd.project_id, uow.save(project))


@retried
def assign_role(cmd: AssignRole, uow: UnitOfWork) -> Result:
    a = cmd.assignment
    (loaders.user if a.actor == "user" else loaders.group)(uow, a.actor_id)
    loaders.role(uow, a.role_id)
    return _on_scope(uow, a, lambda target: target.assign(a.actor, a.actor_id, a.role_id))


@retried
def unassign_role(cmd: UnassignRole, uow: UnitOfWork) -> Result:
    a = cmd.assignment
    return _on_scope(uow, a, lambda target: target.unassign(a.actor, a.actor_id, a.role_id))


def _on_scope(uow: UnitOfWork, a: Assignment, change: Callable[[Project | Domain | System], None]) -> Result:
    target: Project | Domain | System
    if a.scope == "system":
        target = uow.find(System, System.create_id()) or System()
    elif a.scope == "project":
        target = loaders.project(uow, a.scope_id)
    else:
        target = loaders.domain(uow, a.scope_id)
    change(target)
    return Result(a.scope_id, uow.save(target))
