"""What the API reads of key pairs (the table of ``projections.keypairs``).

Same conventions as ``projections.queries``: an open connection in, plain dicts out, tables named
``stratus_rm.<table>``.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from projections.queries import Listed, MarkerNotFound, Row, _fetchall, _fetchone, view_rows
from projections.schema import LIVE_SCHEMA

_S = sql.Identifier(LIVE_SCHEMA)


def list_keypairs(
    conn: psycopg.Connection[Any], user_id: str, *, limit: int, marker: str | None = None
) -> list[Listed]:
    """A user's key pairs by name (Nova's order), rows as a list's (``view_rows``); ``marker`` is
    the last name of the previous page."""
    where = [sql.SQL("user_id = %s"), sql.SQL("NOT deleted")]
    params: list[Any] = [user_id]
    if marker is not None:
        if get_keypair(conn, user_id, marker) is None:
            raise MarkerNotFound(marker)
        where.append(sql.SQL("name > %s"))
        params.append(marker)
    query = sql.SQL("SELECT * FROM {}.keypairs WHERE {} ORDER BY name LIMIT %s").format(
        _S, sql.SQL(" AND ").join(where)
    )
    params.append(max(0, limit))
    return _fetchall(conn, query, params, view_rows)


def get_keypair(conn: psycopg.Connection[Any], user_id: str, name: str) -> Row | None:
    return _fetchone(
        conn,
        sql.SQL("SELECT * FROM {}.keypairs WHERE user_id = %s AND name = %s AND NOT deleted").format(_S),
        (user_id, name),
    )
