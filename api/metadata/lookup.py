"""The read-model rows the metadata service answers from: a server by id or by fixed address, and
its key pair. Deleted servers are not found: a guest that is gone has no metadata."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from projections.keypair_queries import get_keypair
from projections.queries import get_server
from projections.schema import LIVE_SCHEMA

Row = dict[str, Any]


def server_by_id(conn: psycopg.Connection[Any], server_id: str) -> Row | None:
    row = get_server(conn, server_id, None)
    return row if row is not None and not row["deleted"] else None


def server_by_address(conn: psycopg.Connection[Any], address: str) -> Row | None:
    """The live server whose fixed address is ``address`` (None if none, or more than one)."""
    query = sql.SQL(
        "SELECT i.*, (SELECT h.availability_zone FROM {s}.hosts h WHERE h.hostname = i.host) AS host_zone"
        " FROM {s}.instances i WHERE NOT i.deleted AND i.ports @> %s::jsonb LIMIT 2"
    ).format(s=sql.Identifier(LIVE_SCHEMA))
    with conn.cursor() as cur:
        cur.execute(query, (psycopg.types.json.Jsonb([{"address": address}]),))
        rows = cur.fetchall()
    return dict(rows[0]) if len(rows) == 1 else None


def keypair(conn: psycopg.Connection[Any], row: Row) -> Row | None:
    """The key pair the server was created with, while its owner still has it."""
    if not row.get("key_name"):
        return None
    return get_keypair(conn, str(row["user_id"]), str(row["key_name"]))
