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
from uuid import UUID, uuid4

from commands.app import Stratus
from commands.errors import AlreadyExists, NotFound
from commands.metadef import MetadefNamespace
from commands.registry import Registry, registry_id
from commands.unit_of_work import Result, UnitOfWork

METADEF_NAMESPACES = "metadef-namespaces"


@dataclass(frozen=True)
class CreateNamespace:
    fields: dict[str, Any]  # namespace, display_name, description, visibility, protected, owner
    objects: list[dict[str, Any]] = field(default_factory=list)
    properties: dict[str, dict[str, Any]] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    associations: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class UpdateNamespace:
    namespace: str
    fields: dict[str, Any]


@dataclass(frozen=True)
class ChangeNamespace:
    """One change inside a namespace: ``change`` is the domain call (``ns.add_object(...)``)."""

    namespace: str
    change: Callable[[MetadefNamespace], None]


def not_found(name: str) -> NotFound:
    return NotFound(f"Metadata definition namespace={name} was not found.")


class MetadefHandlers(UnitOfWork):
    def __init__(self, app: Stratus, *, new_id: Callable[[], UUID] = uuid4) -> None:
        super().__init__(app)
        self._new_id = new_id

    def registry(self) -> Registry:
        return self.find(Registry, registry_id(METADEF_NAMESPACES)) or Registry(METADEF_NAMESPACES)

    def namespace(self, name: str, project_id: str | None) -> MetadefNamespace:
        """The namespace called ``name`` if ``project_id`` may see it (None: an admin); 404 otherwise."""
        owner = self.registry().names.get(name)
        found = self.find(MetadefNamespace, UUID(owner), appended=True) if owner else None
        if found is None or not found.visible_to(project_id):
            raise not_found(name)
        return found

    def create_namespace(self, cmd: CreateNamespace) -> Result:
        def decide() -> Result:
            namespace = MetadefNamespace.define(
                cmd.fields, cmd.objects, cmd.properties, cmd.tags, cmd.associations
            )
            names = self.registry()
            self._take(names, namespace.namespace, namespace.id)
            return Result(namespace.namespace, self.save(names, namespace))

        return self.retrying(decide)

    def update_namespace(self, cmd: UpdateNamespace) -> Result:
        def decide() -> Result:
            namespace = self.namespace(cmd.namespace, None)
            namespace.update(cmd.fields)
            if namespace.namespace == cmd.namespace:
                return Result(namespace.namespace, self.save(namespace))
            names = self.registry()
            self._take(names, namespace.namespace, namespace.id)
            names.release(cmd.namespace, str(namespace.id))
            return Result(namespace.namespace, self.save(names, namespace))

        return self.retrying(decide)

    def delete_namespace(self, name: str) -> Result:
        def decide() -> Result:
            namespace = self.namespace(name, None)
            namespace.delete()
            names = self.registry()
            names.release(name, str(namespace.id))
            return Result(name, self.save(namespace, names))

        return self.retrying(decide)

    def change(self, cmd: ChangeNamespace) -> Result:
        def decide() -> Result:
            namespace = self.namespace(cmd.namespace, None)
            cmd.change(namespace)
            return Result(namespace.namespace, self.save(namespace))

        return self.retrying(decide)

    @staticmethod
    def _take(names: Registry, name: str, aggregate_id: UUID) -> None:
        try:
            names.take(name, str(aggregate_id), "Metadata definition namespace")
        except AlreadyExists:
            raise AlreadyExists(f"The metadata definition namespace={name} already exists.") from None
