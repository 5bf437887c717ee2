"""A user's use cases: create, update, delete, and a password set.

The password's hash is not the domain's business: ``RecordPasswordSet`` records only that it
changed, and the API writes the hash to its credentials table in the same breath
(``api/identity/credentials.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from commands.identity import DEFAULT_DOMAIN_ID, User
from commands.keystone import loaders
from commands.unit_of_work import Result, UnitOfWork, retried


@dataclass(frozen=True)
class CreateUser:
    """Create a user (``user_id``: a given id, as the bootstrap's; None: a new one)."""

    name: str
    domain_id: str = DEFAULT_DOMAIN_ID
    default_project_id: str | None = None
    enabled: bool = True
    email: str | None = None
    description: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    user_id: str | None = None


@dataclass(frozen=True)
class UpdateUser:
    """Change a user's fields."""

    user_id: str
    name: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    enabled: bool | None = None
    email: str | None = None
    description: str | None = None
    default_project_id: str | None = None


@dataclass(frozen=True)
class DeleteUser:
    """Delete a user."""

    user_id: str


@dataclass(frozen=True)
class RecordPasswordSet:
    """Record that a user's password was set (its hash is kept outside the log)."""

    user_id: str


def create_user(cmd: CreateUser, uow: UnitOfWork, new_identity_id: Callable[[], str]) -> Result:
    """A new user in its domain, taking its name there."""
    if cmd.default_project_id is not None:
        loaders.project(uow, cmd.default_project_id)
    if cmd.domain_id != DEFAULT_DOMAIN_ID:
        loaders.domain(uow, cmd.domain_id)
    uid = cmd.user_id or new_identity_id()
    user, _ = User.create(
        uid,
        cmd.name,
        cmd.domain_id,
        default_project_id=cmd.default_project_id,
        enabled=cmd.enabled,
        email=cmd.email,
        description=cmd.description,
    )
    user.set_extra(cmd.extra)
    return loaders.create_named(uow, user, "user", cmd.domain_id, cmd.name)


@retried
def update_user(cmd: UpdateUser, uow: UnitOfWork) -> Result:
    if cmd.default_project_id is not None:
        loaders.project(uow, cmd.default_project_id)
    user = loaders.user(uow, cmd.user_id)
    names = loaders.renamed(uow, "user", user.domain_id, user.name, cmd.name or user.name, cmd.user_id)
    user.rename(cmd.name or user.name)
    user.set_extra(cmd.extra)
    user.update(
        enabled=cmd.enabled,
        email=cmd.email,
        description=cmd.description,
        default_project_id=cmd.default_project_id,
    )
    return Result(cmd.user_id, uow.save(user, *names))


@retried
def delete_user(cmd: DeleteUser, uow: UnitOfWork) -> Result:
    user = loaders.user(uow, cmd.user_id)
    user.delete()
    name = loaders.release_name(uow, "user", user.domain_id, user.name)
    return Result(cmd.user_id, uow.save(user, *name))


@retried
def record_password_set(cmd: RecordPasswordSet, uow: UnitOfWork) -> Result:
    user = loaders.user(uow, cmd.user_id)
    user.password_changed()
    return Result(cmd.user_id, uow.save(user))
