"""What the API reads of identity: projects, users, roles, assignments, and a token's subject.

``subject`` is the check behind every authenticated request: one query says whether the token's
user and project exist and are enabled, whether the token was revoked, and which roles the user
holds in the project. Rows come back as dicts keyed by ``projections.identity``'s columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row, tuple_row

from commands.identity import effective_roles
from projections.queries import ReadModelUnavailable
from projections.schema import LIVE_SCHEMA

Row = dict[str, Any]
_S = LIVE_SCHEMA


@dataclass(frozen=True)
class Subject:
    """Who a token speaks for, as the read model sees them now."""

    user: Row
    project: Row
    role_names: frozenset[str]
    revoked: bool


def _all(
    conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...] | dict[str, Any] = ()
) -> list[Row]:
    try:
        with conn.cursor(row_factory=dict_row) as cur:
            cur.execute(query.format(s=_S), params)  # type: ignore[arg-type]
            return cur.fetchall()
    except psycopg.errors.UndefinedTable as e:
        raise ReadModelUnavailable(f"the read models are not there yet: {e}") from e


def _tuple(conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...] | dict[str, Any]) -> Any:
    """The first row of ``query`` (its schema already named) as a tuple, or None."""
    try:
        with conn.cursor(row_factory=tuple_row) as cur:
            return cur.execute(query, params).fetchone()  # type: ignore[arg-type]
    except psycopg.errors.UndefinedTable as e:
        raise ReadModelUnavailable(f"the read models are not there yet: {e}") from e


def _one(
    conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...] | dict[str, Any] = ()
) -> Row | None:
    rows = _all(conn, query, params)
    return rows[0] if rows else None


# The roles of a live application credential (``%s``: its id).
_CREDENTIAL_ROLES = (
    "SELECT jsonb_array_elements_text(c.role_ids) FROM {s}.application_credentials c "
    "WHERE c.id = %s AND (c.expires_at IS NULL OR c.expires_at > now())"
)


def _held(user: str, project: str) -> str:
    """SQL for the ids of the roles ``user`` holds in ``project`` (SQL expressions): given to them,
    or to a group of theirs."""
    return (
        f"SELECT a.role_id FROM {{s}}.role_assignments a "
        f"WHERE a.user_id = {user} AND a.project_id = {project} "
        f"UNION SELECT g.role_id FROM {{s}}.group_assignments g "
        f"JOIN {{s}}.group_members m ON m.group_id = g.group_id "
        f"WHERE m.user_id = {user} AND g.scope_type = 'project' AND g.scope_id = {project}"
    )


# The token's subject in one statement (``subject``), composed once: its parameters are the
# credential id, the token ids, the issue time twice, the user and the project.
_SUBJECT = f"""
    SELECT row_to_json(u), row_to_json(p),
           ARRAY(SELECT r.name FROM {{s}}.roles r WHERE r.id IN ({_held("u.id", "p.id")})),
           ARRAY(SELECT r.name FROM {{s}}.roles r WHERE r.id IN ({_CREDENTIAL_ROLES})),
           (EXISTS (SELECT 1 FROM {{s}}.revoked_tokens t WHERE t.token_id = ANY(%s))
            OR COALESCE(u.tokens_valid_after > %s, false)
            OR EXISTS (SELECT 1 FROM {{s}}.project_token_cutoffs c
                       WHERE c.user_id = u.id AND c.project_id = p.id AND c.valid_after > %s))
    FROM {{s}}.users u, {{s}}.projects p WHERE u.id = %s AND p.id = %s
    """.format(s=_S)


def subject(
    conn: psycopg.Connection[Any],
    user_id: str,
    project_id: str,
    token_ids: tuple[str, ...],
    issued_at: Any,
    application_credential_id: str = "",
) -> Subject | None:
    """The token's subject now. ``revoked`` when one of ``token_ids`` (the token's own id and its
    chain's) was revoked, or when the user's tokens issued at ``issued_at`` were ended since (a
    password change, a disable: ``users.tokens_valid_after``; a role removed in the token's project:
    ``project_token_cutoffs``). A token of an
    application credential holds only the credential's roles, and none once it is deleted or expired.

    Asked on every request: its statement is composed once and its row read as a tuple."""
    params = (application_credential_id, list(token_ids), issued_at, issued_at, user_id, project_id)
    row = _tuple(conn, _SUBJECT, params)
    if row is None:
        return None
    user, project, role_names, credential_roles, revoked = row
    roles = frozenset(role_names)
    if application_credential_id:
        roles = restricted(roles, credential_roles)
    return Subject(user, project, roles, bool(revoked))


def restricted(held: frozenset[str], credential_roles: list[str]) -> frozenset[str]:
    """The roles of an application credential's token: those it was given that its user holds now
    (directly or implied: a member holds reader)."""
    return frozenset(credential_roles) & frozenset(effective_roles(held))


# The system as a token's "project": Stratus's tokens name a project, and a system-scoped one names
# this (id "", never a row); its roles are the user's on the system, given to them or a group of theirs.
SYSTEM_PROJECT: Row = {"id": "", "name": "", "domain_id": "default", "enabled": True, "description": ""}
_SYSTEM_HELD = (
    "SELECT s.role_id FROM {s}.system_assignments s WHERE s.actor_type = 'user' AND s.actor_id = %(user)s "
    "UNION SELECT s.role_id FROM {s}.system_assignments s JOIN {s}.group_members m "
    "ON s.actor_type = 'group' AND s.actor_id = m.group_id WHERE m.user_id = %(user)s"
)


def system_subject(
    conn: psycopg.Connection[Any], user_id: str, token_ids: tuple[str, ...], issued_at: Any
) -> Subject | None:
    """A system-scoped token's subject now (as ``subject``, with the system for a project)."""
    row = _one(
        conn,
        f"""
        SELECT row_to_json(u) AS user,
               ARRAY(SELECT r.name FROM {{s}}.roles r WHERE r.id IN ({_SYSTEM_HELD})) AS role_names,
               (EXISTS (SELECT 1 FROM {{s}}.revoked_tokens t WHERE t.token_id = ANY(%(tokens)s))
                OR COALESCE(u.tokens_valid_after > %(issued)s, false)) AS revoked
        FROM {{s}}.users u WHERE u.id = %(user)s
        """,
        {"user": user_id, "tokens": list(token_ids), "issued": issued_at},
    )
    if row is None:
        return None
    return Subject(row["user"], SYSTEM_PROJECT, frozenset(row["role_names"]), bool(row["revoked"]))


def system_role_names(conn: psycopg.Connection[Any], user_id: str) -> frozenset[str]:
    rows = _all(conn, f"SELECT r.name FROM {{s}}.roles r WHERE r.id IN ({_SYSTEM_HELD})", {"user": user_id})
    return frozenset(r["name"] for r in rows)


def user_role_names(conn: psycopg.Connection[Any], user_id: str, project_id: str) -> frozenset[str]:
    held = _held("%(user)s", "%(project)s")
    rows = _all(
        conn,
        f"SELECT r.name FROM {{s}}.roles r WHERE r.id IN ({held})",
        {"user": user_id, "project": project_id},
    )
    return frozenset(r["name"] for r in rows)


# -- projects -------------------------------------------------------------------------------------
def get_project(conn: psycopg.Connection[Any], project_id: str) -> Row | None:
    return _one(conn, "SELECT * FROM {s}.projects WHERE id = %s", (project_id,))


def project_by_name(conn: psycopg.Connection[Any], name: str, domain_id: str) -> Row | None:
    return _one(conn, "SELECT * FROM {s}.projects WHERE name = %s AND domain_id = %s", (name, domain_id))


def list_projects(
    conn: psycopg.Connection[Any],
    *,
    name: str | None = None,
    domain_id: str | None = None,
    enabled: bool | None = None,
    only_ids: list[str] | None = None,
) -> list[Row]:
    where, params = _filters(name=name, domain_id=domain_id, enabled=enabled)
    if only_ids is not None:
        where.append("id = ANY(%s)")
        params.append(only_ids)
    return _all(conn, f"SELECT * FROM {{s}}.projects{_where(where)} ORDER BY name, id", tuple(params))


def user_projects(conn: psycopg.Connection[Any], user_id: str) -> list[Row]:
    """The projects in which ``user_id`` holds at least one role."""
    return _all(
        conn,
        "SELECT * FROM {s}.projects WHERE id IN "
        "(SELECT project_id FROM {s}.role_assignments WHERE user_id = %(user)s "
        "UNION SELECT g.scope_id FROM {s}.group_assignments g "
        "JOIN {s}.group_members m ON m.group_id = g.group_id "
        "WHERE m.user_id = %(user)s AND g.scope_type = 'project') ORDER BY name, id",
        {"user": user_id},
    )


# -- users ----------------------------------------------------------------------------------------
def get_user(conn: psycopg.Connection[Any], user_id: str) -> Row | None:
    return _one(conn, "SELECT * FROM {s}.users WHERE id = %s", (user_id,))


def user_by_name(conn: psycopg.Connection[Any], name: str, domain_id: str) -> Row | None:
    return _one(conn, "SELECT * FROM {s}.users WHERE name = %s AND domain_id = %s", (name, domain_id))


def list_users(
    conn: psycopg.Connection[Any],
    *,
    name: str | None = None,
    domain_id: str | None = None,
    enabled: bool | None = None,
) -> list[Row]:
    where, params = _filters(name=name, domain_id=domain_id, enabled=enabled)
    return _all(conn, f"SELECT * FROM {{s}}.users{_where(where)} ORDER BY name, id", tuple(params))


# -- roles ----------------------------------------------------------------------------------------
def get_role(conn: psycopg.Connection[Any], role_id: str) -> Row | None:
    return _one(conn, "SELECT * FROM {s}.roles WHERE id = %s", (role_id,))


def list_roles(conn: psycopg.Connection[Any], *, name: str | None = None) -> list[Row]:
    where, params = _filters(name=name)
    return _all(conn, f"SELECT * FROM {{s}}.roles{_where(where)} ORDER BY name", tuple(params))


def list_assignments(
    conn: psycopg.Connection[Any],
    *,
    user_id: str | None = None,
    project_id: str | None = None,
    role_id: str | None = None,
) -> list[Row]:
    where, params = _filters(**{"a.user_id": user_id, "a.project_id": project_id, "a.role_id": role_id})
    return _all(
        conn,
        "SELECT a.*, r.name AS role_name, u.name AS user_name, u.domain_id AS user_domain_id, "
        "p.name AS project_name, p.domain_id AS project_domain_id "
        "FROM {s}.role_assignments a JOIN {s}.roles r ON r.id = a.role_id "
        "LEFT JOIN {s}.users u ON u.id = a.user_id LEFT JOIN {s}.projects p ON p.id = a.project_id"
        f"{_where(where)} ORDER BY a.project_id, a.user_id, r.name",
        tuple(params),
    )


def _filters(**columns: Any) -> tuple[list[str], list[Any]]:
    where, params = [], []
    for column, value in columns.items():
        if value is not None:
            where.append(f"{column} = %s")
            params.append(value)
    return where, params


def _where(clauses: list[str]) -> str:
    return (" WHERE " + " AND ".join(clauses)) if clauses else ""
