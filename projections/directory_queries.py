"""What the API reads of Keystone's directory beyond projects and users: domains, groups, every kind
of role assignment, the service catalog and application credentials (``projections.identity_directory``)."""

from __future__ import annotations

from typing import Any

import psycopg

from projections.identity_queries import Row, _all, _filters, _one, _where

Conn = psycopg.Connection[Any]


# -- domains --------------------------------------------------------------------------------------
def get_domain(conn: Conn, domain_id: str) -> Row | None:
    return _one(conn, "SELECT * FROM {s}.domains WHERE id = %s", (domain_id,))


def domain_by_name(conn: Conn, name: str) -> Row | None:
    return _one(conn, "SELECT * FROM {s}.domains WHERE name = %s", (name,))


def list_domains(conn: Conn, *, name: str | None = None, enabled: bool | None = None) -> list[Row]:
    where, params = _filters(name=name, enabled=enabled)
    return _all(conn, f"SELECT * FROM {{s}}.domains{_where(where)} ORDER BY name, id", tuple(params))


def domain_members(conn: Conn, domain_id: str) -> dict[str, tuple[str, ...]]:
    """The ids of the domain's projects, users and groups."""
    return {
        table: tuple(
            r["id"] for r in _all(conn, f"SELECT id FROM {{s}}.{table} WHERE domain_id = %s", (domain_id,))
        )
        for table in ("projects", "users", "groups")
    }


def user_domains(conn: Conn, user_id: str) -> list[Row]:
    """The domains where ``user_id`` holds a role, given to them or to a group of theirs."""
    return _all(
        conn,
        "SELECT * FROM {s}.domains WHERE id IN ("
        "SELECT domain_id FROM {s}.domain_assignments WHERE user_id = %(user)s "
        "UNION SELECT g.scope_id FROM {s}.group_assignments g JOIN {s}.group_members m "
        "ON m.group_id = g.group_id WHERE m.user_id = %(user)s AND g.scope_type = 'domain') "
        "ORDER BY name, id",
        {"user": user_id},
    )


# -- groups ---------------------------------------------------------------------------------------
def get_group(conn: Conn, group_id: str) -> Row | None:
    return _one(conn, "SELECT * FROM {s}.groups WHERE id = %s", (group_id,))


def list_groups(conn: Conn, *, name: str | None = None, domain_id: str | None = None) -> list[Row]:
    where, params = _filters(name=name, domain_id=domain_id)
    return _all(conn, f"SELECT * FROM {{s}}.groups{_where(where)} ORDER BY name, id", tuple(params))


def group_users(conn: Conn, group_id: str) -> list[Row]:
    return _all(
        conn,
        "SELECT u.* FROM {s}.users u JOIN {s}.group_members m ON m.user_id = u.id "
        "WHERE m.group_id = %s ORDER BY u.name, u.id",
        (group_id,),
    )


def user_groups(conn: Conn, user_id: str) -> list[Row]:
    return _all(
        conn,
        "SELECT g.* FROM {s}.groups g JOIN {s}.group_members m ON m.group_id = g.id "
        "WHERE m.user_id = %s ORDER BY g.name, g.id",
        (user_id,),
    )


def is_member(conn: Conn, group_id: str, user_id: str) -> bool:
    row = _one(
        conn, "SELECT 1 AS x FROM {s}.group_members WHERE group_id = %s AND user_id = %s", (group_id, user_id)
    )
    return row is not None


# -- every role assignment ------------------------------------------------------------------------
# One row per assignment: (scope_type, scope_id, actor_type, actor_id, role_id).
_ASSIGNMENTS = """
    SELECT 'project' AS scope_type, project_id AS scope_id, 'user' AS actor_type, user_id AS actor_id, role_id
    FROM {s}.role_assignments
    UNION ALL
    SELECT 'domain', domain_id, 'user', user_id, role_id FROM {s}.domain_assignments
    UNION ALL
    SELECT scope_type, scope_id, 'group', group_id, role_id FROM {s}.group_assignments
    UNION ALL
    SELECT 'system', 'all', actor_type, actor_id, role_id FROM {s}.system_assignments
"""


def assignments(
    conn: Conn,
    *,
    scope_type: str | None = None,
    scope_id: str | None = None,
    actor_type: str | None = None,
    actor_id: str | None = None,
    role_id: str | None = None,
) -> list[Row]:
    where, params = _filters(
        scope_type=scope_type, scope_id=scope_id, actor_type=actor_type, actor_id=actor_id, role_id=role_id
    )
    return _all(
        conn,
        f"SELECT * FROM ({_ASSIGNMENTS}) a{_where(where)} "
        "ORDER BY scope_type, scope_id, actor_type, actor_id, role_id",
        tuple(params),
    )


def members_of(conn: Conn, group_ids: list[str]) -> list[Row]:
    return _all(
        conn, "SELECT group_id, user_id FROM {s}.group_members WHERE group_id = ANY(%s)", (group_ids,)
    )


def names(conn: Conn, table: str, ids: list[str]) -> dict[str, Row]:
    """Rows of ``table`` (projects, users, groups, domains, roles) by id, for names in listings."""
    rows = _all(conn, f"SELECT * FROM {{s}}.{table} WHERE id = ANY(%s)", (ids,))
    return {r["id"]: r for r in rows}


# -- the catalog ----------------------------------------------------------------------------------
def get_region(conn: Conn, region_id: str) -> Row | None:
    return _one(conn, "SELECT * FROM {s}.regions WHERE id = %s", (region_id,))


def list_regions(conn: Conn, *, parent_region_id: str | None = None) -> list[Row]:
    where, params = _filters(parent_region_id=parent_region_id)
    return _all(conn, f"SELECT * FROM {{s}}.regions{_where(where)} ORDER BY id", tuple(params))


def get_service(conn: Conn, service_id: str) -> Row | None:
    return _one(conn, "SELECT * FROM {s}.services WHERE id = %s", (service_id,))


def list_services(conn: Conn, *, type: str | None = None, name: str | None = None) -> list[Row]:
    where, params = _filters(type=type, name=name)
    return _all(conn, f"SELECT * FROM {{s}}.services{_where(where)} ORDER BY type, name, id", tuple(params))


def get_endpoint(conn: Conn, endpoint_id: str) -> Row | None:
    return _one(conn, "SELECT * FROM {s}.endpoints WHERE id = %s", (endpoint_id,))


def list_endpoints(
    conn: Conn, *, service_id: str | None = None, interface: str | None = None, region_id: str | None = None
) -> list[Row]:
    where, params = _filters(service_id=service_id, interface=interface, region_id=region_id)
    return _all(
        conn,
        f"SELECT * FROM {{s}}.endpoints{_where(where)} ORDER BY service_id, interface, id",
        tuple(params),
    )


# -- application credentials ----------------------------------------------------------------------
def get_application_credential(conn: Conn, credential_id: str) -> Row | None:
    return _one(conn, "SELECT * FROM {s}.application_credentials WHERE id = %s", (credential_id,))


def list_application_credentials(conn: Conn, user_id: str, *, name: str | None = None) -> list[Row]:
    where, params = _filters(user_id=user_id, name=name)
    return _all(
        conn, f"SELECT * FROM {{s}}.application_credentials{_where(where)} ORDER BY name, id", tuple(params)
    )


def list_access_rules(conn: Conn, user_id: str, rule_id: str | None = None) -> list[Row]:
    where, params = _filters(user_id=user_id, id=rule_id)
    return _all(
        conn,
        f"SELECT * FROM {{s}}.access_rules{_where(where)} ORDER BY service, path, method, id",
        tuple(params),
    )


# -- implied roles --------------------------------------------------------------------------------
def implications(conn: Conn, prior_role_id: str | None = None) -> list[Row]:
    where, params = _filters(prior_role_id=prior_role_id)
    return _all(
        conn,
        f"SELECT * FROM {{s}}.role_implications{_where(where)} ORDER BY prior_role_id, implied_role_id",
        tuple(params),
    )
