"""Identity's handlers for domains, groups, roles and the role assignments of groups and domains.

Each is load, one domain call, append. A domain's deletion takes its projects, users and groups in
the same append (Keystone's cascade), so no project outlives the domain it was named in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eventsourcing.domain import Aggregate

from commands.identity import DEFAULT_DOMAIN_ID, Domain, Group, Project, Role, System, User
from commands.identity_base import IdentityBase
from commands.unit_of_work import Result


@dataclass(frozen=True)
class CreateDomain:
    """Create a Keystone domain."""

    name: str
    description: str = ""
    enabled: bool = True


@dataclass(frozen=True)
class UpdateDomain:
    """Change a domain's name, description or enabled flag."""

    domain_id: str
    name: str | None = None
    description: str | None = None
    enabled: bool | None = None


@dataclass(frozen=True)
class DeleteDomain:
    """``projects``, ``users`` and ``groups``: the domain's, as the read model lists them."""

    domain_id: str
    projects: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()


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
class Assignment:
    """A role given to a user or a group (``actor`` ``user``/``group``) on a project or a domain."""

    scope: str  # "project", "domain" or "system" (scope_id "all")
    scope_id: str
    actor: str  # "user" or "group"
    actor_id: str
    role_id: str


class DomainHandlers(IdentityBase):
    """Keystone's commands on domains, groups, roles and role assignments."""

    # -- domains --------------------------------------------------------------------------------
    def create_domain(self, cmd: CreateDomain, domain_id: str | None = None) -> Result:
        did = domain_id or self._new_id()
        domain, _ = Domain.create(did, cmd.name, cmd.description, cmd.enabled)
        return self._create_named(domain, "domain", "", cmd.name)

    def update_domain(self, cmd: UpdateDomain) -> Result:
        def decide() -> Result:
            domain = self.domain(cmd.domain_id)
            names = self._renamed("domain", "", domain.name, cmd.name or domain.name, cmd.domain_id)
            domain.update(name=cmd.name, description=cmd.description, enabled=cmd.enabled)
            return Result(cmd.domain_id, self.save(domain, *names))

        return self.retrying(decide)

    def delete_domain(self, cmd: DeleteDomain) -> Result:
        def decide() -> Result:
            domain = self.domain(cmd.domain_id)
            domain.delete()
            gone: list[Aggregate] = [domain, *self._release_name("domain", "", domain.name)]
            members: list[tuple[str, Project | User | Group]] = [
                *(("project", self.project(i)) for i in cmd.projects),
                *(("user", self.user(i)) for i in cmd.users),
                *(("group", self.group(i)) for i in cmd.groups),
            ]
            for kind, member in members:
                member.delete()
                gone += [member, *self._release_name(kind, cmd.domain_id, member.name)]
            return Result(cmd.domain_id, self.save(*gone))

        return self.retrying(decide)

    # -- groups ---------------------------------------------------------------------------------
    def create_group(self, cmd: CreateGroup) -> Result:
        if cmd.domain_id != DEFAULT_DOMAIN_ID:
            self.domain(cmd.domain_id)
        group, _ = Group.create(self._new_id(), cmd.name, cmd.domain_id, cmd.description)
        return self._create_named(group, "group", cmd.domain_id, cmd.name)

    def update_group(self, cmd: UpdateGroup) -> Result:
        def decide() -> Result:
            group = self.group(cmd.group_id)
            names = self._renamed("group", group.domain_id, group.name, cmd.name or group.name, cmd.group_id)
            group.update(name=cmd.name, description=cmd.description)
            return Result(cmd.group_id, self.save(group, *names))

        return self.retrying(decide)

    def delete_group(self, group_id: str) -> Result:
        def decide() -> Result:
            group = self.group(group_id)
            group.delete()
            return Result(
                group_id, self.save(group, *self._release_name("group", group.domain_id, group.name))
            )

        return self.retrying(decide)

    def add_group_user(self, group_id: str, user_id: str) -> Result:
        self.user(user_id)

        def decide() -> Result:
            group = self.group(group_id)
            group.add(user_id)
            return Result(group_id, self.save(group))

        return self.retrying(decide)

    def remove_group_user(self, group_id: str, user_id: str) -> Result:
        def decide() -> Result:
            group = self.group(group_id)
            group.remove(user_id)
            return Result(group_id, self.save(group))

        return self.retrying(decide)

    # -- roles ----------------------------------------------------------------------------------
    def create_role(self, cmd: CreateRole) -> Result:
        role, _ = Role.create(self._new_id(), cmd.name, cmd.description)
        return self._create_named(role, "role", "", cmd.name)

    def update_role(self, cmd: UpdateRole) -> Result:
        def decide() -> Result:
            role = self.role(cmd.role_id)
            names = self._renamed("role", "", role.name, cmd.name or role.name, cmd.role_id)
            role.update(name=cmd.name, description=cmd.description)
            return Result(cmd.role_id, self.save(role, *names))

        return self.retrying(decide)

    def delete_role(self, rid: str) -> Result:
        def decide() -> Result:
            role = self.role(rid)
            role.delete()
            return Result(rid, self.save(role, *self._release_name("role", "", role.name)))

        return self.retrying(decide)

    def imply_role(self, prior_role_id: str, implied_role_id: str) -> Result:
        self.role(implied_role_id)

        def decide() -> Result:
            prior = self.role(prior_role_id)
            prior.imply(implied_role_id)
            return Result(prior_role_id, self.save(prior))

        return self.retrying(decide)

    def stop_implying_role(self, prior_role_id: str, implied_role_id: str) -> Result:
        def decide() -> Result:
            prior = self.role(prior_role_id)
            prior.stop_implying(implied_role_id)
            return Result(prior_role_id, self.save(prior))

        return self.retrying(decide)

    # -- assignments of groups, and on domains and the system ---------------------------------
    def assign(self, a: Assignment) -> Result:
        """Give the role (again: no change); the user or group and the role must exist."""
        (self.user if a.actor == "user" else self.group)(a.actor_id)
        self.role(a.role_id)
        return self._on_scope(a, lambda target: target.assign(a.actor, a.actor_id, a.role_id))

    def unassign(self, a: Assignment) -> Result:
        return self._on_scope(a, lambda target: target.unassign(a.actor, a.actor_id, a.role_id))

    def _on_scope(self, a: Assignment, change: Callable[[Project | Domain | System], None]) -> Result:
        def decide() -> Result:
            target: Project | Domain | System
            if a.scope == "system":
                target = self.find(System, System.create_id()) or System()
            else:
                target = self.project(a.scope_id) if a.scope == "project" else self.domain(a.scope_id)
            change(target)
            return Result(a.scope_id, self.save(target))

        return self.retrying(decide)
