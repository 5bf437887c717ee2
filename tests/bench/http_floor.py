"""The least an HTTP list request can cost here: falcon under gunicorn running a page's statements.

``bench_lists`` serves this app as it serves the API (gunicorn, two sync workers): ``GET
/floor/{listing}/{page}`` runs the statements the API ran for that page (recorded by the bench, in
the file ``STRATUS_BENCH_STATEMENTS`` names: a pickled ``{listing: [[(sql text, params), ...] per
page]}``) on the worker's one connection and answers the rows, as tuples, in JSON. No token, no
views, no middleware: what any code answering that page through this stack would spend at least,
besides the work of its own.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

import falcon
import orjson
import psycopg


class Page:
    def __init__(
        self, statements: dict[str, list[list[tuple[str, Any, bool]]]], url: str, token: bool
    ) -> None:
        self.statements = statements
        self.url = url
        self.token = token  # run the token's identity lookup first, as the API does per request
        self.conn: psycopg.Connection[Any] | None = None  # one per worker, opened on its first request

    def on_get(self, req: falcon.Request, resp: falcon.Response, listing: str, page: int) -> None:
        if self.conn is None:
            self.conn = psycopg.connect(self.url, autocommit=True)
        rows: list[Any] = []
        with self.conn.cursor() as cur:
            for query, params, lookup in self.statements[listing][page]:
                if lookup and not self.token:
                    continue
                cur.execute(query, params)
                if cur.description is not None and not lookup:
                    rows += cur.fetchall()
        resp.data = orjson.dumps({"rows": rows}, default=str)
        resp.content_type = falcon.MEDIA_JSON


def get_app() -> falcon.App:
    with open(os.environ["STRATUS_BENCH_STATEMENTS"], "rb") as f:
        statements = pickle.load(f)  # the bench's own file, written just before
    app = falcon.App()
    url = os.environ["DATABASE_URL"]
    app.add_route("/floor/{listing}/{page:int}", Page(statements, url, token=False))
    app.add_route("/floor-token/{listing}/{page:int}", Page(statements, url, token=True))
    return app
