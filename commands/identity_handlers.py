"""Identity's command handlers: load, one domain call, append (names reserved in the same append).

The password's hash is not the domain's business: ``set_password`` records only that it changed,
and the API writes the hash to its credentials table in the same breath (``api/credentials.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar
from uuid import uuid4

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError

from commands.app import Stratus
from commands.base import HandlerBase, Result
from commands.errors import AlreadyExists, NotFound
from commands.identity import (
    DEFAULT_DOMAIN_ID,
    ROLE_NAMES,
    Name,
    Project,
    Role,
    Token,
    User,
    aggregate_id,
    bootstrap_id,
    name_id,
    role_id,
)

A = TypeVar("A", bound=Aggregate)
T = TypeVar("T")


@dataclass(frozen=True)
class CreateProject:
    name: str
    domain_id: str = DEFAULT_DOMAIN_ID
    description: str = ""
    enabled: bool = True


@dataclass(frozen=True)
class UpdateProject:
    project_id: str
    description: str | None = None
    enabled: bool | None = None


@dataclass(frozen=True)
class CreateUser:
    name: str
    domain_id: str = DEFAULT_DOMAIN_ID
    default_project_id: str | None = None
    enabled: bool = True
    email: str | None = None
    description: str | None = None


@dataclass(frozen=True)
class UpdateUser:
    user_id: str
    enabled: bool | None = None
    email: str | None = None
    description: str | None = None
    default_project_id: str | None = None


@dataclass(frozen=True)
class GrantRole:
    project_id: str
    user_id: str
    role_id: str


@dataclass(frozen=True)
class RevokeRole:
    project_id: str
    user_id: str
    role_id: str


@dataclass(frozen=True)
class RevokeToken:
    token_id: str
    user_id: str
    project_id: str
    expires_at: str


@dataclass(frozen=True)
class Bootstrapped:
    project_id: str
    user_id: str
    position: int


class IdentityHandlers(HandlerBase):
    def __init__(self, app: Stratus, *, new_id: Callable[[], str] = lambda: uuid4().hex, attempts: int = 5):
        super().__init__(app, attempts=attempts)
        self._new_id = new_id

    # -- plumbing -------------------------------------------------------------------------------
    def _identity(self, cls: type[A], identity_id: str, what: str) -> A:
        try:
            agg: Aggregate = self.app.repository.get(aggregate_id(identity_id))
        except (AggregateNotFoundError, NotFound):
            raise NotFound(f"Could not find {what}: {identity_id}.") from None
        if not isinstance(agg, cls) or getattr(agg, "deleted", False):
            raise NotFound(f"Could not find {what}: {identity_id}.")
        return agg

    def _claim_name(self, owner: Aggregate, kind: str, domain_id: str, name: str) -> int:
        """Save ``owner`` with its name: a new reservation, or a released one reclaimed (the name of
        a deleted project or user may be given again)."""
        owner_id = str(getattr(owner, f"{kind}_id"))
        try:
            released: Name = self.app.repository.get(name_id(kind, domain_id, name))
        except AggregateNotFoundError:
            return self._save(owner, Name(kind=kind, domain_id=domain_id, name=name, owner_id=owner_id))
        released.reclaim(owner_id)
        return self._save(owner, released)

    def _release_name(self, kind: str, domain_id: str, name: str) -> list[Name]:
        try:
            held: Name = self.app.repository.get(name_id(kind, domain_id, name))
        except AggregateNotFoundError:
            return []
        held.release()
        return [held]

    def _name_taken(self, kind: str, domain_id: str, name: str) -> bool:
        try:
            held: object = self.app.repository.get(name_id(kind, domain_id, name))
        except AggregateNotFoundError:
            return False
        return getattr(held, "owner_id", None) is not None

    def project(self, project_id: str) -> Project:
        return self._identity(Project, project_id, "project")

    def user(self, user_id: str) -> User:
        return self._identity(User, user_id, "user")

    def role(self, rid: str) -> Role:
        return self._identity(Role, rid, "role")

    # -- projects -------------------------------------------------------------------------------
    def create_project(self, cmd: CreateProject, project_id: str | None = None) -> Result:
        pid = project_id or self._new_id()
        project, _ = Project.create(pid, cmd.name, cmd.domain_id, cmd.description, cmd.enabled)
        try:
            return Result(pid, self._claim_name(project, "project", cmd.domain_id, cmd.name))
        except (IntegrityError, AlreadyExists):
            if self._name_taken("project", cmd.domain_id, cmd.name):
                raise AlreadyExists(f"Conflict occurred attempting to store project - {cmd.name}.") from None
            raise

    def delete_project(self, project_id: str) -> Result:
        def decide() -> Result:
            project = self.project(project_id)
            project.delete()
            name = self._release_name("project", project.domain_id, project.name)
            return Result(project_id, self._save(project, *name))

        return self._retrying(decide)

    def update_project(self, cmd: UpdateProject) -> Result:
        def decide() -> Result:
            project = self.project(cmd.project_id)
            project.update(description=cmd.description, enabled=cmd.enabled)
            return Result(cmd.project_id, self._save(project))

        return self._retrying(decide)

    # -- users ----------------------------------------------------------------------------------
    def create_user(self, cmd: CreateUser, user_id: str | None = None) -> Result:
        if cmd.default_project_id is not None:
            self.project(cmd.default_project_id)
        uid = user_id or self._new_id()
        user, _ = User.create(
            uid,
            cmd.name,
            cmd.domain_id,
            default_project_id=cmd.default_project_id,
            enabled=cmd.enabled,
            email=cmd.email,
            description=cmd.description,
        )
        try:
            return Result(uid, self._claim_name(user, "user", cmd.domain_id, cmd.name))
        except (IntegrityError, AlreadyExists):
            if self._name_taken("user", cmd.domain_id, cmd.name):
                raise AlreadyExists(f"Conflict occurred attempting to store user - {cmd.name}.") from None
            raise

    def update_user(self, cmd: UpdateUser) -> Result:
        if cmd.default_project_id is not None:
            self.project(cmd.default_project_id)

        def decide() -> Result:
            user = self.user(cmd.user_id)
            user.update(
                enabled=cmd.enabled,
                email=cmd.email,
                description=cmd.description,
                default_project_id=cmd.default_project_id,
            )
            return Result(cmd.user_id, self._save(user))

        return self._retrying(decide)

    def delete_user(self, user_id: str) -> Result:
        def decide() -> Result:
            user = self.user(user_id)
            user.delete()
            name = self._release_name("user", user.domain_id, user.name)
            return Result(user_id, self._save(user, *name))

        return self._retrying(decide)

    def record_password_set(self, user_id: str) -> Result:
        def decide() -> Result:
            user = self.user(user_id)
            user.password_changed()
            return Result(user_id, self._save(user))

        return self._retrying(decide)

    # -- role assignments -----------------------------------------------------------------------
    def grant_role(self, cmd: GrantRole) -> Result:
        self.user(cmd.user_id)
        self.role(cmd.role_id)

        def decide() -> Result:
            project = self.project(cmd.project_id)
            project.grant(cmd.user_id, cmd.role_id)
            return Result(cmd.project_id, self._save(project))

        return self._retrying(decide)

    def revoke_role(self, cmd: RevokeRole) -> Result:
        def decide() -> Result:
            project = self.project(cmd.project_id)
            project.revoke(cmd.user_id, cmd.role_id)
            return Result(cmd.project_id, self._save(project))

        return self._retrying(decide)

    # -- tokens ---------------------------------------------------------------------------------
    def revoke_token(self, cmd: RevokeToken) -> Result:
        """Record a token's revocation; revoking it again is a no-op."""
        token = Token(
            token_id=cmd.token_id, user_id=cmd.user_id, project_id=cmd.project_id, expires_at=cmd.expires_at
        )
        try:
            return Result(cmd.token_id, self._save(token))
        except IntegrityError:
            return Result(cmd.token_id, self.app.recorder.max_notification_id() or 0)

    # -- the first run --------------------------------------------------------------------------
    def bootstrap(self, admin_project: str = "admin", admin_user: str = "admin") -> Bootstrapped:
        """The default roles, an admin project and an admin user holding ``admin`` there.

        Idempotent: every id is derived from a name, so a second run (or two API workers at once)
        finds everything in place and appends nothing.
        """
        for name in ROLE_NAMES:
            rid = role_id(name)
            with contextlib.suppress(IntegrityError):  # seeded before
                self._save(
                    Role(role_id=rid, name=name, description=f"Keystone's default role {name}"),
                    Name(kind="role", domain_id="", name=name, owner_id=rid),
                )
        pid = bootstrap_id("project", admin_project)
        uid = bootstrap_id("user", admin_user)
        try:
            self.create_project(CreateProject(admin_project, description="Bootstrap project"), pid)
        except AlreadyExists:
            self.project(pid)  # the name is ours from an earlier run, not someone else's
        try:
            self.create_user(CreateUser(admin_user, default_project_id=pid), uid)
        except AlreadyExists:
            self.user(uid)
        result = self.grant_role(GrantRole(pid, uid, role_id("admin")))
        return Bootstrapped(pid, uid, result.position)
