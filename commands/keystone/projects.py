"""A project's use cases: create, update (a rename moves its name), delete (its name is released)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from commands.identity import DEFAULT_DOMAIN_ID, Project
from commands.keystone import loaders
from commands.unit_of_work import Result, UnitOfWork, retried


@dataclass(frozen=True)
class CreateProject:
    """Create a project (``project_id``: a given id, as the bootstrap's; None: a new one)."""

    name: str
    domain_id: str = DEFAULT_DOMAIN_ID
    description: str = ""
    enabled: bool = True
    project_id: str | None = None


@dataclass(frozen=True)
class UpdateProject:
    """Change a project's fields."""

    project_id: str
    name: str | None = None
    description: str | None = None
    enabled: bool | None = None


@dataclass(frozen=True)
class DeleteProject:
    """Delete a project."""

    project_id: str


def create_project(cmd: CreateProject, uow: UnitOfWork, new_identity_id: Callable[[], str]) -> Result:
    """A new project in its domain, taking its name there."""
    pid = cmd.project_id or new_identity_id()
    if cmd.domain_id != DEFAULT_DOMAIN_ID:
        loaders.domain(uow, cmd.domain_id)
    project, _ = Project.create(pid, cmd.name, cmd.domain_id, cmd.description, cmd.enabled)
    return loaders.create_named(uow, project, "project", cmd.domain_id, cmd.name)


@retried
def update_project(cmd: UpdateProject, uow: UnitOfWork) -> Result:
    project = loaders.project(uow, cmd.project_id)
    new_name = cmd.name or project.name
    names = loaders.renamed(uow, "project", project.domain_id, project.name, new_name, cmd.project_id)
    project.rename(new_name)
    project.update(description=cmd.description, enabled=cmd.enabled)
    return Result(cmd.project_id, uow.save(project, *names))


@retried
def delete_project(cmd: DeleteProject, uow: UnitOfWork) -> Result:
    project = loaders.project(uow, cmd.project_id)
    project.delete()
    name = loaders.release_name(uow, "project", project.domain_id, project.name)
    return Result(cmd.project_id, uow.save(project, *name))
