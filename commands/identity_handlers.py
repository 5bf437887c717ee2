"""Identity's command handlers: load, one domain call, append (names reserved in the same append).

The password's hash is not the domain's business: ``set_password`` records only that it changed,
and the API writes the hash to its credentials table in the same breath (``api/credentials.py``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from eventsourcing.persistence import IntegrityError

from commands.application_credentials import ApplicationCredentialHandlers
from commands.errors import AlreadyExists
from commands.identity import (
    DEFAULT_DOMAIN_ID,
    DEFAULT_DOMAIN_NAME,
    ROLE_NAMES,
    Domain,
    Name,
    Project,
    Role,
    Token,
    User,
    bootstrap_id,
    role_id,
)
from commands.identity_catalog_handlers import ServiceCatalogHandlers
from commands.identity_domains import DomainHandlers
from commands.unit_of_work import Result


@dataclass(frozen=True)
class CreateProject:
    """Create a project."""

    name: str
    domain_id: str = DEFAULT_DOMAIN_ID
    description: str = ""
    enabled: bool = True


@dataclass(frozen=True)
class UpdateProject:
    """Change a project's fields."""

    project_id: str
    name: str | None = None
    description: str | None = None
    enabled: bool | None = None


@dataclass(frozen=True)
class CreateUser:
    """Create a user."""

    name: str
    domain_id: str = DEFAULT_DOMAIN_ID
    default_project_id: str | None = None
    enabled: bool = True
    email: str | None = None
    description: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class UpdateUser:
    """Change a user's fields (or password)."""

    user_id: str
    name: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    enabled: bool | None = None
    email: str | None = None
    description: str | None = None
    default_project_id: str | None = None


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
class RevokeToken:
    """Revoke a token (Keystone's DELETE /v3/auth/tokens)."""

    token_id: str
    user_id: str
    project_id: str
    expires_at: str


@dataclass(frozen=True)
class Bootstrapped:
    """The admin project, user and role a bootstrap made."""

    project_id: str
    user_id: str
    position: int


class IdentityHandlers(DomainHandlers, ServiceCatalogHandlers, ApplicationCredentialHandlers):
    """Keystone's commands: projects, users, role grants, tokens, and the bootstrap."""

    # -- projects -------------------------------------------------------------------------------

    def create_project(self, cmd: CreateProject, project_id: str | None = None) -> Result:
        pid = project_id or self._new_id()
        if cmd.domain_id != DEFAULT_DOMAIN_ID:
            self.domain(cmd.domain_id)
        project, _ = Project.create(pid, cmd.name, cmd.domain_id, cmd.description, cmd.enabled)
        return self._create_named(project, "project", cmd.domain_id, cmd.name)

    def delete_project(self, project_id: str) -> Result:
        def decide() -> Result:
            project = self.project(project_id)
            project.delete()
            name = self._release_name("project", project.domain_id, project.name)
            return Result(project_id, self.save(project, *name))

        return self.retrying(decide)

    def update_project(self, cmd: UpdateProject) -> Result:
        def decide() -> Result:
            project = self.project(cmd.project_id)
            new_name = cmd.name or project.name
            names = self._renamed("project", project.domain_id, project.name, new_name, cmd.project_id)
            project.rename(new_name)
            project.update(description=cmd.description, enabled=cmd.enabled)
            return Result(cmd.project_id, self.save(project, *names))

        return self.retrying(decide)

    # -- users ----------------------------------------------------------------------------------
    def create_user(self, cmd: CreateUser, user_id: str | None = None) -> Result:
        if cmd.default_project_id is not None:
            self.project(cmd.default_project_id)
        if cmd.domain_id != DEFAULT_DOMAIN_ID:
            self.domain(cmd.domain_id)
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
        user.set_extra(cmd.extra)
        return self._create_named(user, "user", cmd.domain_id, cmd.name)

    def update_user(self, cmd: UpdateUser) -> Result:
        if cmd.default_project_id is not None:
            self.project(cmd.default_project_id)

        def decide() -> Result:
            user = self.user(cmd.user_id)
            names = self._renamed("user", user.domain_id, user.name, cmd.name or user.name, cmd.user_id)
            user.rename(cmd.name or user.name)
            user.set_extra(cmd.extra)
            user.update(
                enabled=cmd.enabled,
                email=cmd.email,
                description=cmd.description,
                default_project_id=cmd.default_project_id,
            )
            return Result(cmd.user_id, self.save(user, *names))

        return self.retrying(decide)

    def delete_user(self, user_id: str) -> Result:
        def decide() -> Result:
            user = self.user(user_id)
            user.delete()
            name = self._release_name("user", user.domain_id, user.name)
            return Result(user_id, self.save(user, *name))

        return self.retrying(decide)

    def record_password_set(self, user_id: str) -> Result:
        def decide() -> Result:
            user = self.user(user_id)
            user.password_changed()
            return Result(user_id, self.save(user))

        return self.retrying(decide)

    # -- role assignments -----------------------------------------------------------------------
    def grant_role(self, cmd: GrantRole) -> Result:
        self.user(cmd.user_id)
        self.role(cmd.role_id)

        def decide() -> Result:
            project = self.project(cmd.project_id)
            project.grant(cmd.user_id, cmd.role_id)
            return Result(cmd.project_id, self.save(project))

        return self.retrying(decide)

    def revoke_role(self, cmd: RevokeRole) -> Result:
        def decide() -> Result:
            project = self.project(cmd.project_id)
            project.revoke(cmd.user_id, cmd.role_id)
            return Result(cmd.project_id, self.save(project))

        return self.retrying(decide)

    # -- tokens ---------------------------------------------------------------------------------
    def revoke_token(self, cmd: RevokeToken) -> Result:
        """Record a token's revocation; revoking it again is a no-op."""
        token = Token(
            token_id=cmd.token_id, user_id=cmd.user_id, project_id=cmd.project_id, expires_at=cmd.expires_at
        )
        try:
            return Result(cmd.token_id, self.save(token))
        except IntegrityError:
            return Result(cmd.token_id, self.app.recorder.max_notification_id() or 0)

    # -- the first run --------------------------------------------------------------------------
    def bootstrap(self, admin_project: str = "admin", admin_user: str = "admin") -> Bootstrapped:
        """The default domain, the catalog, the default roles, an admin project and an admin user
        holding ``admin`` there.

        Idempotent: every id is derived from a name, so a second run (or two API workers at once)
        finds everything in place and appends nothing.
        """
        with contextlib.suppress(IntegrityError):  # seeded before
            self.save(
                Domain(
                    domain_id=DEFAULT_DOMAIN_ID,
                    name=DEFAULT_DOMAIN_NAME,
                    description="The default domain",
                    enabled=True,
                ),
                Name(kind="domain", domain_id="", name=DEFAULT_DOMAIN_NAME, owner_id=DEFAULT_DOMAIN_ID),
            )
        self.seed_catalog()
        for name in ROLE_NAMES:
            rid = role_id(name)
            with contextlib.suppress(IntegrityError):  # seeded before
                self.save(
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
