"""The operator-facing read models: flavor extra specs and access, compute services, host
aggregates, server groups, quotas (and the migrations table their projections will fill).

None of these rows needs reading before it is written (an event sets the fields it carries, or
merges a JSON value), so each event becomes SQL statements, computed here without I/O, that the
batch's view runs in order after the batch's row writes, as ``projections.identity`` does. Columns
added to ``hosts`` and ``flavors`` are written only here, never by the whole-row upserts of
``projections.readmodels``, so the two never overwrite each other.
"""

from __future__ import annotations

from typing import Any

from commands.flavor import Flavor
from commands.host import Host
from commands.host_aggregate import HostAggregate
from commands.quota import ProjectQuota, QuotaClass
from commands.server_group import ServerGroup
from projections.statements import Statement, Statements
from stratus.serialization import dumps

# Each table and its key, for the row-for-row comparison of a rebuild.
TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("host_aggregates", ("id",)),
    ("server_groups", ("id",)),
    ("quotas", ("id",)),
    ("quota_classes", ("id",)),
    ("migrations", ("id",)),
)

# Idempotent: a read-model schema made before these tables and columns existed gets them when next
# opened. Its log holds none of these events, so the new columns' defaults are correct; a rebuild
# is still the way to pick up events recorded before the projection knew them.
DDL = """
ALTER TABLE {s}.flavors ADD COLUMN IF NOT EXISTS extra_specs jsonb NOT NULL DEFAULT '{{}}';
ALTER TABLE {s}.flavors ADD COLUMN IF NOT EXISTS projects jsonb NOT NULL DEFAULT '[]';
-- The nova-compute service of each host (os-services) and the zone its host aggregates give it.
ALTER TABLE {s}.hosts ADD COLUMN IF NOT EXISTS disabled boolean NOT NULL DEFAULT false;
ALTER TABLE {s}.hosts ADD COLUMN IF NOT EXISTS disabled_reason text;
ALTER TABLE {s}.hosts ADD COLUMN IF NOT EXISTS forced_down boolean NOT NULL DEFAULT false;
ALTER TABLE {s}.hosts ADD COLUMN IF NOT EXISTS aggregate_zones jsonb NOT NULL DEFAULT '{{}}';
ALTER TABLE {s}.hosts ADD COLUMN IF NOT EXISTS availability_zone text;
-- What the host keeps for itself (Placement inventories' ``reserved``): Nova counts it as used.
ALTER TABLE {s}.hosts ADD COLUMN IF NOT EXISTS vcpus_reserved integer NOT NULL DEFAULT 0;
ALTER TABLE {s}.hosts ADD COLUMN IF NOT EXISTS memory_mb_reserved bigint NOT NULL DEFAULT 0;
ALTER TABLE {s}.hosts ADD COLUMN IF NOT EXISTS disk_gb_reserved bigint NOT NULL DEFAULT 0;

CREATE TABLE IF NOT EXISTS {s}.host_aggregates (
    id uuid PRIMARY KEY,
    number integer NOT NULL,
    name text NOT NULL,
    availability_zone text,
    metadata jsonb NOT NULL DEFAULT '{{}}',
    hosts jsonb NOT NULL DEFAULT '[]',
    deleted boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    deleted_at timestamptz,
    position bigint NOT NULL
);

CREATE TABLE IF NOT EXISTS {s}.server_groups (
    id uuid PRIMARY KEY,
    name text NOT NULL,
    project_id text NOT NULL,
    user_id text NOT NULL,
    policy text NOT NULL,
    -- member instance id -> the host it was placed on (null until placed)
    members jsonb NOT NULL DEFAULT '{{}}',
    deleted boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    deleted_at timestamptz,
    position bigint NOT NULL
);
ALTER TABLE {s}.server_groups ADD COLUMN IF NOT EXISTS rules jsonb NOT NULL DEFAULT '{{}}';
CREATE INDEX IF NOT EXISTS server_groups_project ON {s}.server_groups (project_id);

-- Per-project limits that differ from the defaults (commands.quota.DEFAULT_LIMITS).
CREATE TABLE IF NOT EXISTS {s}.quotas (
    id uuid PRIMARY KEY,
    project_id text NOT NULL UNIQUE,
    limits jsonb NOT NULL DEFAULT '{{}}',
    updated_at timestamptz NOT NULL,
    position bigint NOT NULL
);

-- Quota classes (os-quota-class-sets): the "default" class's limits are every project's defaults.
CREATE TABLE IF NOT EXISTS {s}.quota_classes (
    id uuid PRIMARY KEY,
    name text NOT NULL UNIQUE,
    limits jsonb NOT NULL DEFAULT '{{}}',
    updated_at timestamptz NOT NULL,
    position bigint NOT NULL
);

-- Moves of instances between hosts (os-migrations), in Nova's fields: filled by the projection of
-- the migration events (resize, cold and live migration), empty until those exist.
CREATE TABLE IF NOT EXISTS {s}.migrations (
    id uuid PRIMARY KEY,
    number bigint NOT NULL,
    instance_uuid uuid NOT NULL,
    project_id text NOT NULL,
    user_id text NOT NULL,
    migration_type text NOT NULL,
    status text NOT NULL,
    source_compute text,
    dest_compute text,
    source_node text,
    dest_node text,
    dest_host text,
    old_flavor_id text,
    new_flavor_id text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    position bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS migrations_instance ON {s}.migrations (instance_uuid);
"""


def _json(value: Any) -> str:
    return dumps(value).decode()


def _host(e: Any, position: int, assignments: str, *params: Any) -> Statement:
    return (
        f"UPDATE {{s}}.hosts SET {assignments}, updated_at = GREATEST(updated_at, %s), "
        "position = GREATEST(position, %s) WHERE id = %s",
        (*params, e.timestamp, position, e.originator_id),
    )


def _row(table: str, e: Any, position: int, assignments: str, *params: Any) -> Statement:
    return (
        f"UPDATE {{s}}.{table} SET {assignments}, updated_at = %s, position = %s WHERE id = %s",
        (*params, e.timestamp, position, e.originator_id),
    )


def _flavor(e: Any, position: int, assignments: str, *params: Any) -> Statement:
    return (
        f"UPDATE {{s}}.flavors SET {assignments}, position = GREATEST(position, %s) WHERE id = %s",
        (*params, position, e.originator_id),
    )


# The zone a host is in: the first of the zones its aggregates give it (at most one, by the domain).
_ZONES = "(aggregate_zones {op} %s::{cast})"
_ZONE_OF = "(SELECT min(value) FROM jsonb_each_text(aggregate_zones {op} %s::{cast}))"


# -- flavors ---------------------------------------------------------------------------------
def _flavor_extra_specs_set(e: Flavor.ExtraSpecsSet, position: int) -> list[Statement]:
    return [_flavor(e, position, "extra_specs = extra_specs || %s::jsonb", _json(e.extra_specs))]


def _flavor_extra_spec_deleted(e: Flavor.ExtraSpecDeleted, position: int) -> list[Statement]:
    return [_flavor(e, position, "extra_specs = extra_specs - %s::text", e.key)]


def _flavor_description_updated(e: Flavor.DescriptionUpdated, position: int) -> list[Statement]:
    return [_flavor(e, position, "description = %s", e.description)]


def _flavor_access_added(e: Flavor.AccessAdded, position: int) -> list[Statement]:
    return [_flavor(e, position, "projects = projects || %s::jsonb", _json([e.project_id]))]


def _flavor_access_removed(e: Flavor.AccessRemoved, position: int) -> list[Statement]:
    return [_flavor(e, position, "projects = projects - %s::text", e.project_id)]


# -- compute services and zones ----------------------------------------------------------------
def _host_service_disabled(e: Host.ServiceDisabled, position: int) -> list[Statement]:
    return [_host(e, position, "disabled = true, disabled_reason = %s", e.reason)]


def _host_service_enabled(e: Host.ServiceEnabled, position: int) -> list[Statement]:
    return [_host(e, position, "disabled = false, disabled_reason = NULL")]


def _host_forced_down_set(e: Host.ForcedDownSet, position: int) -> list[Statement]:
    return [_host(e, position, "forced_down = %s", bool(e.forced_down))]


def _host_inventories_set(e: Host.InventoriesSet, position: int) -> list[Statement]:
    inv = e.inventories
    reserved = {rc: int(inv.get(rc, {}).get("reserved", 0)) for rc in ("VCPU", "MEMORY_MB", "DISK_GB")}
    return [_host(e, position, "vcpus_reserved = %s, memory_mb_reserved = %s, disk_gb_reserved = %s",
                  reserved["VCPU"], reserved["MEMORY_MB"], reserved["DISK_GB"])]  # fmt: skip


def _host_zone_assigned(e: Host.ZoneAssigned, position: int) -> list[Statement]:
    value = _json({e.aggregate_id: e.zone})
    zones, zone = _ZONES.format(op="||", cast="jsonb"), _ZONE_OF.format(op="||", cast="jsonb")
    return [_host(e, position, f"aggregate_zones = {zones}, availability_zone = {zone}", value, value)]


def _host_aggregate_left(e: Host.AggregateLeft, position: int) -> list[Statement]:
    zones, zone = _ZONES.format(op="-", cast="text"), _ZONE_OF.format(op="-", cast="text")
    assignments = f"aggregate_zones = {zones}, availability_zone = {zone}"
    return [_host(e, position, assignments, e.aggregate_id, e.aggregate_id)]


# -- host aggregates ---------------------------------------------------------------------------
def _aggregate_created(e: HostAggregate.Created, position: int) -> list[Statement]:
    t = e.timestamp
    metadata = {"availability_zone": e.availability_zone} if e.availability_zone else {}
    return [
        (
            "INSERT INTO {s}.host_aggregates (id, number, name, availability_zone, metadata, "
            "created_at, updated_at, position) VALUES (%s, %s, %s, %s, %s::jsonb, %s, %s, %s) "
            "ON CONFLICT (id) DO NOTHING",
            (e.originator_id, e.number, e.name, e.availability_zone, _json(metadata), t, t, position),
        )
    ]


def _aggregate_renamed(e: HostAggregate.Renamed, position: int) -> list[Statement]:
    return [_row("host_aggregates", e, position, "name = %s", e.name)]


def _aggregate_metadata_set(e: HostAggregate.MetadataSet, position: int) -> list[Statement]:
    merged = "jsonb_strip_nulls(metadata || %s::jsonb)"
    value = _json(e.metadata)
    return [
        _row(
            "host_aggregates",
            e,
            position,
            f"metadata = {merged}, availability_zone = {merged} ->> 'availability_zone'",
            value,
            value,
        )
    ]


def _aggregate_host_added(e: HostAggregate.HostAdded, position: int) -> list[Statement]:
    return [_row("host_aggregates", e, position, "hosts = hosts || %s::jsonb", _json([e.host]))]


def _aggregate_host_removed(e: HostAggregate.HostRemoved, position: int) -> list[Statement]:
    return [_row("host_aggregates", e, position, "hosts = hosts - %s::text", e.host)]


def _aggregate_deleted(e: HostAggregate.Deleted, position: int) -> list[Statement]:
    t = e.timestamp
    return [_row("host_aggregates", e, position, "deleted = true, deleted_at = %s", t)]


# -- server groups -----------------------------------------------------------------------------
def _group_created(e: ServerGroup.Created, position: int) -> list[Statement]:
    t = e.timestamp
    return [
        (
            "INSERT INTO {s}.server_groups (id, name, project_id, user_id, policy, rules, created_at, "
            "updated_at, position) VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s) "
            "ON CONFLICT (id) DO NOTHING",
            (e.originator_id, e.name, e.project_id, e.user_id, e.policy, _json(e.rules), t, t, position),
        )
    ]


def _group_member_added(e: ServerGroup.MemberAdded, position: int) -> list[Statement]:
    value = _json({e.instance_id: None})
    return [_row("server_groups", e, position, "members = members || %s::jsonb", value)]


def _group_member_placed(e: ServerGroup.MemberPlaced, position: int) -> list[Statement]:
    value = _json({e.instance_id: e.host})
    return [_row("server_groups", e, position, "members = members || %s::jsonb", value)]


def _group_member_removed(e: ServerGroup.MemberRemoved, position: int) -> list[Statement]:
    return [_row("server_groups", e, position, "members = members - %s::text", e.instance_id)]


def _group_deleted(e: ServerGroup.Deleted, position: int) -> list[Statement]:
    t = e.timestamp
    return [_row("server_groups", e, position, "deleted = true, deleted_at = %s", t)]


# -- quotas ------------------------------------------------------------------------------------
def _quota_created(e: ProjectQuota.Created, position: int) -> list[Statement]:
    t = e.timestamp
    return [
        (
            "INSERT INTO {s}.quotas (id, project_id, updated_at, position) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (id) DO NOTHING",
            (e.originator_id, e.project_id, t, position),
        )
    ]


def _quota_limits_set(e: ProjectQuota.LimitsSet, position: int) -> list[Statement]:
    return [_row("quotas", e, position, "limits = limits || %s::jsonb", _json(e.limits))]


def _quota_reset(e: ProjectQuota.Reset, position: int) -> list[Statement]:
    return [_row("quotas", e, position, "limits = '{{}}'::jsonb")]


def _quota_class_created(e: QuotaClass.Created, position: int) -> list[Statement]:
    t = e.timestamp
    return [
        (
            "INSERT INTO {s}.quota_classes (id, name, updated_at, position) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (id) DO NOTHING",
            (e.originator_id, e.name, t, position),
        )
    ]


def _quota_class_limits_set(e: QuotaClass.LimitsSet, position: int) -> list[Statement]:
    return [_row("quota_classes", e, position, "limits = limits || %s::jsonb", _json(e.limits))]


APPLY: dict[type, Statements] = {
    Flavor.ExtraSpecsSet: _flavor_extra_specs_set,
    Flavor.ExtraSpecDeleted: _flavor_extra_spec_deleted,
    Flavor.DescriptionUpdated: _flavor_description_updated,
    Flavor.AccessAdded: _flavor_access_added,
    Flavor.AccessRemoved: _flavor_access_removed,
    Host.ServiceDisabled: _host_service_disabled,
    Host.ServiceEnabled: _host_service_enabled,
    Host.ForcedDownSet: _host_forced_down_set,
    Host.InventoriesSet: _host_inventories_set,
    Host.ZoneAssigned: _host_zone_assigned,
    Host.AggregateLeft: _host_aggregate_left,
    HostAggregate.Created: _aggregate_created,
    HostAggregate.Renamed: _aggregate_renamed,
    HostAggregate.MetadataSet: _aggregate_metadata_set,
    HostAggregate.HostAdded: _aggregate_host_added,
    HostAggregate.HostRemoved: _aggregate_host_removed,
    HostAggregate.Deleted: _aggregate_deleted,
    ServerGroup.Created: _group_created,
    ServerGroup.MemberAdded: _group_member_added,
    ServerGroup.MemberPlaced: _group_member_placed,
    ServerGroup.MemberRemoved: _group_member_removed,
    ServerGroup.Deleted: _group_deleted,
    ProjectQuota.Created: _quota_created,
    ProjectQuota.LimitsSet: _quota_limits_set,
    ProjectQuota.Reset: _quota_reset,
    QuotaClass.Created: _quota_class_created,
    QuotaClass.LimitsSet: _quota_class_limits_set,
}
