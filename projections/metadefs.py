"""The metadata definitions' read models: what ``/image/v2/metadefs/namespaces`` and
``/image/v2/metadefs/resource_types`` list.

A namespace's own content (objects, properties, tags) is read from its aggregate, as an image's
show is; the lists need the namespaces' fields and resource type associations (a list filters by
them and shows them), and the resource types ever named. As in ``projections.images``, each event
becomes SQL statements computed without I/O, and the tables live in each read-model schema.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from commands.metadef import MetadefNamespace
from projections.statements import Statement, Statements, jsonb

TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("metadef_namespaces", ("id",)),
    ("metadef_resource_types", ("name",)),
)

# The resource types Glance's own definitions (etc/metadefs, loaded by ``glance-manage
# db_load_metadefs`` as every deployment does) associate namespaces with: its list before anyone
# adds one. An association naming another type adds it, as Glance's does, for good.
SEEDED_RESOURCE_TYPES = (
    "OS::Glance::Image", "OS::Cinder::Volume", "OS::Nova::Flavor", "OS::Nova::Aggregate",
    "OS::Nova::Server", "OS::Trove::Instance",
)  # fmt: skip
SEEDED_AT = datetime(2014, 10, 16, tzinfo=UTC)  # Juno, the release that brought metadata definitions

_SEED = ",".join(
    "('" + name + "', '2014-10-16T00:00:00Z', '2014-10-16T00:00:00Z')" for name in SEEDED_RESOURCE_TYPES
)

# Idempotent: a read-model schema made before these tables existed gets them when next opened (its log
# holds no metadefs event, so they start empty and correct).
DDL = f"""
CREATE TABLE IF NOT EXISTS {{s}}.metadef_namespaces (
    id uuid PRIMARY KEY,
    namespace text NOT NULL,
    display_name text,
    description text,
    visibility text NOT NULL,
    protected boolean NOT NULL,
    owner text NOT NULL,
    -- a list of (name, prefix, properties_target, created_at, updated_at) objects, oldest first
    resource_type_associations jsonb NOT NULL DEFAULT '[]',
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    version integer NOT NULL,
    position bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS metadef_namespaces_created ON {{s}}.metadef_namespaces (created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS metadef_namespaces_name ON {{s}}.metadef_namespaces (namespace);

CREATE TABLE IF NOT EXISTS {{s}}.metadef_resource_types (
    name text PRIMARY KEY,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
INSERT INTO {{s}}.metadef_resource_types (name, created_at, updated_at) VALUES {_SEED}
    ON CONFLICT (name) DO NOTHING;
"""


def _time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _association(name: str, fields: dict[str, Any], at: datetime) -> dict[str, Any]:
    return {
        "name": name,
        "prefix": fields.get("prefix"),
        "properties_target": fields.get("properties_target"),
        "created_at": _time(at),
        "updated_at": _time(at),
    }


def _resource_type(name: str, at: datetime) -> Statement:
    return (
        "INSERT INTO {s}.metadef_resource_types (name, created_at, updated_at) VALUES (%s, %s, %s)"
        " ON CONFLICT (name) DO NOTHING",
        (name, at, at),
    )


def _namespace_created(e: MetadefNamespace.Created, position: int) -> list[Statement]:
    associations = [_association(n, a, e.timestamp) for n, a in e.resource_type_associations.items()]
    return [
        (
            "INSERT INTO {s}.metadef_namespaces (id, namespace, display_name, description, visibility,"
            " protected, owner, resource_type_associations, created_at, updated_at, version, position)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
            (
                e.originator_id, e.namespace, e.display_name, e.description, e.visibility,
                e.protected, e.owner, jsonb(associations), e.timestamp, e.timestamp,
                e.originator_version, position,
            ),
        ),
        *(_resource_type(name, e.timestamp) for name in e.resource_type_associations),
    ]  # fmt: skip


def _namespace_updated(e: MetadefNamespace.Updated, position: int) -> list[Statement]:
    return [
        (
            "UPDATE {s}.metadef_namespaces SET namespace = %s, display_name = %s, description = %s,"
            " visibility = %s, protected = %s, owner = %s, updated_at = %s, version = %s, position = %s"
            " WHERE id = %s",
            (
                e.namespace, e.display_name, e.description, e.visibility, e.protected, e.owner,
                e.timestamp, e.originator_version, position, e.originator_id,
            ),
        )
    ]  # fmt: skip


def _namespace_deleted(e: MetadefNamespace.Deleted, position: int) -> list[Statement]:
    return [("DELETE FROM {s}.metadef_namespaces WHERE id = %s", (e.originator_id,))]


def _resource_type_associated(e: MetadefNamespace.ResourceTypeAssociated, position: int) -> list[Statement]:
    added = _association(e.name, {"prefix": e.prefix, "properties_target": e.properties_target}, e.timestamp)
    return [
        (
            "UPDATE {s}.metadef_namespaces"
            " SET resource_type_associations = resource_type_associations || %s,"
            " version = %s, position = %s WHERE id = %s",
            (jsonb([added]), e.originator_version, position, e.originator_id),
        ),
        _resource_type(e.name, e.timestamp),
    ]


def _resource_type_dissociated(e: MetadefNamespace.ResourceTypeDissociated, position: int) -> list[Statement]:
    return [
        (
            "UPDATE {s}.metadef_namespaces SET resource_type_associations ="
            " (SELECT coalesce(jsonb_agg(a ORDER BY i), '[]')"
            " FROM jsonb_array_elements(resource_type_associations) WITH ORDINALITY AS t (a, i)"
            " WHERE a->>'name' <> %s),"
            " version = %s, position = %s WHERE id = %s",
            (e.name, e.originator_version, position, e.originator_id),
        )
    ]


APPLY: dict[type, Statements] = {
    MetadefNamespace.Created: _namespace_created,
    MetadefNamespace.Updated: _namespace_updated,
    MetadefNamespace.Deleted: _namespace_deleted,
    MetadefNamespace.ResourceTypeAssociated: _resource_type_associated,
    MetadefNamespace.ResourceTypeDissociated: _resource_type_dissociated,
}
