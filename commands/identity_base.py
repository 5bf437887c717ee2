"""What every identity handler shares: loading identity aggregates by their Keystone ids, and names
unique in a domain (taken, released and renamed in the same append as their owner's event)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar
from uuid import UUID, uuid4

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError

from commands.app import Stratus
from commands.errors import AlreadyExists, NotFound
from commands.identity import (
    Domain,
    Group,
    Name,
    Project,
    Role,
    User,
    aggregate_id,
    domain_aggregate_id,
    name_id,
)
from commands.unit_of_work import Result, UnitOfWork

A = TypeVar("A", bound=Aggregate)


class IdentityBase(UnitOfWork):
    """What Keystone's command handlers share: loading identities, and unique names per domain."""

    def __init__(self, app: Stratus, *, new_id: Callable[[], str] = lambda: uuid4().hex, attempts: int = 5):
        super().__init__(app, attempts=attempts)
        self._new_id = new_id

    def _load(self, cls: type[A], agg_id: UUID, what: str, shown_id: str) -> A:
        try:
            agg: Aggregate = self.app.repository.get(agg_id)
        except AggregateNotFoundError:
            raise NotFound(f"Could not find {what}: {shown_id}.") from None
        if not isinstance(agg, cls) or getattr(agg, "deleted", False):
            raise NotFound(f"Could not find {what}: {shown_id}.")
        return agg

    def _identity(self, cls: type[A], identity_id: str, what: str) -> A:
        try:
            agg_id = aggregate_id(identity_id)
        except NotFound:
            raise NotFound(f"Could not find {what}: {identity_id}.") from None
        return self._load(cls, agg_id, what, identity_id)

    def _claim_name(self, owner: Aggregate, kind: str, domain_id: str, name: str, *others: Aggregate) -> int:
        """Save ``owner`` (and ``others``) with its name: a new reservation, or a released one
        reclaimed (the name of a deleted project or user may be given again)."""
        owner_id = str(getattr(owner, f"{kind}_id"))
        try:
            released: Name = self.app.repository.get(name_id(kind, domain_id, name))
        except AggregateNotFoundError:
            return self.save(
                owner, *others, Name(kind=kind, domain_id=domain_id, name=name, owner_id=owner_id)
            )
        released.reclaim(owner_id)
        return self.save(owner, *others, released)

    def _create_named(
        self, owner: Aggregate, kind: str, domain_id: str, name: str, *others: Aggregate
    ) -> Result:
        """Save a new ``owner`` taking ``name``; 409 in Keystone's words when the name is taken."""
        try:
            return Result(
                str(getattr(owner, f"{kind}_id")), self._claim_name(owner, kind, domain_id, name, *others)
            )
        except (IntegrityError, AlreadyExists):
            if self._name_taken(kind, domain_id, name):
                what = kind.replace("_", " ")
                raise AlreadyExists(f"Conflict occurred attempting to store {what} - {name}.") from None
            raise

    def _renamed(self, kind: str, domain_id: str, old: str, new: str, owner_id: str) -> list[Name]:
        """The names to save with an owner renamed from ``old`` to ``new`` (none when unchanged)."""
        if old == new:
            return []
        released = self._release_name(kind, domain_id, old)
        try:
            taken: Name = self.app.repository.get(name_id(kind, domain_id, new))
        except AggregateNotFoundError:
            return [*released, Name(kind=kind, domain_id=domain_id, name=new, owner_id=owner_id)]
        try:
            taken.reclaim(owner_id)
        except AlreadyExists:
            raise AlreadyExists(f"Conflict occurred attempting to store {kind} - {new}.") from None
        return [*released, taken]

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

    def group(self, group_id: str) -> Group:
        return self._identity(Group, group_id, "group")

    def domain(self, domain_id: str) -> Domain:
        return self._load(Domain, domain_aggregate_id(domain_id), "domain", domain_id)
