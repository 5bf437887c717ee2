"""The projector's two ways of writing a batch's changed rows give the same read models: one prepared
execution a row, or all of a table's rows as one JSON array in one statement (``ReadModelView``'s
``rows_as_json_from``)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from commands.app import Stratus
from projections.schema import create_schema
from tests.fixtures.projections import head, make_projector, populate, snapshot


def _projected(app: Stratus, rm: psycopg.Connection[Any], schema: str, rows_as_json_from: int) -> Any:
    with rm.transaction():
        rm.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        create_schema(rm, schema)
    projector = make_projector(app, rm, schema=schema, batch_size=97, lock=False)
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
