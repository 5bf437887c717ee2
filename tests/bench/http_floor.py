"""The least an HTTP list request can cost here: falcon under gunicorn running a page's statements.

``bench_lists`` serves this app as it serves the API (gunicorn, two sync workers): ``GET
/floor/{listing}/{page}`` runs the statements the API ran for that page (recorded by the bench, in
the file ``STRATUS_BENCH_STATEMENTS`` names: a pickled ``{listing: [[(sql text, params), ...] per
page]}``) on the worker's one connection and answers the rows, as tuples, in JSON. No token, no
views, no middleware: what any code answering that page through this stack would spend at least,
besides the work of its own.

Four routes: ``/floor`` (the page's statements alone), ``/floor-token`` (the token's identity
lookup first, then the statements, one connection), ``/floor-beside`` (the lookup on a second
connection in another thread while the statements run on the first, the answer sent when both are
done: the least a request costs that checks its token beside its read, as the API's lists did until
session 19) and ``/floor-pipelined`` (the lookup and the page's first statement queued in one
pipeline on the one connection, sent with one sync and answered in one round trip, the page's other
statements after: the least a request costs that checks its token in its read's first round trip).
"""

from __future__ import annotations

import os
import pickle
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import falcon
import orjson
import psycopg


class Page:
    def __init__(
        self,
        statements: dict[str, list[list[tuple[str, Any, bool]]]],
        url: str,
        token: bool,
        beside: bool = False,
        pipelined: bool = False,
    ) -> None:
        self.statements = statements
        self.url = url
        self.token = token  # run the token's identity lookup first, as the API does per request
        self.beside = beside  # ... or at once with the statements, on a second connection
        self.pipelined = pipelined  # ... or in one pipeline with the first statement, on the one connection
        self.conn: psycopg.Connection[Any] | None = None  # one per worker, opened on its first request
        self.lookup_conn: psycopg.Connection[Any] | None = None
        self.lookups = ThreadPoolExecutor(1) if beside else None

    def on_get(self, req: falcon.Request, resp: falcon.Response, listing: str, page: int) -> None:
        if self.conn is None:
            self.conn = psycopg.connect(self.url, autocommit=True)
        statements = self.statements[listing][page]
        if self.pipelined:
            resp.data = orjson.dumps({"rows": self._pipelined(statements)}, default=str)
            resp.content_type = falcon.MEDIA_JSON
            return
        checked = None
        if self.lookups is not None:
            checked = self.lookups.submit(self._lookups, [(q, p) for q, p, lookup in statements if lookup])
        rows: list[Any] = []
        with self.conn.cursor() as cur:
            for query, params, lookup in statements:
                if lookup and (checked is not None or not self.token):
                    continue
                cur.execute(query, params)
                if cur.description is not None and not lookup:
                    rows += cur.fetchall()
        if checked is not None:
            checked.result()
        resp.data = orjson.dumps({"rows": rows}, default=str)
        resp.content_type = falcon.MEDIA_JSON

    def _pipelined(self, statements: list[tuple[str, Any, bool]]) -> list[Any]:
        """The lookup and the first statement in one round trip (one sync), then the others."""
        assert self.conn is not None
        lookups = [(q, p) for q, p, lookup in statements if lookup]
        page = [(q, p) for q, p, lookup in statements if not lookup]
        rows: list[Any] = []
        with self.conn.pipeline():  # its exit sends the sync and reads every result
            looked = [self.conn.cursor() for _ in lookups]
            for cur, (query, params) in zip(looked, lookups, strict=True):
                cur.execute(query, params)
            first = self.conn.cursor()
            if page:
                first.execute(*page[0])
        for cur in looked:
            cur.fetchall()
        with first as cur:
            if page and cur.description is not None:
                rows += cur.fetchall()
            for query, params in page[1:]:
                cur.execute(query, params)
                if cur.description is not None:
                    rows += cur.fetchall()
        return rows

    def _lookups(self, lookups: list[tuple[str, Any]]) -> None:
        if self.lookup_conn is None:
            self.lookup_conn = psycopg.connect(self.url, autocommit=True)
        with self.lookup_conn.cursor() as cur:
            for query, params in lookups:
                cur.execute(query, params)
                cur.fetchall()


def get_app() -> falcon.App:
    with open(os.environ["STRATUS_BENCH_STATEMENTS"], "rb") as f:
        statements = pickle.load(f)  # the bench's own file, written just before
    app = falcon.App()
    url = os.environ["DATABASE_URL"]
    app.add_route("/floor/{listing}/{page:int}", Page(statements, url, token=False))
    app.add_route("/floor-token/{listing}/{page:int}", Page(statements, url, token=True))
    app.add_route("/floor-beside/{listing}/{page:int}", Page(statements, url, token=True, beside=True))
    app.add_route("/floor-pipelined/{listing}/{page:int}", Page(statements, url, token=True, pipelined=True))
    return app
