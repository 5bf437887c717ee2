"""Commands on Glance's metadata definitions: a namespace and what is defined in it.

A namespace is found by its name through the ``METADEF_NAMESPACES`` registry (names are unique across
the cloud and may change); each handler loads it, makes one domain call and appends. Who may write
(an admin, by Glance's default policy) is the API's decision; what a project may read,
``MetadefNamespace.visible_to``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from commands import loaders
from commands.errors import AlreadyExists, NotFound
from commands.metadef import MetadefNamespace
from commands.registry import Registry
from commands.unit_of_work import Result, UnitOfWork, retried

METADEF_NAMESPACES = "metadef-namespaces"


@dataclass(frozen=True)
class CreateNamespace:
    """Create a namespace with what it defines."""

    fields: dict[str, Any]  # namespace, display_name, description, visibility, protected, owner
    objects: list[dict[str, Any]] = field(default_factory=list)
    properties: dict[str, dict[str, Any]] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    associations: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class UpdateNamespace:
    """Change a namespace's own fields (its name too)."""

    namespace: str
    fields: dict[str, Any]


@dataclass(frozen=True)
class ChangeNamespace:
    """One change inside a namespace: ``change`` is the domain call (``ns.add_object(...)``)."""

    namespace: str
    change: Callable[[MetadefNamespace], None]


@dataclass(frozen=True)
class DeleteNamespace:
    """Delete a namespace and all it defines; its name is free again."""

    namespace: str


def not_found(name: str) -> NotFound:
    """Glance's 404 for a namespace."""
    return NotFound(f"Metadata definition namespace={name} was not found.")


def namespace(uow: UnitOfWork, name: str, project_id: str | None) -> MetadefNamespace:
    """The namespace called ``name`` if ``project_id`` may see it (None: an admin); 404 otherwise."""
    owner = loaders.registry(uow, METADEF_NAMESPACES).names.get(name)
    found = uow.find(MetadefNamespace, UUID(owner), appended=True) if owner else None
    if found is None or not found.visible_to(project_id):
        raise not_found(name)
    return found


@retried
def create_namespace(cmd: CreateNamespace, uow: UnitOfWork) -> Result:
    """A namespace whose name is new."""
    created = MetadefNamespace.define(cmd.fields, cmd.objects, cmd.properties, cmd.tags, cmd.associations)
    names = loaders.registry(uow, METADEF_NAMESPACES)
    _take(names, created.namespace, created.id)
    return Result(created.namespace, uow.save(names, created))


@retried
def update_namespace(cmd: UpdateNamespace, uow: UnitOfWork) -> Result:
    """A new name is taken and the old one released, in the same append."""
    found = namespace(uow, cmd.namespace, None)
    found.update(cmd.fields)
    if found.namespace == cmd.namespace:
        return Result(found.namespace, uow.save(found))
    names = loaders.registry(uow, METADEF_NAMESPACES)
    _take(names, found.namespace, found.id)
    names.release(cmd.namespace, str(found.id))
    return Result(found.namespace, uow.save(names, found))


@retried
def delete_namespace(cmd: DeleteNamespace, uow: UnitOfWork) -> Result:
    """The namespace is deleted and its name released."""
    found = namespace(uow, cmd.namespace, None)
    found.delete()
    names = loaders.registry(uow, METADEF_NAMESPACES)
    names.release(cmd.namespace, str(found.id))
    return Result(cmd.namespace, uow.save(found, names))


@retried
def change(cmd: ChangeNamespace, uow: UnitOfWork) -> Result:
    """One change inside the namespace."""
    found = namespace(uow, cmd.namespace, None)
    cmd.change(found)
    return Result(found.namespace, uow.save(found))


def _take(names: Registry, name: str, aggregate_id: UUID) -> None:
    try:
        names.take(name, str(aggregate_id), "Metadata definition namespace")
    except AlreadyExists:
        raise AlreadyExists(f"The metadata definition namespace={name} already exists.") from None
