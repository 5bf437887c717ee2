"""Readiness of the read models: PostgreSQL reachable, and the position the read models hold.

The API and the projector answer ``/readyz`` with it (``stratus.health``): a part that reads or
writes the read models is ready when PostgreSQL answers and the live schema's tracking position is
within the configured lag of the log's head.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import psycopg
import psycopg_pool
from psycopg import sql
from psycopg.rows import tuple_row

from projections.schema import LIVE_SCHEMA
from stratus.health import Check, LogLag, lag, lag_check, log_head_check

Connect = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]
# What PostgreSQL (or a pool waiting for it) raises while it is away.
_DATABASE_AWAY: tuple[type[Exception], ...] = (psycopg.Error, psycopg_pool.PoolTimeout)


def position(conn: psycopg.Connection[Any], schema: str = LIVE_SCHEMA) -> int:
    """The log position the read models hold (0 before the first batch)."""
    query = sql.SQL("SELECT position FROM {}.tracking").format(sql.Identifier(schema))
    row = conn.cursor(row_factory=tuple_row).execute(query).fetchone()  # whatever the pool's rows are
    return int(row[0]) if row else 0


def read_model_check(connect: Connect) -> tuple[Check, int | None]:
    """PostgreSQL reachable: the read models' position, or why it could not be read."""
    try:
        with connect() as conn:
            at = position(conn)
    except _DATABASE_AWAY as e:
        return Check("postgresql", False, f"unreachable: {type(e).__name__}: {e}"[:200]), None
    return Check("postgresql", True, f"read models at {at}"), at


def readiness(
    head: Callable[[], int | None],
    connect: Connect,
    when: Callable[[int], float | None],
    max_lag: int,
) -> tuple[list[Check], LogLag | None]:
    """JetStream and PostgreSQL reachable, and the projector within ``max_lag`` positions of the head;
    the lag, when both could be read."""
    log_check, at_head = log_head_check(head)
    db_check, at = read_model_check(connect)
    checks: Sequence[Check] = [log_check, db_check]
    if at_head is None or at is None:
        return [*checks, Check("projector_lag", False, "unknown: the log or the read models are away")], None
    lagging = lag(at_head, at, when)
    return [*checks, lag_check(lagging, max_lag)], lagging


def connector(url: str, timeout: float = 2.0) -> Connect:
    """Short-lived connections for the probes (the projector holds its one connection for its batches)."""

    def connect() -> AbstractContextManager[psycopg.Connection[Any]]:
        return psycopg.connect(url, connect_timeout=max(1, int(timeout)), application_name="stratus-probe")

    return connect
