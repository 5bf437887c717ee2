"""The projector's ways of writing a batch's changed rows give the same read models: one prepared
execution a row, all of a table's rows as one JSON array in one statement (``ReadModelView``'s
``rows_as_json_from``), or, in a rebuild's fresh schema, the changed instances and the claims new
to their table with COPY (``fresh``)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from commands.app import Stratus
from projections.schema import INSTANCE_COLUMNS, create_schema
from tests.fixtures.projections import head, make_projector, populate, snapshot


def _projected(
    app: Stratus, rm: psycopg.Connection[Any], schema: str, rows_as_json_from: int, *, fresh: bool = False
) -> Any:
    with rm.transaction():
        rm.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        create_schema(rm, schema)
    projector = make_projector(app, rm, schema=schema, batch_size=97, lock=False, fresh=fresh)
    projector.view.rows_as_json_from = rows_as_json_from
    assert projector.catch_up() == head(app)
    return snapshot(rm, schema)


def test_rows_written_as_one_json_array_equal_rows_written_one_by_one(
    app: Stratus, rm: psycopg.Connection[Any]
) -> None:
    populate(app, instances=120, hosts=4, chunk=40)
    one_by_one = _projected(app, rm, "rm_rows", 10**9)
    as_json = _projected(app, rm, "rm_json", 1)
    assert len(one_by_one["instances"]) == 120 and one_by_one["host_claims"] and one_by_one["flavors"]
    assert as_json == one_by_one


def test_rows_new_to_a_fresh_schema_copied_equal_rows_upserted(
    app: Stratus, rm: psycopg.Connection[Any]
) -> None:
    # batches of 97: a server's events span batches, so its row is COPYed, then deleted and COPYed again
    populate(app, instances=120, hosts=4, chunk=40)
    upserted = _projected(app, rm, "rm_upserted", 1)
    copied = _projected(app, rm, "rm_copied", 1, fresh=True)
    assert len(copied["instances"]) == 120 and copied["host_claims"]
    assert copied == upserted


def test_a_fresh_view_writes_every_column_of_instances(rm: psycopg.Connection[Any]) -> None:
    # a fresh schema's changed servers are deleted and COPYed with these columns: no other may exist
    with rm.transaction():
        rm.execute("DROP SCHEMA IF EXISTS rm_columns CASCADE")
        create_schema(rm, "rm_columns")
    found = rm.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'rm_columns.instances'::regclass "
        "AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
    ).fetchall()
    assert sorted(name for (name,) in found) == sorted(INSTANCE_COLUMNS)
