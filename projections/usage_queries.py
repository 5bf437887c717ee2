"""A project's quota usage as the read models show it, counted the way ``commands.usage`` counts it.

The decision itself never reads this (it uses the ProjectUsage aggregate on the log, which cannot
lag); this is what the API shows (os-quota-sets ``in_use``, limits ``total*Used``) and what tests and
auditors compare the log's usage with. A server counts as an instance until it is deleted; its cores
and RAM count unless it is in ERROR (a failed server holds nothing).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from projections.queries import _S, _fetchone


def project_usage(conn: psycopg.Connection[Any], project_id: str) -> dict[str, int]:
    """``{"instances", "cores", "ram"}`` in use by ``project_id``'s servers."""
    row = _fetchone(
        conn,
        sql.SQL(
            "SELECT count(*) AS instances,"
            " coalesce(sum((flavor->>'vcpus')::int) FILTER (WHERE vm_state <> 'error'), 0) AS cores,"
            " coalesce(sum((flavor->>'ram')::bigint) FILTER (WHERE vm_state <> 'error'), 0) AS ram"
            " FROM {}.instances WHERE project_id = %s AND NOT deleted"
        ).format(_S),
        (project_id,),
    )
    assert row is not None  # an aggregate without GROUP BY always answers one row
    return {k: int(row[k]) for k in ("instances", "cores", "ram")}
