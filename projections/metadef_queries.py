"""What the API reads of metadata definitions (tables of ``projections.metadefs``).

Same conventions as ``projections.queries``: an open connection in, plain dicts out, tables named
``stratus_rm.<table>``.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from projections.queries import MarkerNotFound, Row, _fetchall, _fetchone
from projections.schema import LIVE_SCHEMA

_S = sql.Identifier(LIVE_SCHEMA)
# The columns a namespace list may be sorted by (Glance's sort_key); ties go by creation, then id.
SORT_KEYS = ("created_at", "updated_at", "namespace", "display_name", "visibility", "owner", "protected")


def list_namespaces(
    conn: psycopg.Connection[Any],
    *,
    project_id: str | None,
    limit: int,
    marker: str | None = None,
    visibility: str | None = None,
    resource_types: tuple[str, ...] = (),
    sort_key: str = "created_at",
    sort_dir: str = "desc",
) -> list[Row]:
    """A page of the namespaces ``project_id`` sees (None: an admin, every one), Glance's order.

    ``marker`` is the last namespace (by name) of the previous page; ``resource_types`` keeps those
    associated with any of them.
    """
    where: list[sql.Composable] = [sql.SQL("true")]
    params: list[Any] = []
    if project_id is not None:
        where.append(sql.SQL("(visibility = 'public' OR owner = %s)"))
        params.append(project_id)
    if visibility is not None:
        where.append(sql.SQL("visibility = %s"))
        params.append(visibility)
    if resource_types:
        where.append(
            sql.SQL(
                "EXISTS (SELECT 1 FROM jsonb_array_elements(resource_type_associations) a"
                " WHERE a->>'name' = ANY(%s))"
            )
        )
        params.append(list(resource_types))
    keys = [sql.Identifier(k) for k in dict.fromkeys((sort_key, "created_at", "id"))]
    descending = sort_dir == "desc"
    if marker is not None:
        found = _fetchone(
            conn, sql.SQL("SELECT * FROM {}.metadef_namespaces WHERE namespace = %s").format(_S), (marker,)
        )
        if found is None:
            raise MarkerNotFound(marker)
        values = [found[k] for k in dict.fromkeys((sort_key, "created_at", "id"))]
        where.append(
            sql.SQL("({}) {} ({})").format(
                sql.SQL(", ").join(keys),
                sql.SQL("<" if descending else ">"),
                sql.SQL(", ").join(sql.Placeholder() * len(values)),
            )
        )
        params.extend(values)
    order = sql.SQL(", ").join(
        sql.SQL("{} {}").format(k, sql.SQL("DESC" if descending else "ASC")) for k in keys
    )
    query = sql.SQL("SELECT * FROM {}.metadef_namespaces WHERE {} ORDER BY {} LIMIT %s").format(
        _S, sql.SQL(" AND ").join(where), order
    )
    return _fetchall(conn, query, [*params, max(0, limit)])


def list_resource_types(conn: psycopg.Connection[Any]) -> list[Row]:
    """Every resource type ever named: Glance's seeded ones first, then in the order they appeared."""
    query = sql.SQL("SELECT * FROM {}.metadef_resource_types ORDER BY created_at, name").format(_S)
    return _fetchall(conn, query)
