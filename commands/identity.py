"""Identity: projects, users, roles and who holds which role where, as Keystone models them.

Every grant, revocation, disabling and password change is a recorded fact naming who did it (the
envelope's actor), so an auditor can answer "who made this user an admin, and when". Passwords
never enter the log: ``User.PasswordSet`` says only that the password changed; the hash lives in
the API's credentials table (see docs/identity.md).

Names are unique per domain, as in Keystone. A ``Name`` aggregate, whose id is derived from the
kind, domain and name, is created in the same atomic append as the project or user that takes the
name: two concurrent creates of one name cannot both succeed.
"""

from __future__ import annotations

import re
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from commands.errors import AlreadyExists, Forbidden, InvalidInput, NotFound

_NS = uuid5(NAMESPACE_URL, "urn:stratus:identity")
DEFAULT_DOMAIN_ID = "default"
DEFAULT_DOMAIN_NAME = "Default"
# Keystone's default roles (``keystone-manage bootstrap``), each implying the next.
ROLE_NAMES = ("admin", "manager", "member", "reader")
IMPLIED_ROLES = {"admin": "manager", "manager": "member", "member": "reader"}
_NAME_MAX = 255
_ID_RE = re.compile(r"^[0-9a-f]{32}$")


def role_id(name: str) -> str:
    """The built-in roles have the same id in every deployment, derived from their name."""
    return uuid5(_NS, f"role\x00{name}").hex


def bootstrap_id(kind: str, name: str) -> str:
    """The id of the bootstrap admin project or user: fixed, so that seeding twice changes nothing."""
    return uuid5(_NS, f"bootstrap\x00{kind}\x00{name}").hex


def aggregate_id(identity_id: str) -> UUID:
    """Keystone ids are 32 hex digits: the aggregate's UUID written without dashes."""
    if not _ID_RE.match(identity_id):
        raise NotFound(f"Could not find {identity_id!r}.")
    return UUID(hex=identity_id)


def name_id(kind: str, domain_id: str, name: str) -> UUID:
    return uuid5(_NS, f"name\x00{kind}\x00{domain_id}\x00{name}")


def effective_roles(names: set[str] | frozenset[str]) -> tuple[str, ...]:
    """The roles ``names`` grant, implied ones included (admin → manager → member → reader)."""
    found = set(names)
    for name in list(names):
        while name in IMPLIED_ROLES:
            name = IMPLIED_ROLES[name]
            found.add(name)
    return tuple(sorted(found))


def checked_name(what: str, name: str) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > _NAME_MAX:
        raise InvalidInput(f"Invalid input for field '{what}': 1-{_NAME_MAX} characters, not blank.")
    if any(ord(c) < 32 for c in name):
        raise InvalidInput(f"Invalid input for field '{what}': control characters are not allowed.")
    return name


class Name(Aggregate):
    """A name taken in a domain by a project, user or role (its creation event reserves it)."""

    @staticmethod
    def create_id(kind: str, domain_id: str, name: str, owner_id: str) -> UUID:
        return name_id(kind, domain_id, name)

    class Reserved(Aggregate.Created):
        """A name was taken in a domain by a project, user or role; reserved in the same atomic append that
        creates its owner, so names stay unique. Kinds domain, group and application_credential (whose
        names are unique per user: domain_id is the user's id) were added without a new version: every
        earlier event still validates."""

        kind: str
        domain_id: str
        name: str
        owner_id: str

    @event(Reserved)
    def __init__(self, kind: str, domain_id: str, name: str, owner_id: str) -> None:
        self.kind = kind
        self.domain_id = domain_id
        self.name = name
        self.owner_id: str | None = owner_id

    def release(self) -> None:
        """Free the name: its owner was deleted."""
        if self.owner_id is not None:
            self._released()

    class Released(Aggregate.Event):
        """The name's owner (a project or user) was deleted: the name may be given again."""

    @event(Released)
    def _released(self) -> None:
        self.owner_id = None

    def reclaim(self, owner_id: str) -> None:
        """Take a released name for a new owner (``AlreadyExists`` if it is held)."""
        if self.owner_id is not None:
            raise AlreadyExists(f"The {self.kind} name {self.name} is taken.")
        self._reclaimed(owner_id=owner_id)

    class Reclaimed(Aggregate.Event):
        """A released name was given to a new owner."""

        owner_id: str

    @event(Reclaimed)
    def _reclaimed(self, owner_id: str) -> None:
        self.owner_id = owner_id


class _Assignments:
    """Roles given here to users (``grants``) and to groups (``group_grants``): a project, a
    domain or the system. Each of those declares the four events itself, so that each records
    its own (``project.rolegranted``, ``domain.rolegranted``...)."""

    grants: dict[str, set[str]]
    group_grants: dict[str, set[str]]

    def holds(self, user_id: str, role: str) -> bool:
        return role in self.grants.get(user_id, set())

    def group_holds(self, group_id: str, role: str) -> bool:
        # (a project cached or snapshotted before groups existed has no ``group_grants``)
        return role in getattr(self, "group_grants", {}).get(group_id, set())

    def grant(self, user_id: str, role: str) -> None:
        """Give ``user_id`` the role ``role`` (a role id) here; granting it again changes nothing."""
        if not self.holds(user_id, role):
            self._role_granted(user_id=user_id, role_id=role)

    def revoke(self, user_id: str, role: str) -> None:
        if not self.holds(user_id, role):
            raise NotFound(f"Could not find role assignment of role {role} to user {user_id}.")
        self._role_revoked(user_id=user_id, role_id=role)

    def grant_group(self, group_id: str, role: str) -> None:
        """Give every member of ``group_id`` the role ``role`` here (again: no change)."""
        if not self.group_holds(group_id, role):
            self._group_role_granted(group_id=group_id, role_id=role)

    def revoke_group(self, group_id: str, role: str) -> None:
        if not self.group_holds(group_id, role):
            raise NotFound(f"Could not find role assignment of role {role} to group {group_id}.")
        self._group_role_revoked(group_id=group_id, role_id=role)

    def assign(self, actor: str, actor_id: str, role: str) -> None:
        """``grant`` or ``grant_group``, as ``actor`` (``user``, ``group``) says."""
        (self.grant if actor == "user" else self.grant_group)(actor_id, role)

    def unassign(self, actor: str, actor_id: str, role: str) -> None:
        (self.revoke if actor == "user" else self.revoke_group)(actor_id, role)

    # The events, declared by each class that takes this one in.
    def _role_granted(self, user_id: str, role_id: str) -> None:
        raise NotImplementedError

    def _role_revoked(self, user_id: str, role_id: str) -> None:
        raise NotImplementedError

    def _group_role_granted(self, group_id: str, role_id: str) -> None:
        raise NotImplementedError

    def _group_role_revoked(self, group_id: str, role_id: str) -> None:
        raise NotImplementedError


class Project(_Assignments, Aggregate):
    """A Keystone project (or a domain, which Keystone keeps as a project acting as one)."""

    @staticmethod
    def create_id(project_id: str, **_: object) -> UUID:
        return UUID(hex=project_id)

    class Created(Aggregate.Created):
        """A project (Keystone's unit of ownership and isolation) was created. The aggregate id is the
        project id."""

        project_id: str
        name: str
        domain_id: str
        description: str
        enabled: bool

    @event(Created)
    def __init__(self, project_id: str, name: str, domain_id: str, description: str, enabled: bool) -> None:
        self.project_id = project_id
        self.name = name
        self.domain_id = domain_id
        self.description = description
        self.enabled = enabled
        self.deleted = False
        # user id -> role ids held in this project
        self.grants: dict[str, set[str]] = {}
        # group id -> role ids its members hold in this project
        self.group_grants: dict[str, set[str]] = {}

    @classmethod
    def create(
        cls, project_id: str, name: str, domain_id: str, description: str = "", enabled: bool = True
    ) -> tuple[Project, Name]:
        checked_name("name", name)
        project = cls(
            project_id=project_id, name=name, domain_id=domain_id, description=description, enabled=enabled
        )
        return project, Name(kind="project", domain_id=domain_id, name=name, owner_id=project_id)

    def update(self, *, description: str | None = None, enabled: bool | None = None) -> None:
        new_description = self.description if description is None else description
        new_enabled = self.enabled if enabled is None else enabled
        if (new_description, new_enabled) != (self.description, self.enabled):
            self._updated(description=new_description, enabled=new_enabled)

    class Updated(Aggregate.Event):
        """A project's description or enabled flag changed (the event carries the values after the change)."""

        description: str
        enabled: bool

    @event(Updated)
    def _updated(self, description: str, enabled: bool) -> None:
        self.description = description
        self.enabled = enabled

    def rename(self, name: str) -> None:
        if checked_name("name", name) != self.name:
            self._renamed(name=name)

    class Renamed(Aggregate.Event):
        """The project's name changed (the old name is released, the new one reserved, in the same append)."""

        name: str

    @event(Renamed)
    def _renamed(self, name: str) -> None:
        self.name = name

    def delete(self) -> None:
        """Keystone's project delete: the project and its role assignments go (its servers stay)."""
        self._deleted()

    class Deleted(Aggregate.Event):
        """The project was deleted (Keystone's DELETE /v3/projects/{id}): its role assignments and tokens
        end; its servers stay."""

    @event(Deleted)
    def _deleted(self) -> None:
        self.deleted = True
        self.grants = {}
        self.group_grants = {}

    class RoleGranted(Aggregate.Event):
        """A user was given a role in this project. The envelope's actor is who granted it."""

        user_id: str
        role_id: str

    @event(RoleGranted)
    def _role_granted(self, user_id: str, role_id: str) -> None:
        self.grants.setdefault(user_id, set()).add(role_id)

    class RoleRevoked(Aggregate.Event):
        """A user's role in this project was taken away. The envelope's actor is who revoked it."""

        user_id: str
        role_id: str

    @event(RoleRevoked)
    def _role_revoked(self, user_id: str, role_id: str) -> None:
        self.grants[user_id].discard(role_id)

    class GroupRoleGranted(Aggregate.Event):
        """A group was given a role in this project: each of its members holds it there."""

        group_id: str
        role_id: str

    @event(GroupRoleGranted)
    def _group_role_granted(self, group_id: str, role_id: str) -> None:
        # (a project cached or snapshotted before groups existed has no ``group_grants``)
        self.__dict__.setdefault("group_grants", {}).setdefault(group_id, set()).add(role_id)

    class GroupRoleRevoked(Aggregate.Event):
        """A group's role in this project was taken away."""

        group_id: str
        role_id: str

    @event(GroupRoleRevoked)
    def _group_role_revoked(self, group_id: str, role_id: str) -> None:
        self.group_grants[group_id].discard(role_id)


class User(Aggregate):
    """A Keystone user: its name, domain, enabled flag and the record of its password changes."""

    @staticmethod
    def create_id(user_id: str, **_: object) -> UUID:
        return UUID(hex=user_id)

    class Created(Aggregate.Created):
        """A user was created. Never carries a password or its hash."""

        user_id: str
        name: str
        domain_id: str
        default_project_id: str | None
        enabled: bool
        email: str | None
        description: str | None

    @event(Created)
    def __init__(
        self,
        user_id: str,
        name: str,
        domain_id: str,
        default_project_id: str | None,
        enabled: bool,
        email: str | None,
        description: str | None,
    ) -> None:
        self.user_id = user_id
        self.name = name
        self.domain_id = domain_id
        self.default_project_id = default_project_id
        self.enabled = enabled
        self.email = email
        self.description = description
        self.has_password = False
        self.deleted = False

    @classmethod
    def create(
        cls,
        user_id: str,
        name: str,
        domain_id: str,
        *,
        default_project_id: str | None = None,
        enabled: bool = True,
        email: str | None = None,
        description: str | None = None,
    ) -> tuple[User, Name]:
        checked_name("name", name)
        user = cls(
            user_id=user_id,
            name=name,
            domain_id=domain_id,
            default_project_id=default_project_id,
            enabled=enabled,
            email=email,
            description=description,
        )
        return user, Name(kind="user", domain_id=domain_id, name=name, owner_id=user_id)

    def update(
        self,
        *,
        enabled: bool | None = None,
        email: str | None = None,
        description: str | None = None,
        default_project_id: str | None = None,
    ) -> None:
        new = (
            self.enabled if enabled is None else enabled,
            self.email if email is None else email,
            self.description if description is None else description,
            self.default_project_id if default_project_id is None else default_project_id,
        )
        if new != (self.enabled, self.email, self.description, self.default_project_id):
            self._updated(enabled=new[0], email=new[1], description=new[2], default_project_id=new[3])

    class Updated(Aggregate.Event):
        """A user's enabled flag, email, description or default project changed (values after the change).
        A disabled user's tokens stop working."""

        enabled: bool
        email: str | None
        description: str | None
        default_project_id: str | None

    @event(Updated)
    def _updated(
        self, enabled: bool, email: str | None, description: str | None, default_project_id: str | None
    ) -> None:
        self.enabled = enabled
        self.email = email
        self.description = description
        self.default_project_id = default_project_id

    def rename(self, name: str) -> None:
        if checked_name("name", name) != self.name:
            self._renamed(name=name)

    class Renamed(Aggregate.Event):
        """The user's name changed (the old name is released, the new one reserved, in the same append)."""

        name: str

    @event(Renamed)
    def _renamed(self, name: str) -> None:
        self.name = name

    def set_extra(self, changes: dict[str, Any]) -> None:
        """Keystone's extra attributes (any it does not know): ``changes`` replace those named."""
        extra = {**self.__dict__.get("extra", {}), **changes}
        if extra != self.__dict__.get("extra", {}):
            self._extra_set(extra=extra)

    class ExtraSet(Aggregate.Event):
        """The user's extra attributes (any Keystone does not know, such as an older client's project_id),
        whole after the change."""

        extra: dict[str, Any]

    @event(ExtraSet)
    def _extra_set(self, extra: dict[str, Any]) -> None:
        self.extra = extra

    def delete(self) -> None:
        """Keystone's user delete: the user, their role assignments and their tokens go."""
        self._deleted()

    class Deleted(Aggregate.Event):
        """The user was deleted (Keystone's DELETE /v3/users/{id}): their role assignments and tokens end;
        their password hash is removed outside the log."""

    @event(Deleted)
    def _deleted(self) -> None:
        self.deleted = True

    def delete_access_rule(self, rule_id: str) -> None:
        """Forget one of the user's access rules (the API checks that no credential uses it)."""
        self._access_rule_deleted(rule_id=rule_id)

    class AccessRuleDeleted(Aggregate.Event):
        """One of the user's application-credential access rules was deleted (no credential used it)."""

        rule_id: str

    @event(AccessRuleDeleted)
    def _access_rule_deleted(self, rule_id: str) -> None:
        pass

    def password_changed(self) -> None:
        """Record that the user's password changed (the hash itself is kept outside the log)."""
        self._password_set()

    class PasswordSet(Aggregate.Event):
        """A user's password was set or changed. The password and its hash are deliberately absent: the
        hash is kept in the API's credentials table, outside the log."""

    @event(PasswordSet)
    def _password_set(self) -> None:
        self.has_password = True


class Role(Aggregate):
    """A Keystone role, with the roles it implies."""

    @staticmethod
    def create_id(role_id: str, **_: object) -> UUID:
        return UUID(hex=role_id)

    class Created(Aggregate.Created):
        """A role was created (the default roles admin, manager, member, reader are seeded on the first
        run)."""

        role_id: str
        name: str
        description: str

    @event(Created)
    def __init__(self, role_id: str, name: str, description: str) -> None:
        self.role_id = role_id
        self.name = name
        self.description = description
        self.deleted = False
        self.implies: set[str] = set()

    @classmethod
    def create(cls, role_id: str, name: str, description: str = "") -> tuple[Role, Name]:
        checked_name("name", name)
        role = cls(role_id=role_id, name=name, description=description)
        return role, Name(kind="role", domain_id="", name=name, owner_id=role_id)

    @property
    def builtin(self) -> bool:
        return self.role_id in {role_id(n) for n in ROLE_NAMES}

    def update(self, *, name: str | None = None, description: str | None = None) -> None:
        """Rename or describe the role; the built-in roles keep their names (policy names them)."""
        new_name = self.name if name is None else checked_name("name", name)
        if new_name != self.name and self.builtin:
            raise Forbidden(f"The built-in role {self.name} cannot be renamed.")
        new_description = self.description if description is None else description
        if (new_name, new_description) != (self.name, self.description):
            self._updated(name=new_name, description=new_description)

    class Updated(Aggregate.Event):
        """The role's name or description changed (the built-in roles keep their names)."""

        name: str
        description: str

    @event(Updated)
    def _updated(self, name: str, description: str) -> None:
        self.name = name
        self.description = description

    def delete(self) -> None:
        """Keystone's role delete: the role and every assignment of it go; the built-in roles stay."""
        if self.builtin:
            raise Forbidden(f"The built-in role {self.name} cannot be deleted.")
        self._deleted()

    class Deleted(Aggregate.Event):
        """The role was deleted, and every assignment of it with it (never a built-in role)."""

    @event(Deleted)
    def _deleted(self) -> None:
        self.deleted = True

    def imply(self, implied_role_id: str) -> None:
        """Whoever holds this role holds ``implied_role_id`` too (again: no change)."""
        if implied_role_id == self.role_id:
            raise InvalidInput("Invalid input for field 'implies': a role cannot imply itself.")
        if implied_role_id not in self.__dict__.setdefault("implies", set()):
            self._implication_added(implied_role_id=implied_role_id)

    class ImplicationAdded(Aggregate.Event):
        """Whoever holds this role now holds implied_role_id too (Keystone's implied roles)."""

        implied_role_id: str

    @event(ImplicationAdded)
    def _implication_added(self, implied_role_id: str) -> None:
        self.__dict__.setdefault("implies", set()).add(implied_role_id)

    def stop_implying(self, implied_role_id: str) -> None:
        if implied_role_id not in self.__dict__.get("implies", set()):
            raise NotFound(f"{self.role_id} does not imply {implied_role_id}.")
        self._implication_removed(implied_role_id=implied_role_id)

    class ImplicationRemoved(Aggregate.Event):
        """This role no longer implies implied_role_id."""

        implied_role_id: str

    @event(ImplicationRemoved)
    def _implication_removed(self, implied_role_id: str) -> None:
        self.implies.discard(implied_role_id)


class Token(Aggregate):
    """A token that was revoked before it expired (issuing a token records nothing: it is a signature)."""

    @staticmethod
    def create_id(token_id: str, **_: object) -> UUID:
        return UUID(hex=token_id)

    class Revoked(Aggregate.Created):
        """A token was revoked before it expired. Carries the token's id, never the token itself."""

        token_id: str
        user_id: str
        project_id: str
        expires_at: str

    @event(Revoked)
    def __init__(self, token_id: str, user_id: str, project_id: str, expires_at: str) -> None:
        self.token_id = token_id
        self.user_id = user_id
        self.project_id = project_id
        self.expires_at = expires_at


def domain_aggregate_id(domain_id: str) -> UUID:
    """Domains' ids are Keystone's (``default``, or 32 hex digits): the aggregate's is derived from it."""
    return uuid5(_NS, f"domain\x00{domain_id}")


class Domain(_Assignments, Aggregate):
    """A domain: a namespace of projects, users and groups, and a scope for role assignments."""

    @staticmethod
    def create_id(domain_id: str, **_: object) -> UUID:
        return domain_aggregate_id(domain_id)

    class Created(Aggregate.Created):
        """A domain was created (the default domain, id 'default', is seeded on the first run). Its
        aggregate's id is derived from domain_id."""

        domain_id: str
        name: str
        description: str
        enabled: bool

    @event(Created)
    def __init__(self, domain_id: str, name: str, description: str, enabled: bool) -> None:
        self.domain_id = domain_id
        self.name = name
        self.description = description
        self.enabled = enabled
        self.deleted = False
        self.grants: dict[str, set[str]] = {}  # user id -> role ids
        self.group_grants: dict[str, set[str]] = {}  # group id -> role ids

    @classmethod
    def create(
        cls, domain_id: str, name: str, description: str = "", enabled: bool = True
    ) -> tuple[Domain, Name]:
        checked_name("name", name)
        domain = cls(domain_id=domain_id, name=name, description=description, enabled=enabled)
        return domain, Name(kind="domain", domain_id="", name=name, owner_id=domain_id)

    def update(
        self, *, name: str | None = None, description: str | None = None, enabled: bool | None = None
    ) -> None:
        new = (
            self.name if name is None else checked_name("name", name),
            self.description if description is None else description,
            self.enabled if enabled is None else enabled,
        )
        if self.domain_id == DEFAULT_DOMAIN_ID and not new[2]:
            raise Forbidden("The default domain cannot be disabled.")
        if new != (self.name, self.description, self.enabled):
            self._updated(name=new[0], description=new[1], enabled=new[2])

    class Updated(Aggregate.Event):
        """The domain's name, description or enabled flag changed (its whole new state)."""

        name: str
        description: str
        enabled: bool

    @event(Updated)
    def _updated(self, name: str, description: str, enabled: bool) -> None:
        self.name = name
        self.description = description
        self.enabled = enabled

    def delete(self) -> None:
        """Keystone deletes only a disabled domain (its projects, users and groups go with it)."""
        if self.enabled:
            raise Forbidden("Cannot delete a domain that is enabled, please disable it first.")
        self._deleted()

    class Deleted(Aggregate.Event):
        """The disabled domain was deleted; its projects, users and groups were deleted in the same append."""

    @event(Deleted)
    def _deleted(self) -> None:
        self.deleted = True
        self.grants = {}
        self.group_grants = {}

    class RoleGranted(Aggregate.Event):
        """A user was given a role on this domain. The envelope's actor is who granted it."""

        user_id: str
        role_id: str

    @event(RoleGranted)
    def _role_granted(self, user_id: str, role_id: str) -> None:
        self.grants.setdefault(user_id, set()).add(role_id)

    class RoleRevoked(Aggregate.Event):
        """A user's role on this domain was taken away."""

        user_id: str
        role_id: str

    @event(RoleRevoked)
    def _role_revoked(self, user_id: str, role_id: str) -> None:
        self.grants[user_id].discard(role_id)

    class GroupRoleGranted(Aggregate.Event):
        """A group was given a role on this domain (each member holds it)."""

        group_id: str
        role_id: str

    @event(GroupRoleGranted)
    def _group_role_granted(self, group_id: str, role_id: str) -> None:
        self.group_grants.setdefault(group_id, set()).add(role_id)

    class GroupRoleRevoked(Aggregate.Event):
        """A group's role on this domain was taken away."""

        group_id: str
        role_id: str

    @event(GroupRoleRevoked)
    def _group_role_revoked(self, group_id: str, role_id: str) -> None:
        self.group_grants[group_id].discard(role_id)


class Group(Aggregate):
    """A group of users in a domain: a role given to the group is held by each of its members."""

    @staticmethod
    def create_id(group_id: str, **_: object) -> UUID:
        return UUID(hex=group_id)

    class Created(Aggregate.Created):
        """A group of users was created in a domain."""

        group_id: str
        name: str
        domain_id: str
        description: str

    @event(Created)
    def __init__(self, group_id: str, name: str, domain_id: str, description: str) -> None:
        self.group_id = group_id
        self.name = name
        self.domain_id = domain_id
        self.description = description
        self.members: set[str] = set()
        self.deleted = False

    @classmethod
    def create(cls, group_id: str, name: str, domain_id: str, description: str = "") -> tuple[Group, Name]:
        checked_name("name", name)
        group = cls(group_id=group_id, name=name, domain_id=domain_id, description=description)
        return group, Name(kind="group", domain_id=domain_id, name=name, owner_id=group_id)

    def update(self, *, name: str | None = None, description: str | None = None) -> None:
        new_name = self.name if name is None else checked_name("name", name)
        new_description = self.description if description is None else description
        if (new_name, new_description) != (self.name, self.description):
            self._updated(name=new_name, description=new_description)

    class Updated(Aggregate.Event):
        """The group's name or description changed (its whole new state)."""

        name: str
        description: str

    @event(Updated)
    def _updated(self, name: str, description: str) -> None:
        self.name = name
        self.description = description

    def delete(self) -> None:
        self._deleted()

    class Deleted(Aggregate.Event):
        """The group was deleted: its memberships and role assignments end."""

    @event(Deleted)
    def _deleted(self) -> None:
        self.deleted = True
        self.members = set()

    def add(self, user_id: str) -> None:
        if user_id not in self.members:
            self._user_added(user_id=user_id)

    class UserAdded(Aggregate.Event):
        """A user joined the group."""

        user_id: str

    @event(UserAdded)
    def _user_added(self, user_id: str) -> None:
        self.members.add(user_id)

    def remove(self, user_id: str) -> None:
        if user_id not in self.members:
            raise NotFound(f"Could not find user {user_id} in group {self.group_id}.")
        self._user_removed(user_id=user_id)

    class UserRemoved(Aggregate.Event):
        """A user left the group."""

        user_id: str

    @event(UserRemoved)
    def _user_removed(self, user_id: str) -> None:
        self.members.discard(user_id)


SYSTEM_SCOPE = "all"  # Keystone's one system: ``{"system": {"all": true}}``


class System(_Assignments, Aggregate):
    """The deployment itself, as a scope: roles given on it (a system reader reads every project's
    identity data; a system admin administers the cloud). One aggregate, opened by its first grant."""

    @staticmethod
    def create_id() -> UUID:
        return uuid5(_NS, "system")

    class Opened(Aggregate.Created):
        """The system scope's aggregate was opened (by the first role given on the system)."""

    @event(Opened)
    def __init__(self) -> None:
        self.grants: dict[str, set[str]] = {}
        self.group_grants: dict[str, set[str]] = {}

    class RoleGranted(Aggregate.Event):
        """A user was given a role on the system (Keystone's system scope): a system reader reads all
        identity data."""

        user_id: str
        role_id: str

    @event(RoleGranted)
    def _role_granted(self, user_id: str, role_id: str) -> None:
        self.grants.setdefault(user_id, set()).add(role_id)

    class RoleRevoked(Aggregate.Event):
        """A user's role on the system was taken away."""

        user_id: str
        role_id: str

    @event(RoleRevoked)
    def _role_revoked(self, user_id: str, role_id: str) -> None:
        self.grants[user_id].discard(role_id)

    class GroupRoleGranted(Aggregate.Event):
        """A group was given a role on the system (each member holds it)."""

        group_id: str
        role_id: str

    @event(GroupRoleGranted)
    def _group_role_granted(self, group_id: str, role_id: str) -> None:
        self.group_grants.setdefault(group_id, set()).add(role_id)

    class GroupRoleRevoked(Aggregate.Event):
        """A group's role on the system was taken away."""

        group_id: str
        role_id: str

    @event(GroupRoleRevoked)
    def _group_role_revoked(self, group_id: str, role_id: str) -> None:
        self.group_grants[group_id].discard(role_id)
