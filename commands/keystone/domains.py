"""A domain's use cases: create, update, delete. A domain's deletion takes its projects, users and
groups in the same append (Keystone's cascade), so no project outlives the domain it was named in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eventsourcing.domain import Aggregate

from commands.identity import Domain, Group, Project, User
from commands.keystone import loaders
from commands.unit_of_work import Result, UnitOfWork, retried


@dataclass(frozen=True)
class CreateDomain:
    """Create a Keystone domain (``domain_id``: a given id; None: a new one)."""

    name: str
    description: str = ""
    enabled: bool = True
    domain_id: str | None = None


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


def create_domain(cmd: CreateDomain, uow: UnitOfWork, new_identity_id: Callable[[], str]) -> Result:
    did = cmd.domain_id or new_identity_id()
    domain, _ = Domain.create(did, cmd.name, cmd.description, cmd.enabled)
    return loaders.create_named(uow, domain, "domain", "", cmd.name)


@retried
def update_domain(cmd: UpdateDomain, uow: UnitOfWork) -> Result:
    domain = loaders.domain(uow, cmd.domain_id)
    names = loaders.renamed(uow, "domain", "", domain.name, cmd.name or domain.name, cmd.domain_id)
    domain.update(name=cmd.name, description=cmd.description, enabled=cmd.enabled)
    return Result(cmd.domain_id, uow.save(domain, *names))


@retried
def delete_domain(cmd: DeleteDomain, uow: UnitOfWork) -> Result:
    domain = loaders.domain(uow, cmd.domain_id)
    domain.delete()
    gone: list[Aggregate] = [domain, *loaders.release_name(uow, "domain", "", domain.name)]
    members: list[tuple[str, Project | User | Group]] = [
        *(("project", loaders.project(uow, i)) for i in cmd.projects),
        *(("user", loaders.user(uow, i)) for i in cmd.users),
        *(("group", loaders.group(uow, i)) for i in cmd.groups),
    ]
    for kind, member in members:
        member.delete()
        gone += [member, *loaders.release_name(uow, kind, cmd.domain_id, member.name)]
    return Result(cmd.domain_id, uow.save(*gone))
