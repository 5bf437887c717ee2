"""What the API reads of key pairs (the table of ``projections.keypairs``).

Same conventions as ``projections.queries``: an open connection in, plain dicts out, tables named
``stratus_rm.<table>``.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from projections.queries import Listed, MarkerNotFound, Row, _fetchall, _fetchone, composed_once, view_rows
from projections.schema import LIVE_SCHEMA

_S = sql.Identifier(LIVE_SCHEMA)


# The statements, composed once (composing one took ~20 us a request); the same text as composed
# per request before.
_PAGE = "SELECT * FROM {}.keypairs WHERE user_id = %s AND NOT deleted{} ORDER BY name LIMIT %s"
_FIRST_PAGE = composed_once(sql.SQL(_PAGE).format(_S, sql.SQL("")))
_NEXT_PAGE = composed_once(sql.SQL(_PAGE).format(_S, sql.SQL(" AND name > %s")))
_ONE = composed_once(
    sql.SQL("SELECT * FROM {}.keypairs WHERE user_id = %s AND name = %s AND NOT deleted").format(_S)
)


def list_keypairs(
    conn: psycopg.Connection[Any], user_id: str, *, limit: int, marker: str | None = None
) -> list[Listed]:
    """A user's key pairs by name (Nova's order), rows as a list's (``view_rows``); ``marker`` is
    the last name of the previous page."""
    if marker is None:
        return _fetchall(conn, _FIRST_PAGE, (user_id, max(0, limit)), view_rows)
    if get_keypair(conn, user_id, marker) is None:
        raise MarkerNotFound(marker)
    return _fetchall(conn, _NEXT_PAGE, (user_id, marker, max(0, limit)), view_rows)


def get_keypair(conn: psycopg.Connection[Any], user_id: str, name: str) -> Row | None:
    return _fetchone(conn, _ONE, (user_id, name))
