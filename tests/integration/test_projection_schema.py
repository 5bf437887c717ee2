"""The read models' schema upgrades: a live schema made by an older Stratus gets what is new."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from projections.schema import LIVE_SCHEMA, ensure_live_schema, migrate_live_page_indexes

LIVE_PAGE_INDEXES = ["instances_live_page", "instances_live_project_page"]
PROJECT_PAGE = (
    f"EXPLAIN SELECT * FROM {LIVE_SCHEMA}.instances WHERE project_id = 'p' AND NOT deleted "
    "ORDER BY created_at DESC, id DESC LIMIT 100"
)


def _indexes(conn: psycopg.Connection[Any]) -> list[str]:
    rows = conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND indexname = ANY(%s) ORDER BY 1",
        (LIVE_SCHEMA, LIVE_PAGE_INDEXES),
    ).fetchall()
    return [r[0] for r in rows]


def _analyzed(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute(
        "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables "
        "WHERE schemaname = %s AND relname = 'instances'",
        (LIVE_SCHEMA,),
    ).fetchone()
    return bool(row and row[0])


def test_a_new_read_model_has_the_live_page_indexes(rm: psycopg.Connection[Any]) -> None:
    assert _indexes(rm) == LIVE_PAGE_INDEXES
    assert not migrate_live_page_indexes(rm, LIVE_SCHEMA)  # nothing to do


def test_a_read_model_made_before_them_gets_them_and_statistics(
    rm: psycopg.Connection[Any], database_url: str
) -> None:
    for name in LIVE_PAGE_INDEXES:  # as an older Stratus created the schema
        rm.execute(f"DROP INDEX {LIVE_SCHEMA}.{name}")
    assert _indexes(rm) == []
    # what the projector and the API run at start (the API's connections make dict rows)
    with psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as conn:
        ensure_live_schema(conn)
    assert _indexes(rm) == LIVE_PAGE_INDEXES
    # pg_stat's counters arrive from the backend at its next report; a new session sees them
    rm.execute("SELECT pg_stat_force_next_flush()")
    assert _analyzed(rm)


def test_a_page_that_leaves_deleted_servers_out_can_use_the_live_index(rm: psycopg.Connection[Any]) -> None:
    with rm.transaction():
        rm.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(r[0] for r in rm.execute(PROJECT_PAGE).fetchall())
    assert "instances_live_project_page" in plan, plan
