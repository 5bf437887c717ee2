"""The operator-facing read models: flavor extra specs and access, compute services, host
aggregates, server groups, quotas (and the migrations table their projections will fill).

None of these rows needs reading before it is written (an event sets the fields it carries, or
merges a JSON value), so each event becomes SQL statements, computed here without I/O, that the
batch's view runs in order after the batch's row writes, as ``projections.identity`` does. Columns
added to ``hosts`` and ``flavors`` are written only here, never by the whole-row upserts of
``projections.projection``, so the two never overwrite each other.
"""

from __future__ import annotations

from typing import Any

from commands.flavor import Flavor
from commands.host import Host
from commands.host_aggregate import HostAggregate
from commands.quota import ProjectQuota, QuotaClass
from commands.server_group import ServerGroup
from stratus.serialization import dumps

Statement = tuple[str, tuple[Any, ...]]  # SQL with ``{s}`` for the schema, and its parameters

FlavorExtraSpecsSet: type = Flavor.ExtraSpecsSet  # type: ignore[attr-defined]
FlavorExtraSpecDeleted: type = Flavor.ExtraSpecDeleted  # type: ignore[attr-defined]
FlavorDescriptionUpdated: type = Flavor.DescriptionUpdated  # type: ignore[attr-defined]
FlavorAccessAdded: type = Flavor.AccessAdded  # type: ignore[attr-defined]
FlavorAccessRemoved: type = Flavor.AccessRemoved  # type: ignore[attr-defined]
HostServiceDisabled: type = Host.ServiceDisabled  # type: ignore[attr-defined]
HostServiceEnabled: type = Host.ServiceEnabled  # type: ignore[attr-defined]
HostForcedDownSet: type = Host.ForcedDownSet  # type: ignore[attr-defined]
HostZoneAssigned: type = Host.ZoneAssigned  # type: ignore[attr-defined]
HostAggregateLeft: type = Host.AggregateLeft  # type: ignore[attr-defined]
HostInventoriesSet: type = Host.InventoriesSet  # type: ignore[attr-defined]
AggregateCreated: type = HostAggregate.Created  # type: ignore[attr-defined]
AggregateRenamed: type = HostAggregate.Renamed  # type: ignore[attr-defined]
AggregateMetadataSet: type = HostAggregate.MetadataSet  # type: ignore[attr-defined]
AggregateHostAdded: type = HostAggregate.HostAdded  # type: ignore[attr-defined]
AggregateHostRemoved: type = HostAggregate.HostRemoved  # type: ignore[attr-defined]
AggregateDeleted: type = HostAggregate.Deleted  # type: ignore[attr-defined]
GroupCreated: type = ServerGroup.Created  # type: ignore[attr-defined]
GroupMemberAdded: type = ServerGroup.MemberAdded  # type: ignore[attr-defined]
GroupMemberPlaced: type = ServerGroup.MemberPlaced  # type: ignore[attr-defined]
GroupMemberRemoved: type = ServerGroup.MemberRemoved  # type: ignore[attr-defined]
GroupDeleted: type = ServerGroup.Deleted  # type: ignore[attr-defined]
QuotaCreated: type = ProjectQuota.Created  # type: ignore[attr-defined]
QuotaLimitsSet: type = ProjectQuota.LimitsSet  # type: ignore[attr-defined]
QuotaReset: type = ProjectQuota.Reset  # type: ignore[attr-defined]
QuotaClassCreated: type = QuotaClass.Created  # type: ignore[attr-defined]
QuotaClassLimitsSet: type = QuotaClass.LimitsSet  # type: ignore[attr-defined]

HANDLED: tuple[type, ...] = (
    FlavorExtraSpecsSet, FlavorExtraSpecDeleted, FlavorAccessAdded, FlavorAccessRemoved,
    FlavorDescriptionUpdated,
    HostServiceDisabled, HostServiceEnabled, HostForcedDownSet, HostZoneAssigned, HostAggregateLeft,
    HostInventoriesSet,
    AggregateCreated, AggregateRenamed, AggregateMetadataSet, AggregateHostAdded, AggregateHostRemoved,
    AggregateDeleted,
    GroupCreated, GroupMemberAdded, GroupMemberPlaced, GroupMemberRemoved, GroupDeleted,
    QuotaCreated, QuotaLimitsSet, QuotaReset, QuotaClassCreated, QuotaClassLimitsSet,
)  # fmt: skip

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


def _is(e: Any, cls: type) -> bool:
    """``isinstance`` without narrowing ``e`` (the event classes are made at run time)."""
    return isinstance(e, cls)


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


def statements(e: Any, position: int) -> list[Statement]:
    """The writes an operator-side event makes to the read model; none for any other event."""
    t = e.timestamp
    # -- flavors ---------------------------------------------------------------------------------
    if _is(e, FlavorExtraSpecsSet):
        return [_flavor(e, position, "extra_specs = extra_specs || %s::jsonb", _json(e.extra_specs))]
    if _is(e, FlavorExtraSpecDeleted):
        return [_flavor(e, position, "extra_specs = extra_specs - %s::text", e.key)]
    if _is(e, FlavorDescriptionUpdated):
        return [_flavor(e, position, "description = %s", e.description)]
    if _is(e, FlavorAccessAdded):
        return [_flavor(e, position, "projects = projects || %s::jsonb", _json([e.project_id]))]
    if _is(e, FlavorAccessRemoved):
        return [_flavor(e, position, "projects = projects - %s::text", e.project_id)]
    # -- compute services and zones ----------------------------------------------------------------
    if _is(e, HostServiceDisabled):
        return [_host(e, position, "disabled = true, disabled_reason = %s", e.reason)]
    if _is(e, HostServiceEnabled):
        return [_host(e, position, "disabled = false, disabled_reason = NULL")]
    if _is(e, HostForcedDownSet):
        return [_host(e, position, "forced_down = %s", bool(e.forced_down))]
    if _is(e, HostInventoriesSet):
        inv = e.inventories
        reserved = {rc: int(inv.get(rc, {}).get("reserved", 0)) for rc in ("VCPU", "MEMORY_MB", "DISK_GB")}
        return [_host(e, position, "vcpus_reserved = %s, memory_mb_reserved = %s, disk_gb_reserved = %s",
                      reserved["VCPU"], reserved["MEMORY_MB"], reserved["DISK_GB"])]  # fmt: skip
    if _is(e, HostZoneAssigned):
        value = _json({e.aggregate_id: e.zone})
        zones, zone = _ZONES.format(op="||", cast="jsonb"), _ZONE_OF.format(op="||", cast="jsonb")
        return [_host(e, position, f"aggregate_zones = {zones}, availability_zone = {zone}", value, value)]
    if _is(e, HostAggregateLeft):
        zones, zone = _ZONES.format(op="-", cast="text"), _ZONE_OF.format(op="-", cast="text")
        assignments = f"aggregate_zones = {zones}, availability_zone = {zone}"
        return [_host(e, position, assignments, e.aggregate_id, e.aggregate_id)]
    # -- host aggregates ---------------------------------------------------------------------------
    if _is(e, AggregateCreated):
        metadata = {"availability_zone": e.availability_zone} if e.availability_zone else {}
        return [
            (
                "INSERT INTO {s}.host_aggregates (id, number, name, availability_zone, metadata, "
                "created_at, updated_at, position) VALUES (%s, %s, %s, %s, %s::jsonb, %s, %s, %s) "
                "ON CONFLICT (id) DO NOTHING",
                (e.originator_id, e.number, e.name, e.availability_zone, _json(metadata), t, t, position),
            )
        ]
    if _is(e, AggregateRenamed):
        return [_row("host_aggregates", e, position, "name = %s", e.name)]
    if _is(e, AggregateMetadataSet):
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
    if _is(e, AggregateHostAdded):
        return [_row("host_aggregates", e, position, "hosts = hosts || %s::jsonb", _json([e.host]))]
    if _is(e, AggregateHostRemoved):
        return [_row("host_aggregates", e, position, "hosts = hosts - %s::text", e.host)]
    if _is(e, AggregateDeleted):
        return [_row("host_aggregates", e, position, "deleted = true, deleted_at = %s", t)]
    # -- server groups -----------------------------------------------------------------------------
    if _is(e, GroupCreated):
        return [
            (
                "INSERT INTO {s}.server_groups (id, name, project_id, user_id, policy, rules, created_at, "
                "updated_at, position) VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s) "
                "ON CONFLICT (id) DO NOTHING",
                (e.originator_id, e.name, e.project_id, e.user_id, e.policy, _json(e.rules), t, t, position),
            )
        ]
    if _is(e, GroupMemberAdded):
        value = _json({e.instance_id: None})
        return [_row("server_groups", e, position, "members = members || %s::jsonb", value)]
    if _is(e, GroupMemberPlaced):
        value = _json({e.instance_id: e.host})
        return [_row("server_groups", e, position, "members = members || %s::jsonb", value)]
    if _is(e, GroupMemberRemoved):
        return [_row("server_groups", e, position, "members = members - %s::text", e.instance_id)]
    if _is(e, GroupDeleted):
        return [_row("server_groups", e, position, "deleted = true, deleted_at = %s", t)]
    # -- quotas ------------------------------------------------------------------------------------
    if _is(e, QuotaCreated):
        return [
            (
                "INSERT INTO {s}.quotas (id, project_id, updated_at, position) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (id) DO NOTHING",
                (e.originator_id, e.project_id, t, position),
            )
        ]
    if _is(e, QuotaLimitsSet):
        return [_row("quotas", e, position, "limits = limits || %s::jsonb", _json(e.limits))]
    if _is(e, QuotaReset):
        return [_row("quotas", e, position, "limits = '{{}}'::jsonb")]
    if _is(e, QuotaClassCreated):
        return [
            (
                "INSERT INTO {s}.quota_classes (id, name, updated_at, position) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (id) DO NOTHING",
                (e.originator_id, e.name, t, position),
            )
        ]
    if _is(e, QuotaClassLimitsSet):
        return [_row("quota_classes", e, position, "limits = limits || %s::jsonb", _json(e.limits))]
    return []
