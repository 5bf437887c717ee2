"""MetadefNamespace: a Glance metadata definitions namespace, with everything defined in it.

A namespace (``OS::Compute::Hypervisor``...) describes metadata other resources may carry: its
properties (each a small JSON schema), objects (named groups of properties), tags, and the resource
types it applies to (``OS::Glance::Image``, with an optional prefix for its properties). Glance keeps
these in five tables; here one aggregate holds them all, so a name taken twice inside a namespace is
refused by the decision itself (Glance's 409), and a namespace's deletion takes its content with it.

Namespace names are unique across the cloud: ``commands.registry`` (kind ``METADEF_NAMESPACES``)
holds them, so that two creates racing for one name cannot both succeed and a namespace may be
renamed. Only an admin writes (Glance's default policy); who may read is decided by ``visible_to``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventsourcing.domain import Aggregate, event

from commands.errors import AlreadyExists, Forbidden, NotFound

PUBLIC = "public"
PRIVATE = "private"
VISIBILITIES = (PUBLIC, PRIVATE)
# What ``ContentCleared`` may clear: everything of one kind in the namespace.
OBJECTS, PROPERTIES, TAGS = "objects", "properties", "tags"
# The namespace's own fields, as a create or an update (Glance's PUT replaces them all) sets them.
FIELDS = ("namespace", "display_name", "description", "visibility", "protected", "owner")


@dataclass(frozen=True)
class MetadefObject:
    """An object of a metadata definitions namespace: a named group of properties."""

    description: str | None
    required: tuple[str, ...]
    properties: dict[str, Any]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Stamped:
    """A tag's times (a tag is only its name)."""

    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Association:
    """The namespace applies to a resource type, its properties named with ``prefix``."""

    prefix: str | None
    properties_target: str | None
    created_at: datetime
    updated_at: datetime


def _without(items: dict[str, Any], name: str) -> dict[str, Any]:
    return {k: v for k, v in items.items() if k != name}


def _tag_key(name: str) -> str:
    return name.casefold()  # Glance: "metadata tag names are case insensitive"


class MetadefNamespace(Aggregate):
    """A Glance metadata definitions namespace, with every object, property, tag and association in it."""

    class Created(Aggregate.Created):
        """An admin defined a namespace, possibly with its first content (Glance's create takes it all)."""

        namespace: str
        display_name: str | None
        description: str | None
        visibility: str
        protected: bool
        owner: str
        objects: dict[str, dict[str, Any]]
        properties: dict[str, dict[str, Any]]
        tags: list[str]
        resource_type_associations: dict[str, dict[str, Any]]

    class Updated(Aggregate.Event):
        """The namespace's own fields now are these (a rename changes ``namespace``)."""

        namespace: str
        display_name: str | None
        description: str | None
        visibility: str
        protected: bool
        owner: str

        def apply(self, aggregate: Any) -> None:
            for key in FIELDS:
                setattr(aggregate, key, getattr(self, key))
            aggregate.fields_updated_at = self.timestamp

    class Deleted(Aggregate.Event):
        """The namespace was deleted, with everything defined in it; its name is free again."""

        def apply(self, aggregate: Any) -> None:
            aggregate.deleted = True

    class ObjectAdded(Aggregate.Event):
        """An object (a named group of properties) was defined in the namespace."""

        name: str
        description: str | None
        required: list[str]
        properties: dict[str, Any]

        def apply(self, aggregate: Any) -> None:
            obj = MetadefObject(
                self.description, tuple(self.required), dict(self.properties), self.timestamp, self.timestamp
            )
            aggregate.objects = {**aggregate.objects, self.name: obj}

    class ObjectUpdated(Aggregate.Event):
        """The object called ``name`` now is this one (called ``new_name``)."""

        name: str
        new_name: str
        description: str | None
        required: list[str]
        properties: dict[str, Any]

        def apply(self, aggregate: Any) -> None:
            old = aggregate.objects[self.name]
            obj = MetadefObject(
                self.description, tuple(self.required), dict(self.properties), old.created_at, self.timestamp
            )
            rest = _without(aggregate.objects, self.name)
            aggregate.objects = {**rest, self.new_name: obj}

    class ObjectRemoved(Aggregate.Event):
        """An object was removed from the namespace."""

        name: str

        def apply(self, aggregate: Any) -> None:
            aggregate.objects = _without(aggregate.objects, self.name)

    class PropertyAdded(Aggregate.Event):
        """A property was defined in the namespace."""

        name: str
        schema: dict[str, Any]

        def apply(self, aggregate: Any) -> None:
            aggregate.properties = {**aggregate.properties, self.name: dict(self.schema)}

    class PropertyUpdated(Aggregate.Event):
        """The property called name was replaced by this definition, called new_name."""

        name: str
        new_name: str
        schema: dict[str, Any]

        def apply(self, aggregate: Any) -> None:
            rest = _without(aggregate.properties, self.name)
            aggregate.properties = {**rest, self.new_name: dict(self.schema)}

    class PropertyRemoved(Aggregate.Event):
        """A property was removed from the namespace."""

        name: str

        def apply(self, aggregate: Any) -> None:
            aggregate.properties = _without(aggregate.properties, self.name)

    class TagsAdded(Aggregate.Event):
        """Tags defined; ``replacing``: they replaced every tag the namespace had."""

        names: list[str]
        replacing: bool

        def apply(self, aggregate: Any) -> None:
            kept = {} if self.replacing else aggregate.tags
            aggregate.tags = {**kept, **{n: Stamped(self.timestamp, self.timestamp) for n in self.names}}

    class TagRenamed(Aggregate.Event):
        """A tag of the namespace was renamed."""

        name: str
        new_name: str

        def apply(self, aggregate: Any) -> None:
            old = aggregate.tags[self.name]
            rest = _without(aggregate.tags, self.name)
            aggregate.tags = {**rest, self.new_name: Stamped(old.created_at, self.timestamp)}

    class TagRemoved(Aggregate.Event):
        """A tag was removed from the namespace."""

        name: str

        def apply(self, aggregate: Any) -> None:
            aggregate.tags = _without(aggregate.tags, self.name)

    class ContentCleared(Aggregate.Event):
        """Every object, property or tag (``kind``) of the namespace was removed."""

        kind: str

        def apply(self, aggregate: Any) -> None:
            setattr(aggregate, self.kind, {})

    class ResourceTypeAssociated(Aggregate.Event):
        """The namespace was associated with a resource type (its properties apply to it)."""

        name: str
        prefix: str | None
        properties_target: str | None

        def apply(self, aggregate: Any) -> None:
            association = Association(self.prefix, self.properties_target, self.timestamp, self.timestamp)
            aggregate.associations = {**aggregate.associations, self.name: association}

    class ResourceTypeDissociated(Aggregate.Event):
        """The namespace no longer applies to a resource type."""

        name: str

        def apply(self, aggregate: Any) -> None:
            aggregate.associations = _without(aggregate.associations, self.name)

    @event(Created)
    def __init__(
        self,
        namespace: str,
        display_name: str | None,
        description: str | None,
        visibility: str,
        protected: bool,
        owner: str,
        objects: dict[str, dict[str, Any]],
        properties: dict[str, dict[str, Any]],
        tags: list[str],
        resource_type_associations: dict[str, dict[str, Any]],
    ) -> None:
        self.namespace = namespace
        self.display_name = display_name
        self.description = description
        self.visibility = visibility
        self.protected = protected
        self.owner = owner
        self.deleted = False
        at = self.created_on
        self.fields_updated_at = at  # Glance's updated_at: the namespace's own fields, not its content
        self.objects: dict[str, MetadefObject] = {
            name: MetadefObject(
                o.get("description"), tuple(o.get("required") or ()), dict(o.get("properties") or {}), at, at
            )
            for name, o in objects.items()
        }
        self.properties: dict[str, dict[str, Any]] = {k: dict(v) for k, v in properties.items()}
        self.tags: dict[str, Stamped] = {name: Stamped(at, at) for name in tags}
        self.associations: dict[str, Association] = {
            name: Association(a.get("prefix"), a.get("properties_target"), at, at)
            for name, a in resource_type_associations.items()
        }

    @classmethod
    def define(
        cls,
        fields: dict[str, Any],
        objects: list[dict[str, Any]],
        properties: dict[str, dict[str, Any]],
        tags: list[str],
        associations: list[dict[str, Any]],
    ) -> MetadefNamespace:
        """A new namespace and its first content; names taken twice in it are Glance's 409."""
        name = fields["namespace"]
        by_name: dict[str, dict[str, Any]] = {}
        for obj in objects:
            if obj["name"] in by_name:
                raise AlreadyExists(_duplicate_object(obj["name"], name))
            by_name[obj["name"]] = {k: v for k, v in obj.items() if k != "name"}
        seen: set[str] = set()
        for tag in tags:
            if _tag_key(tag) in seen:
                raise AlreadyExists(_duplicate_tag(tag, name))
            seen.add(_tag_key(tag))
        types: dict[str, dict[str, Any]] = {}
        for association in associations:
            if association["name"] in types:
                raise AlreadyExists(_duplicate_association(association["name"], name))
            types[association["name"]] = {k: v for k, v in association.items() if k != "name"}
        return cls(
            namespace=name,
            display_name=fields.get("display_name"),
            description=fields.get("description"),
            visibility=fields.get("visibility") or PRIVATE,
            protected=bool(fields.get("protected") or False),
            owner=fields["owner"],
            objects=by_name,
            properties=properties,
            tags=list(tags),
            resource_type_associations=types,
        )

    # -- reading ------------------------------------------------------------------------------------
    def visible_to(self, project_id: str | None) -> bool:
        """Glance: an admin (None) sees every namespace, others public ones and their project's own."""
        if self.deleted:
            return False
        return project_id is None or self.visibility == PUBLIC or self.owner == project_id

    def get_object(self, name: str) -> MetadefObject:
        found = self.objects.get(name)
        if found is None:
            raise NotFound(
                f"The metadata definition object with name={name} was not found in"
                f" namespace={self.namespace}."
            )
        return found

    def get_property(self, name: str) -> dict[str, Any]:
        found = self.properties.get(name)
        if found is None:
            raise NotFound(
                f"The metadata definition property with name={name} was not found in"
                f" namespace={self.namespace}."
            )
        return found

    def get_tag(self, name: str) -> Stamped:
        found = self.tags.get(name)
        if found is None:
            raise NotFound(
                f"The metadata definition tag with name={name} was not found in namespace={self.namespace}."
            )
        return found

    def get_association(self, name: str) -> Association:
        found = self.associations.get(name)
        if found is None:
            raise NotFound(f"Failed to find resource type {name} to delete")
        return found

    # -- the namespace ------------------------------------------------------------------------------
    def update(self, fields: dict[str, Any]) -> None:
        values = {key: fields.get(key) for key in FIELDS}
        values["visibility"] = values["visibility"] or PRIVATE
        values["protected"] = bool(values["protected"] or False)
        if any(getattr(self, key) != values[key] for key in FIELDS):
            self.trigger_event(self.Updated, **values)

    def delete(self) -> None:
        self._ensure_unprotected(f"Metadata definition namespace {self.namespace} is protected")
        self.trigger_event(self.Deleted)

    def _ensure_unprotected(self, what: str) -> None:
        if self.protected:
            raise Forbidden(f"{what} and cannot be deleted.")

    # -- objects ------------------------------------------------------------------------------------
    def add_object(
        self, name: str, description: str | None, required: list[str], properties: dict[str, Any]
    ) -> None:
        if name in self.objects:
            raise AlreadyExists(_duplicate_object(name, self.namespace))
        self.trigger_event(
            self.ObjectAdded, name=name, description=description, required=required, properties=properties
        )

    def update_object(
        self,
        name: str,
        new_name: str,
        description: str | None,
        required: list[str],
        properties: dict[str, Any],
    ) -> None:
        self.get_object(name)
        if new_name != name and new_name in self.objects:
            raise AlreadyExists(_duplicate_object(new_name, self.namespace))
        self.trigger_event(
            self.ObjectUpdated,
            name=name, new_name=new_name, description=description, required=required, properties=properties,
        )  # fmt: skip

    def remove_object(self, name: str) -> None:
        self.get_object(name)
        self._ensure_unprotected(f"Metadata definition object {name} is protected")
        self.trigger_event(self.ObjectRemoved, name=name)

    # -- properties ---------------------------------------------------------------------------------
    def add_property(self, name: str, schema: dict[str, Any]) -> None:
        if name in self.properties:
            raise AlreadyExists(
                f"A metadata definition property with name={name} already exists in"
                f" namespace={self.namespace}."
            )
        self.trigger_event(self.PropertyAdded, name=name, schema=schema)

    def update_property(self, name: str, new_name: str, schema: dict[str, Any]) -> None:
        self.get_property(name)
        if new_name != name and new_name in self.properties:
            raise AlreadyExists(
                f"A metadata definition property with name={new_name} already exists in"
                f" namespace={self.namespace}."
            )
        self.trigger_event(self.PropertyUpdated, name=name, new_name=new_name, schema=schema)

    def remove_property(self, name: str) -> None:
        self.get_property(name)
        self._ensure_unprotected(f"Metadata definition property {name} is protected")
        self.trigger_event(self.PropertyRemoved, name=name)

    # -- tags ---------------------------------------------------------------------------------------
    def add_tags(self, names: list[str], *, replacing: bool) -> None:
        """Define tags (Glance's POST .../tags replaces them all unless told to append)."""
        taken = set() if replacing else {_tag_key(t) for t in self.tags}
        for name in names:
            if _tag_key(name) in taken:
                raise AlreadyExists(_duplicate_tag(name, self.namespace))
            taken.add(_tag_key(name))
        self.trigger_event(self.TagsAdded, names=list(names), replacing=replacing)

    def rename_tag(self, name: str, new_name: str) -> None:
        self.get_tag(name)
        if new_name == name:
            return
        if any(_tag_key(t) == _tag_key(new_name) for t in self.tags if t != name):
            raise AlreadyExists(_duplicate_tag(new_name, self.namespace))
        self.trigger_event(self.TagRenamed, name=name, new_name=new_name)

    def remove_tag(self, name: str) -> None:
        self.get_tag(name)
        self._ensure_unprotected(f"Metadata definition tag {name} is protected")
        self.trigger_event(self.TagRemoved, name=name)

    def clear(self, kind: str) -> None:
        """Remove every object, property or tag; refused in a protected namespace, as Glance does."""
        self._ensure_unprotected(f"Metadata definition namespace {self.namespace} is protected")
        if getattr(self, kind):
            self.trigger_event(self.ContentCleared, kind=kind)

    # -- resource types -----------------------------------------------------------------------------
    def associate(self, name: str, prefix: str | None, properties_target: str | None) -> None:
        if name in self.associations:
            raise AlreadyExists(_duplicate_association(name, self.namespace))
        self.trigger_event(
            self.ResourceTypeAssociated, name=name, prefix=prefix, properties_target=properties_target
        )

    def dissociate(self, name: str) -> None:
        self.get_association(name)
        self._ensure_unprotected(f"Metadata definition resource-type-association {name} is protected")
        self.trigger_event(self.ResourceTypeDissociated, name=name)


def _duplicate_object(name: str, namespace: str) -> str:
    return f"A metadata definition object with name={name} already exists in namespace={namespace}."


def _duplicate_tag(name: str, namespace: str) -> str:
    return (
        f"A metadata tag with name={name} already exists in namespace={namespace}."
        " (Please note that metadata tag names are case insensitive)."
    )


def _duplicate_association(name: str, namespace: str) -> str:
    return (
        f"The metadata definition resource-type association of resource-type={name} to"
        f" namespace={namespace} already exists."
    )
