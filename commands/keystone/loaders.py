"""What every Keystone handler shares: loading identity aggregates by their Keystone ids (answering
Keystone's 404), and names unique in a domain, taken, released and renamed in the same append as
their owner's event."""

from __future__ import annotations

from typing import TypeVar
from uuid import UUID, uuid4

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError

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


def new_identity_id() -> str:
    """A new Keystone id: 32 hex digits, as Keystone makes them (the bus's ``new_identity_id``)."""
    return uuid4().hex


def load(uow: UnitOfWork, cls: type[A], agg_id: UUID, what: str, shown_id: str) -> A:
    """The live (not deleted) aggregate ``agg_id`` of class ``cls``; 404 as Keystone words it."""
    try:
        agg: Aggregate = uow.app.repository.get(agg_id)
    except AggregateNotFoundError:
        raise NotFound(f"Could not find {what}: {shown_id}.") from None
    if not isinstance(agg, cls) or getattr(agg, "deleted", False):
        raise NotFound(f"Could not find {what}: {shown_id}.")
    return agg


def identity(uow: UnitOfWork, cls: type[A], identity_id: str, what: str) -> A:
    """The aggregate whose id is the Keystone id ``identity_id`` (32 hex digits)."""
    try:
        agg_id = aggregate_id(identity_id)
    except NotFound:
        raise NotFound(f"Could not find {what}: {identity_id}.") from None
    return load(uow, cls, agg_id, what, identity_id)


def project(uow: UnitOfWork, project_id: str) -> Project:
    return identity(uow, Project, project_id, "project")


def user(uow: UnitOfWork, user_id: str) -> User:
    return identity(uow, User, user_id, "user")


def role(uow: UnitOfWork, rid: str) -> Role:
    return identity(uow, Role, rid, "role")


def group(uow: UnitOfWork, group_id: str) -> Group:
    return identity(uow, Group, group_id, "group")


def domain(uow: UnitOfWork, domain_id: str) -> Domain:
    return load(uow, Domain, domain_aggregate_id(domain_id), "domain", domain_id)


def _claim_name(
    uow: UnitOfWork, owner: Aggregate, kind: str, domain_id: str, name: str, *others: Aggregate
) -> int:
    """Save ``owner`` (and ``others``) with its name: a new reservation, or a released one
    reclaimed (the name of a deleted project or user may be given again)."""
    owner_id = str(getattr(owner, f"{kind}_id"))
    try:
        released: Name = uow.app.repository.get(name_id(kind, domain_id, name))
    except AggregateNotFoundError:
        return uow.save(owner, *others, Name(kind=kind, domain_id=domain_id, name=name, owner_id=owner_id))
    released.reclaim(owner_id)
    return uow.save(owner, *others, released)


def create_named(
    uow: UnitOfWork, owner: Aggregate, kind: str, domain_id: str, name: str, *others: Aggregate
) -> Result:
    """Save a new ``owner`` taking ``name``; 409 in Keystone's words when the name is taken."""
    try:
        return Result(
            str(getattr(owner, f"{kind}_id")), _claim_name(uow, owner, kind, domain_id, name, *others)
        )
    except (IntegrityError, AlreadyExists):
        if _name_taken(uow, kind, domain_id, name):
            what = kind.replace("_", " ")
            raise AlreadyExists(f"Conflict occurred attempting to store {what} - {name}.") from None
        raise


def renamed(uow: UnitOfWork, kind: str, domain_id: str, old: str, new: str, owner_id: str) -> list[Name]:
    """The names to save with an owner renamed from ``old`` to ``new`` (none when unchanged)."""
    if old == new:
        return []
    released = release_name(uow, kind, domain_id, old)
    try:
        taken: Name = uow.app.repository.get(name_id(kind, domain_id, new))
    except AggregateNotFoundError:
        return [*released, Name(kind=kind, domain_id=domain_id, name=new, owner_id=owner_id)]
    try:
        taken.reclaim(owner_id)
    except AlreadyExists:
        raise AlreadyExists(f"Conflict occurred attempting to store {kind} - {new}.") from None
    return [*released, taken]


def release_name(uow: UnitOfWork, kind: str, domain_id: str, name: str) -> list[Name]:
    """The name to save released with its owner's deletion (none when it was never recorded)."""
    try:
        held: Name = uow.app.repository.get(name_id(kind, domain_id, name))
    except AggregateNotFoundError:
        return []
    held.release()
    return [held]


def _name_taken(uow: UnitOfWork, kind: str, domain_id: str, name: str) -> bool:
    try:
        held: object = uow.app.repository.get(name_id(kind, domain_id, name))
    except AggregateNotFoundError:
        return False
    return getattr(held, "owner_id", None) is not None
