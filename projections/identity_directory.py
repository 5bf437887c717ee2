"""The read model of Keystone's directory beyond projects and users: domains, groups and their
members, the role assignments of groups and on domains, the service catalog (regions, services,
endpoints) and application credentials.

As in ``projections.identity``, each event becomes SQL statements computed without I/O, applied by
the batch's view in order; one function per event class, found in ``APPLY``.
"""

from __future__ import annotations

from typing import Any

from commands.application_credentials import ApplicationCredential
from commands.identity import Domain, Group, Project, Role, System
from commands.identity_catalog import Endpoint, Region, Service
from projections.statements import Statement, Statements, jsonb

TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("domains", ("id",)),
    ("groups", ("id",)),
    ("group_members", ("group_id", "user_id")),
    ("group_assignments", ("scope_type", "scope_id", "group_id", "role_id")),
    ("domain_assignments", ("domain_id", "user_id", "role_id")),
    ("system_assignments", ("actor_type", "actor_id", "role_id")),
    ("role_implications", ("prior_role_id", "implied_role_id")),
    ("regions", ("id",)),
    ("services", ("id",)),
    ("endpoints", ("id",)),
    ("application_credentials", ("id",)),
    ("access_rules", ("id",)),
)

DDL = """
-- Domains' and regions' aggregates have ids derived from theirs: ``aggregate_id`` finds the row
-- an event after ``Created`` concerns.
CREATE TABLE IF NOT EXISTS {s}.domains (
    id text PRIMARY KEY,
    aggregate_id text NOT NULL UNIQUE,
    name text NOT NULL,
    description text NOT NULL DEFAULT '',
    enabled boolean NOT NULL,
    position bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.groups (
    id text PRIMARY KEY,
    name text NOT NULL,
    domain_id text NOT NULL,
    description text NOT NULL DEFAULT '',
    position bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.group_members (
    group_id text NOT NULL,
    user_id text NOT NULL,
    PRIMARY KEY (group_id, user_id)
);
CREATE INDEX IF NOT EXISTS group_members_user ON {s}.group_members (user_id);
-- scope_type: 'project' or 'domain'
CREATE TABLE IF NOT EXISTS {s}.group_assignments (
    scope_type text NOT NULL,
    scope_id text NOT NULL,
    group_id text NOT NULL,
    role_id text NOT NULL,
    PRIMARY KEY (scope_type, scope_id, group_id, role_id)
);
CREATE TABLE IF NOT EXISTS {s}.domain_assignments (
    domain_id text NOT NULL,
    user_id text NOT NULL,
    role_id text NOT NULL,
    PRIMARY KEY (domain_id, user_id, role_id)
);
-- Implied roles beyond the built-in chain (admin > manager > member > reader, in code).
CREATE TABLE IF NOT EXISTS {s}.role_implications (
    prior_role_id text NOT NULL,
    implied_role_id text NOT NULL,
    PRIMARY KEY (prior_role_id, implied_role_id)
);
-- Roles on the system (Keystone's system scope): actor_type 'user' or 'group'.
CREATE TABLE IF NOT EXISTS {s}.system_assignments (
    actor_type text NOT NULL,
    actor_id text NOT NULL,
    role_id text NOT NULL,
    PRIMARY KEY (actor_type, actor_id, role_id)
);
CREATE TABLE IF NOT EXISTS {s}.regions (
    id text PRIMARY KEY,
    aggregate_id text NOT NULL UNIQUE,
    description text NOT NULL DEFAULT '',
    parent_region_id text,
    position bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.services (
    id text PRIMARY KEY,
    type text NOT NULL,
    name text NOT NULL,
    description text NOT NULL DEFAULT '',
    enabled boolean NOT NULL,
    position bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.endpoints (
    id text PRIMARY KEY,
    service_id text NOT NULL,
    interface text NOT NULL,
    url text NOT NULL,
    region_id text,
    enabled boolean NOT NULL,
    position bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.application_credentials (
    id text PRIMARY KEY,
    user_id text NOT NULL,
    project_id text NOT NULL,
    name text NOT NULL,
    description text,
    expires_at timestamptz,
    unrestricted boolean NOT NULL,
    role_ids jsonb NOT NULL,
    access_rules jsonb NOT NULL,
    position bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS application_credentials_user ON {s}.application_credentials (user_id, name);
CREATE TABLE IF NOT EXISTS {s}.access_rules (
    id text PRIMARY KEY,
    user_id text NOT NULL,
    service text NOT NULL,
    path text NOT NULL,
    method text NOT NULL
);
"""


def _id(e: Any) -> str:
    return str(e.originator_id.hex)


def _upsert(table: str, columns: tuple[str, ...], values: tuple[Any, ...]) -> Statement:
    """Insert the row, or overwrite the columns an ``Updated`` event carries (its whole state)."""
    names = ", ".join(columns)
    marks = ", ".join(["%s"] * len(columns))
    sets = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns[1:])
    return (
        f"INSERT INTO {{s}}.{table} ({names}) VALUES ({marks}) ON CONFLICT (id) DO UPDATE SET {sets}",
        values,
    )


def _domain(e: Any, at: int) -> list[Statement]:
    cols = ("id", "aggregate_id", "name", "description", "enabled", "position")
    return [
        _upsert("domains", cols, (e.domain_id, str(e.originator_id), e.name, e.description, e.enabled, at))
    ]


def _domain_updated(e: Any, at: int) -> list[Statement]:
    return [
        (
            "UPDATE {s}.domains SET name = %s, description = %s, enabled = %s, position = %s "
            "WHERE aggregate_id = %s",
            (e.name, e.description, e.enabled, at, str(e.originator_id)),
        )
    ]


_DOMAIN_ID = "(SELECT id FROM {s}.domains WHERE aggregate_id = %s)"  # a domain event's domain


def _domain_deleted(e: Any, at: int) -> list[Statement]:
    agg = str(e.originator_id)
    return [
        (f"DELETE FROM {{s}}.domain_assignments WHERE domain_id = {_DOMAIN_ID}", (agg,)),
        (
            f"DELETE FROM {{s}}.group_assignments WHERE scope_type = 'domain' AND scope_id = {_DOMAIN_ID}",
            (agg,),
        ),
        ("DELETE FROM {s}.domains WHERE aggregate_id = %s", (agg,)),
    ]


def _domain_user_granted(e: Any, at: int) -> list[Statement]:
    return [
        (
            f"INSERT INTO {{s}}.domain_assignments SELECT {_DOMAIN_ID}, %s, %s ON CONFLICT DO NOTHING",
            (str(e.originator_id), e.user_id, e.role_id),
        )
    ]


def _domain_user_revoked(e: Any, at: int) -> list[Statement]:
    return [
        (
            f"DELETE FROM {{s}}.domain_assignments WHERE domain_id = {_DOMAIN_ID} "
            "AND user_id = %s AND role_id = %s",
            (str(e.originator_id), e.user_id, e.role_id),
        )
    ]


def _domain_group(granted: bool) -> Statements:
    def apply(e: Any, at: int) -> list[Statement]:
        agg = str(e.originator_id)
        if granted:
            sql = (
                f"INSERT INTO {{s}}.group_assignments SELECT 'domain', {_DOMAIN_ID}, %s, %s "
                "ON CONFLICT DO NOTHING"
            )
        else:
            sql = (
                "DELETE FROM {s}.group_assignments WHERE scope_type = 'domain' "
                f"AND scope_id = {_DOMAIN_ID} AND group_id = %s AND role_id = %s"
            )
        return [(sql, (agg, e.group_id, e.role_id))]

    return apply


def _project_group(granted: bool) -> Statements:
    def apply(e: Any, at: int) -> list[Statement]:
        if granted:
            sql = "INSERT INTO {s}.group_assignments VALUES ('project', %s, %s, %s) ON CONFLICT DO NOTHING"
        else:
            sql = (
                "DELETE FROM {s}.group_assignments WHERE scope_type = 'project' AND scope_id = %s "
                "AND group_id = %s AND role_id = %s"
            )
        return [(sql, (_id(e), e.group_id, e.role_id))]

    return apply


def _group(e: Any, at: int) -> list[Statement]:
    cols = ("id", "name", "domain_id", "description", "position")
    return [_upsert("groups", cols, (e.group_id, e.name, e.domain_id, e.description, at))]


def _group_updated(e: Any, at: int) -> list[Statement]:
    return [
        (
            "UPDATE {s}.groups SET name = %s, description = %s, position = %s WHERE id = %s",
            (e.name, e.description, at, _id(e)),
        )
    ]


def _group_deleted(e: Any, at: int) -> list[Statement]:
    gid = _id(e)
    return [
        ("DELETE FROM {s}.system_assignments WHERE actor_type = 'group' AND actor_id = %s", (gid,)),
        ("DELETE FROM {s}.group_members WHERE group_id = %s", (gid,)),
        ("DELETE FROM {s}.group_assignments WHERE group_id = %s", (gid,)),
        ("DELETE FROM {s}.groups WHERE id = %s", (gid,)),
    ]


def _member_added(e: Any, at: int) -> list[Statement]:
    return [("INSERT INTO {s}.group_members VALUES (%s, %s) ON CONFLICT DO NOTHING", (_id(e), e.user_id))]


def _member_removed(e: Any, at: int) -> list[Statement]:
    return [("DELETE FROM {s}.group_members WHERE group_id = %s AND user_id = %s", (_id(e), e.user_id))]


def _system(actor: str, granted: bool) -> Statements:
    def apply(e: Any, at: int) -> list[Statement]:
        actor_id = e.user_id if actor == "user" else e.group_id
        if granted:
            sql = "INSERT INTO {s}.system_assignments VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
        else:
            sql = (
                "DELETE FROM {s}.system_assignments WHERE actor_type = %s AND actor_id = %s AND role_id = %s"
            )
        return [(sql, (actor, actor_id, e.role_id))]

    return apply


def _role_updated(e: Any, at: int) -> list[Statement]:
    return [
        (
            "UPDATE {s}.roles SET name = %s, description = %s, position = %s WHERE id = %s",
            (e.name, e.description, at, _id(e)),
        )
    ]


def _implication(added: bool) -> Statements:
    def apply(e: Any, at: int) -> list[Statement]:
        if added:
            sql = "INSERT INTO {s}.role_implications VALUES (%s, %s) ON CONFLICT DO NOTHING"
        else:
            sql = "DELETE FROM {s}.role_implications WHERE prior_role_id = %s AND implied_role_id = %s"
        return [(sql, (_id(e), e.implied_role_id))]

    return apply


def _role_deleted(e: Any, at: int) -> list[Statement]:
    rid = _id(e)
    return [
        ("DELETE FROM {s}.role_implications WHERE prior_role_id = %s OR implied_role_id = %s", (rid, rid)),
        *((f"DELETE FROM {{s}}.{t} WHERE role_id = %s", (rid,)) for t in _ASSIGNMENT_TABLES),
        ("DELETE FROM {s}.roles WHERE id = %s", (rid,)),
    ]


_ASSIGNMENT_TABLES = ("role_assignments", "group_assignments", "domain_assignments", "system_assignments")


def _region(e: Any, at: int) -> list[Statement]:
    cols = ("id", "aggregate_id", "description", "parent_region_id", "position")
    return [
        _upsert("regions", cols, (e.region_id, str(e.originator_id), e.description, e.parent_region_id, at))
    ]


def _region_updated(e: Any, at: int) -> list[Statement]:
    return [
        (
            "UPDATE {s}.regions SET description = %s, parent_region_id = %s, position = %s "
            "WHERE aggregate_id = %s",
            (e.description, e.parent_region_id, at, str(e.originator_id)),
        )
    ]


def _region_deleted(e: Any, at: int) -> list[Statement]:
    return [("DELETE FROM {s}.regions WHERE aggregate_id = %s", (str(e.originator_id),))]


def _service(e: Any, at: int) -> list[Statement]:
    cols = ("id", "type", "name", "description", "enabled", "position")
    return [_upsert("services", cols, (_id(e), e.type, e.name, e.description, e.enabled, at))]


def _endpoint(e: Any, at: int) -> list[Statement]:
    cols = ("id", "service_id", "interface", "url", "region_id", "enabled", "position")
    return [
        _upsert("endpoints", cols, (_id(e), e.service_id, e.interface, e.url, e.region_id, e.enabled, at))
    ]


def _deleted(table: str) -> Statements:
    def apply(e: Any, at: int) -> list[Statement]:
        return [(f"DELETE FROM {{s}}.{table} WHERE id = %s", (_id(e),))]

    return apply


def _application_credential(e: Any, at: int) -> list[Statement]:
    rules = [
        (
            "INSERT INTO {s}.access_rules VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
            (r["id"], e.user_id, r["service"], r["path"], r["method"]),
        )
        for r in e.access_rules
    ]
    return [
        (
            "INSERT INTO {s}.application_credentials VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (id) DO NOTHING",
            (
                e.application_credential_id,
                e.user_id,
                e.project_id,
                e.name,
                e.description,
                e.expires_at,
                e.unrestricted,
                jsonb(e.role_ids),
                jsonb(e.access_rules),
                at,
            ),
        ),
        *rules,
    ]


APPLY: dict[type, Statements] = {
    Domain.Created: _domain,
    Domain.Updated: _domain_updated,
    Domain.Deleted: _domain_deleted,
    Domain.RoleGranted: _domain_user_granted,
    Domain.RoleRevoked: _domain_user_revoked,
    Domain.GroupRoleGranted: _domain_group(granted=True),
    Domain.GroupRoleRevoked: _domain_group(granted=False),
    Project.GroupRoleGranted: _project_group(granted=True),
    Project.GroupRoleRevoked: _project_group(granted=False),
    System.RoleGranted: _system("user", granted=True),
    System.RoleRevoked: _system("user", granted=False),
    System.GroupRoleGranted: _system("group", granted=True),
    System.GroupRoleRevoked: _system("group", granted=False),
    Group.Created: _group,
    Group.Updated: _group_updated,
    Group.Deleted: _group_deleted,
    Group.UserAdded: _member_added,
    Group.UserRemoved: _member_removed,
    Role.Updated: _role_updated,
    Role.Deleted: _role_deleted,
    Role.ImplicationAdded: _implication(added=True),
    Role.ImplicationRemoved: _implication(added=False),
    Region.Created: _region,
    Region.Updated: _region_updated,
    Region.Deleted: _region_deleted,
    Service.Created: _service,
    Service.Updated: _service,
    Service.Deleted: _deleted("services"),
    Endpoint.Created: _endpoint,
    Endpoint.Updated: _endpoint,
    Endpoint.Deleted: _deleted("endpoints"),
    ApplicationCredential.Created: _application_credential,
    ApplicationCredential.Deleted: _deleted("application_credentials"),
}
