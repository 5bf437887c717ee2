"""What the operator-facing API reads: compute services, host aggregates and availability zones,
server groups, quotas and usage, tenant usage over a period, migrations.

Same rules as ``projections.queries``: an open psycopg connection from the caller's pool, plain
dicts keyed by column names, tables named ``stratus_rm.<table>``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg import sql

from projections import usage_queries
from projections.queries import MarkerNotFound, _as_uuid, _fetchall, _fetchone
from projections.schema import LIVE_SCHEMA

Row = dict[str, Any]
_S = sql.Identifier(LIVE_SCHEMA)


def _given(query: sql.Composed, params: list[Any], clause: str, value: Any) -> sql.Composed:
    """``query`` narrowed by ``clause`` (one ``%s``, for ``value``) when ``value`` is given (not None)."""
    if value is None:
        return query
    params.append(value)
    return query + sql.SQL(" " + clause)


# -- compute services -----------------------------------------------------------------------------
def list_compute_services(conn: psycopg.Connection[Any], host: str | None = None) -> list[Row]:
    """The nova-compute service of every host (its state columns), by hostname."""
    query = sql.SQL(
        "SELECT id, hostname, disabled, disabled_reason, forced_down, availability_zone, updated_at, "
        "created_at FROM {}.hosts"
    ).format(_S)
    params: list[Any] = []
    query = _given(query, params, "WHERE hostname = %s", host)
    return _fetchall(conn, query + sql.SQL(" ORDER BY hostname"), params)


def compute_services_of(conn: psycopg.Connection[Any], hostnames: list[str]) -> dict[str, Row]:
    """The service state (disabled, forced down) of the named hosts, by hostname."""
    if not hostnames:
        return {}
    select = sql.SQL("SELECT hostname, disabled, forced_down FROM {}.hosts WHERE hostname = ANY(%s)")
    query = select.format(_S)
    return {r["hostname"]: r for r in _fetchall(conn, query, (list(hostnames),))}


# -- host aggregates and availability zones -------------------------------------------------------
def list_host_aggregates(conn: psycopg.Connection[Any]) -> list[Row]:
    return _fetchall(
        conn, sql.SQL("SELECT * FROM {}.host_aggregates WHERE NOT deleted ORDER BY number").format(_S)
    )


def get_host_aggregate(conn: psycopg.Connection[Any], id_or_number: str) -> Row | None:
    """One aggregate that is not deleted, by its number (Nova's id) or its uuid."""
    if id_or_number.isdigit() and len(id_or_number) < 10:
        where, param = "number = %s", int(id_or_number)
    else:
        uid = _as_uuid(id_or_number)
        if uid is None:
            return None
        where, param = "id = %s", uid  # type: ignore[assignment]
    query = sql.SQL("SELECT * FROM {}.host_aggregates WHERE NOT deleted AND " + where).format(_S)
    return _fetchone(conn, query, (param,))


def availability_zones(conn: psycopg.Connection[Any], default_zone: str) -> dict[str, list[Row]]:
    """Every zone with its hosts: the zones aggregates define (empty ones too) and ``default_zone``
    for hosts in none, as Nova lists them."""
    zones: dict[str, list[Row]] = {}
    for agg in list_host_aggregates(conn):
        if agg["availability_zone"]:
            zones.setdefault(agg["availability_zone"], [])
    for host in list_compute_services(conn):
        zones.setdefault(host["availability_zone"] or default_zone, []).append(host)
    return zones


# -- server groups --------------------------------------------------------------------------------
def list_server_groups(
    conn: psycopg.Connection[Any], project_id: str | None, *, limit: int | None = None, offset: int = 0
) -> list[Row]:
    """The groups of ``project_id`` (None: every project's), oldest first, from ``offset``, ``limit`` long."""
    query = sql.SQL("SELECT * FROM {}.server_groups WHERE NOT deleted").format(_S)
    params: list[Any] = []
    query = _given(query, params, "AND project_id = %s", project_id)
    query += sql.SQL(" ORDER BY created_at, id LIMIT %s OFFSET %s")
    return _fetchall(conn, query, [*params, limit, offset])


def groups_of(conn: psycopg.Connection[Any], server_ids: list[str]) -> dict[str, str]:
    """The server group each of ``server_ids`` belongs to (a server is in at most one)."""
    if not server_ids:
        return {}
    query = sql.SQL(
        "SELECT g.id::text AS group_id, m.member FROM {}.server_groups g, "
        "jsonb_object_keys(g.members) AS m(member) WHERE NOT g.deleted AND m.member = ANY(%s)"
    ).format(_S)
    return {r["member"]: r["group_id"] for r in _fetchall(conn, query, [server_ids])}


def get_server_group(conn: psycopg.Connection[Any], group_id: str, project_id: str | None) -> Row | None:
    uid = _as_uuid(group_id)
    if uid is None:
        return None
    query = sql.SQL("SELECT * FROM {}.server_groups WHERE NOT deleted AND id = %s").format(_S)
    params: list[Any] = [uid]
    query = _given(query, params, "AND project_id = %s", project_id)
    return _fetchone(conn, query, params)


# -- quotas and usage -----------------------------------------------------------------------------
def quota_overrides(conn: psycopg.Connection[Any], project_id: str) -> dict[str, int]:
    """The limits set for ``project_id`` (the defaults apply to every other resource)."""
    row = _fetchone(
        conn, sql.SQL("SELECT limits FROM {}.quotas WHERE project_id = %s").format(_S), (project_id,)
    )
    return dict(row["limits"]) if row else {}


def quota_class(conn: psycopg.Connection[Any], name: str) -> dict[str, int]:
    """The limits set on quota class ``name`` (``default``: every project's defaults)."""
    row = _fetchone(conn, sql.SQL("SELECT limits FROM {}.quota_classes WHERE name = %s").format(_S), (name,))
    return dict(row["limits"]) if row else {}


def project_usage(
    conn: psycopg.Connection[Any], project_id: str, user_id: str | None = None
) -> dict[str, int]:
    """What the project uses of each quota, from the read model: servers, cores and RAM counted as
    ``commands.usage`` counts them, server groups and the largest group's members, the user's key pairs."""
    counted = usage_queries.project_usage(conn, project_id)
    groups = _fetchone(
        conn,
        sql.SQL(
            "SELECT count(*) AS n, coalesce(max((SELECT count(*) FROM jsonb_object_keys(members))), 0) AS m "
            "FROM {}.server_groups WHERE project_id = %s AND NOT deleted"
        ).format(_S),
        (project_id,),
    )
    usage = {
        **counted,
        "server_groups": int(groups["n"]) if groups else 0,
        "server_group_members": int(groups["m"]) if groups else 0,
        "key_pairs": 0,
    }
    if user_id is not None and _table_exists(conn, "keypairs"):
        keys = _fetchone(
            conn,
            sql.SQL("SELECT count(*) AS n FROM {}.keypairs WHERE user_id = %s AND NOT deleted").format(_S),
            (user_id,),
        )
        usage["key_pairs"] = int(keys["n"]) if keys else 0
    return usage


def _table_exists(conn: psycopg.Connection[Any], table: str) -> bool:
    row = _fetchone(conn, sql.SQL("SELECT to_regclass(%s) IS NOT NULL AS found"), (f"{LIVE_SCHEMA}.{table}",))
    return bool(row and row["found"])


# -- usage over a period (os-simple-tenant-usage) -------------------------------------------------
def servers_in_period(
    conn: psycopg.Connection[Any], start: datetime, end: datetime, project_id: str | None
) -> list[Row]:
    """Servers that existed at some time in [start, end): created before ``end``, deleted after ``start``."""
    query = sql.SQL(
        "SELECT id, name, project_id, user_id, flavor, status, vm_state, created_at, deleted_at, deleted "
        "FROM {}.instances WHERE created_at < %s AND (deleted_at IS NULL OR deleted_at >= %s)"
    ).format(_S)
    params: list[Any] = [end, start]
    query = _given(query, params, "AND project_id = %s", project_id)
    return _fetchall(conn, query + sql.SQL(" ORDER BY project_id, created_at, id"), params)


# -- migrations -----------------------------------------------------------------------------------
def list_migrations(
    conn: psycopg.Connection[Any],
    *,
    project_id: str | None = None,
    instance_uuid: UUID | None = None,
    status: str | None = None,
    host: str | None = None,
    migration_type: str | None = None,
    user_id: str | None = None,
    changed_since: datetime | None = None,
    changed_before: datetime | None = None,
    limit: int | None = None,
    marker: UUID | None = None,
) -> list[Row]:
    """Migrations newest first; ``marker`` (a migration's uuid) pages after it (``MarkerNotFound``
    if there is none such); ``changed_since``/``changed_before`` bound ``updated_at``."""
    where: list[sql.Composable] = []
    params: list[Any] = []
    for column, value in (
        ("project_id", project_id),
        ("user_id", user_id),
        ("instance_uuid", instance_uuid),
        ("status", status),
        ("migration_type", migration_type),
    ):
        if value is not None:
            where.append(sql.SQL("{} = %s").format(sql.Identifier(column)))
            params.append(value)
    if host is not None:
        where.append(sql.SQL("(source_compute = %s OR dest_compute = %s)"))
        params.extend((host, host))
    if changed_since is not None:
        where.append(sql.SQL("updated_at >= %s"))
        params.append(changed_since)
    if changed_before is not None:
        where.append(sql.SQL("updated_at <= %s"))
        params.append(changed_before)
    if marker is not None:
        found = _fetchone(
            conn, sql.SQL("SELECT created_at, number FROM {}.migrations WHERE id = %s").format(_S), [marker]
        )
        if found is None:
            raise MarkerNotFound(str(marker))
        where.append(sql.SQL("(created_at, number) < (%s, %s)"))
        params.extend((found["created_at"], found["number"]))
    query = sql.SQL("SELECT * FROM {}.migrations {} ORDER BY created_at DESC, number DESC").format(
        _S, sql.SQL("WHERE ") + sql.SQL(" AND ").join(where) if where else sql.SQL("")
    )
    if limit is not None:
        query = query + sql.SQL(" LIMIT %s")
        params.append(limit)
    return _fetchall(conn, query, params)


def host_usage_by_project(conn: psycopg.Connection[Any], host_id: Any) -> list[Row]:
    """What each project's servers claim on one host (their flavors' whole sizes), by project."""
    query = sql.SQL(
        "SELECT i.project_id AS project, sum(c.vcpus) AS cpu, sum(c.memory_mb) AS memory_mb, "
        "sum(c.disk_gb) AS disk_gb FROM {}.host_claims c JOIN {}.instances i ON i.id::text = c.instance_id "
        "WHERE c.host_id = %s GROUP BY i.project_id ORDER BY i.project_id"
    ).format(_S, _S)
    return _fetchall(conn, query, (host_id,))


def instances_per_host_in(conn: psycopg.Connection[Any], begin: datetime, end: datetime) -> dict[str, int]:
    """How many instances each host held during [begin, end): launched before the end, not deleted
    before the beginning (Nova's instance usage audit)."""
    query = sql.SQL(
        "SELECT host, count(*) AS n FROM {}.instances WHERE host IS NOT NULL AND launched_at < %s "
        "AND (deleted_at IS NULL OR deleted_at >= %s) GROUP BY host"
    ).format(_S)
    return {r["host"]: int(r["n"]) for r in _fetchall(conn, query, (end, begin))}


def servers_on_hosts(conn: psycopg.Connection[Any], hostnames: list[str]) -> dict[str, list[Row]]:
    """The servers (``name``, ``uuid``) each of the named hosts holds now, by hostname."""
    if not hostnames:
        return {}
    query = sql.SQL(
        "SELECT host, name, id::text AS uuid FROM {}.instances WHERE host = ANY(%s) AND NOT deleted "
        "ORDER BY created_at, id"
    ).format(_S)
    found: dict[str, list[Row]] = {h: [] for h in hostnames}
    for row in _fetchall(conn, query, (list(hostnames),)):
        found[row["host"]].append({"name": row["name"], "uuid": row["uuid"]})
    return found
