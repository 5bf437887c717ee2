"""The view a batch of events is applied to: the read-model tables of one schema, seen through the
rows the batch touches.

``ReadModelView`` is an eventsourcing ``TrackingRecorder``. ``load`` fetches, inside the batch's
transaction, the rows the batch's events read (``Keys``: one query per table, in one round trip);
the projection (``projections.readmodels``) reads and replaces them in memory and queues the
statements of the tables written without reading; ``flush`` writes the changed rows, the statements,
the tracking position and its NOTIFY, all committed together by the projector
(``projections.projector``).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from uuid import UUID

import psycopg
from eventsourcing.persistence import Tracking, TrackingRecorder
from psycopg import postgres, sql
from psycopg.adapt import Dumper
from psycopg.types.json import Jsonb, set_json_dumps

from projections.queries import read_json_with_orjson
from projections.schema import (
    CLAIM_COLUMNS,
    FLAVOR_COLUMNS,
    HOST_COLUMNS,
    INSTANCE_COLUMNS,
    LIVE_SCHEMA,
    POSITION_CHANNEL,
)
from projections.statements import Statement
from stratus.serialization import dumps

Row = dict[str, Any]
ClaimKey = tuple[UUID, str]
K = TypeVar("K", UUID, ClaimKey)
_UNKNOWN: Any = object()  # a key ``_Carried`` knows nothing of
# How many composed statements a view keeps (``ReadModelView._query``): a few dozen are made.
_QUERIES_KEPT = 1024
# How many rows of instances, and of claims, a fresh view carries from batch to batch (``_Carried``):
# a server's events span a few batches of a rebuild; about 10 MB of rows at most.
CARRIED_ROWS = 4096


@dataclass
class _WorkingSet:
    instances: dict[UUID, Row] = field(default_factory=dict)
    hosts: dict[UUID, Row] = field(default_factory=dict)
    claims: dict[ClaimKey, Row | None] = field(default_factory=dict)
    flavors: dict[UUID, Row] = field(default_factory=dict)
    dirty_instances: set[UUID] = field(default_factory=set)
    dirty_hosts: set[UUID] = field(default_factory=set)
    dirty_claims: set[ClaimKey] = field(default_factory=set)
    dirty_flavors: set[UUID] = field(default_factory=set)
    # Writes that need no row read first (the identity tables), run in order after the others.
    statements: list[Statement] = field(default_factory=list)
    # The rows the tables already held when the batch began (those not here are new to the table).
    stored_instances: frozenset[UUID] = frozenset()
    stored_claims: frozenset[ClaimKey] = frozenset()
    keys: Keys | None = None  # the rows the batch asked for


@dataclass(frozen=True)
class Keys:
    """The rows a batch of events may read, loaded in one query per table before it is applied."""

    instances: frozenset[UUID] = frozenset()
    hosts: frozenset[UUID] = frozenset()
    claims: frozenset[ClaimKey] = frozenset()
    flavors: frozenset[UUID] = frozenset()


class _Carried(Generic[K]):
    """A table's rows as the last committed batches left them (None: the table has no such row), for
    a fresh schema, which nothing but its view writes: the next batches take them from here instead
    of reading them again. At most ``limit``, the first carried leaving first (a row that left is
    read again, then carried anew)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.rows: dict[K, Row | None] = {}

    def split(self, keys: frozenset[K]) -> tuple[dict[K, Row], frozenset[K]]:
        """The rows of ``keys`` carried (each a copy: the batch may replace its values) and the keys
        to read from the table."""
        rows = self.rows
        found: dict[K, Row] = {}
        if not rows:  # a live view's (nothing is carried), or a rebuild's first batch
            return found, keys
        unknown: list[K] = []
        for key in keys:
            if (row := rows.get(key, _UNKNOWN)) is _UNKNOWN:
                unknown.append(key)
            elif row is not None:
                found[key] = dict(row)
        return found, frozenset(unknown)

    def update(self, rows: Mapping[K, Row | None], asked: frozenset[K]) -> None:
        """Carry ``rows`` as a batch committed them, and the keys ``asked`` that it found nowhere."""
        carried = self.rows
        carried.update(rows)
        carried.update(dict.fromkeys(asked - rows.keys()))
        if (excess := len(carried) - self.limit) > 0:
            for key in list(itertools.islice(carried, excess)):
                del carried[key]


class ReadModelView(TrackingRecorder):
    """The read-model tables of one schema, seen through the rows of the batch being applied.

    ``load`` fills the working set inside the batch's transaction, the projection reads and
    replaces rows in memory, and ``flush`` writes the changed ones and the tracking position.
    """

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        schema: str = LIVE_SCHEMA,
        *,
        rows_as_json_from: int = 2,
        fresh: bool = False,
    ) -> None:
        """``fresh``: the schema is a rebuild's, written by this view alone; a batch's changed
        instances (those stored deleted first) and the claims its table does not hold yet are then
        written with COPY (``copy_new``) and only the others upserted, and the instances and claims
        of the last batches are carried to the next ones (``committed``), not read again."""
        self.conn = conn
        self.fresh = fresh
        # From how many changed rows of a table ``flush`` sends them as one JSON array in one
        # statement (fewer: one prepared execution a row)
        self.rows_as_json_from = rows_as_json_from
        read_json_with_orjson(conn)
        self.schema = schema
        self._s = sql.Identifier(schema)
        self._types: dict[str, list[int]] = {}  # a table's column types, for COPY (``_column_types``)
        self._queries: dict[Hashable, bytes] = {}  # statements composed once (``_query``)
        if fresh:
            set_json_dumps(_dumps_str, conn)
            conn.adapters.register_dumper(None, _JsonbCopyDumper)  # COPY's jsonb columns (``_copy``)
        self._ws: _WorkingSet | None = None
        self._flushed: _WorkingSet | None = None  # a fresh view's batch written, not yet committed
        self._carried_instances = _Carried[UUID](CARRIED_ROWS if fresh else 0)
        self._carried_claims = _Carried[ClaimKey](CARRIED_ROWS if fresh else 0)

    def _query(self, key: Hashable, compose: Callable[[], sql.Composable]) -> bytes:
        """The statement ``compose`` makes, as the bytes sent, composed once per view: quoting a
        statement's identifiers costs up to 0.3 ms (the instances' upsert), every batch and table."""
        query = self._queries.get(key)
        if query is None:
            if len(self._queries) >= _QUERIES_KEPT:  # shapes come from the code: a bound all the same
                self._queries.clear()
            query = self._queries[key] = compose().as_bytes(self.conn)
        return query

    # -- TrackingRecorder ---------------------------------------------------------------------
    def max_tracking_id(self, application_name: str) -> int | None:
        row = self.conn.execute(sql.SQL("SELECT position FROM {}.tracking").format(self._s)).fetchone()
        return int(row[0]) if row else None

    def insert_tracking(self, tracking: Tracking) -> None:
        """Within a batch, nothing: ``flush`` writes the batch's last position, which covers every
        event of the batch, applied or not; outside one, the position is written at once."""
        if self._ws is not None:
            return
        self.conn.execute(
            sql.SQL("UPDATE {}.tracking SET position = %s, updated_at = now() WHERE position < %s").format(
                self._s
            ),
            (tracking.notification_id, tracking.notification_id),
        )

    # -- the batch's working set --------------------------------------------------------------
    def load(self, keys: Keys) -> None:
        """Fetch the rows ``keys`` names (those not carried from the last batches): one query per
        table, all sent in one round trip."""
        ws = self._ws = _WorkingSet(keys=keys)
        self._flushed = None  # what an attempt that did not commit wrote
        carried_instances, instance_keys = self._carried_instances.split(keys.instances)
        carried_claims, claim_keys = self._carried_claims.split(keys.claims)
        # the keys as binary arrays (%b): 0.2 us a key to dump, against 1.2 us as a text array (each
        # element made text, then checked for what needs quoting)
        with self.conn.pipeline():
            instances = self._select("instances", INSTANCE_COLUMNS, "id = ANY(%b)", instance_keys)
            hosts = self._select("hosts", HOST_COLUMNS, "id = ANY(%b)", keys.hosts)
            pairs = list(claim_keys)
            where = "(host_id, instance_id) IN (SELECT * FROM unnest(%b::uuid[], %b::text[]))"
            by_pair = ([h for h, _ in pairs], [i for _, i in pairs])
            claims = self._select("host_claims", CLAIM_COLUMNS, where, claim_keys, *by_pair)
            flavors = self._select("flavors", FLAVOR_COLUMNS, "id = ANY(%b)", keys.flavors)
        ws.instances = {row["id"]: row for row in _rows(instances)}
        ws.instances.update(carried_instances)
        ws.hosts = {row["id"]: row for row in _rows(hosts)}
        ws.claims = {(row["host_id"], row["instance_id"]): row for row in _rows(claims)}
        ws.claims.update(carried_claims)
        ws.flavors = {row["id"]: row for row in _rows(flavors)}
        ws.stored_instances = frozenset(ws.instances)
        ws.stored_claims = frozenset(ws.claims)

    def _select(
        self, table: str, columns: Sequence[str], where: str, keys: frozenset[Any], *params: Any
    ) -> psycopg.Cursor[Row] | None:
        """Send the query (in pipeline mode its rows are fetched later); None when no key asks for it."""
        if not keys:
            return None
        query = self._query(
            ("select", table, tuple(columns), where),
            lambda: sql.SQL("SELECT {} FROM {}.{} WHERE {}").format(
                sql.SQL(", ").join(map(sql.Identifier, columns)),
                self._s,
                sql.Identifier(table),
                sql.SQL(where),  # type: ignore[arg-type]
            ),
        )
        cur = self.conn.cursor(row_factory=psycopg.rows.dict_row)
        cur.execute(query, params or (list(keys),))
        return cur

    @property
    def ws(self) -> _WorkingSet:
        if self._ws is None:
            raise RuntimeError("the view is used outside a batch")
        return self._ws

    def instance(self, instance_id: UUID) -> Row | None:
        return self.ws.instances.get(instance_id)

    def put_instance(self, row: Row) -> None:
        ws, key = self.ws, row["id"]
        ws.instances[key] = row
        ws.dirty_instances.add(key)

    def host(self, host_id: UUID) -> Row | None:
        return self.ws.hosts.get(host_id)

    def put_host(self, row: Row) -> None:
        ws, key = self.ws, row["id"]
        ws.hosts[key] = row
        ws.dirty_hosts.add(key)

    def claim(self, host_id: UUID, instance_id: str) -> Row | None:
        return self.ws.claims.get((host_id, instance_id))

    def put_claim(self, row: Row) -> None:
        key = (row["host_id"], row["instance_id"])
        self.ws.claims[key] = row
        self.ws.dirty_claims.add(key)

    def drop_claim(self, host_id: UUID, instance_id: str) -> None:
        key = (host_id, instance_id)
        self.ws.claims[key] = None
        self.ws.dirty_claims.add(key)

    def flavor(self, flavor_uuid: UUID) -> Row | None:
        return self.ws.flavors.get(flavor_uuid)

    def put_flavor(self, row: Row) -> None:
        ws, key = self.ws, row["id"]
        ws.flavors[key] = row
        ws.dirty_flavors.add(key)

    def execute(self, statements: Iterable[Statement]) -> None:
        self.ws.statements.extend(statements)

    def flush(self, position: int) -> None:
        """Write every changed row, then the tracking position and its NOTIFY (delivered at commit)."""
        with self.conn.pipeline():
            self._write(position)
        if self.fresh:
            self._flushed = self._ws
        self._ws = None

    def committed(self) -> None:
        """The transaction of the batch last flushed has committed (the projector's word): in a
        fresh schema, its instances and claims, as the tables now hold them, are carried to the next
        batches. Until then (a batch rolled back, bisected, retried) what is carried stays what the
        tables held before it."""
        ws, self._flushed = self._flushed, None
        if ws is None or ws.keys is None:
            return
        self._carried_instances.update(ws.instances, ws.keys.instances)
        self._carried_claims.update(ws.claims, ws.keys.claims)

    def copy_new(self) -> None:
        """In a fresh schema, COPY the batch's changed instances (those its table holds already
        deleted first: no conflict is possible, nothing else writes there) and the claims its table
        does not hold yet, and leave only the others to ``flush``'s upserts. Outside pipeline mode
        (COPY cannot run in it), inside the batch's transaction.

        A stored instance is deleted and copied rather than upserted: PostgreSQL turns a row into
        the table's row type from JSON, then resolves the conflict, at two to three times the CPU of
        a delete by key and a COPY row. The table has no column but ``INSTANCE_COLUMNS`` (no
        statement writes it), so a rewritten row loses nothing."""
        if not self.fresh:
            return
        ws = self.ws
        if stored := ws.dirty_instances & ws.stored_instances:
            delete = self._query(
                "delete instances",
                lambda: sql.SQL("DELETE FROM {}.instances WHERE id = ANY(%b)").format(self._s),
            )
            self.conn.execute(delete, (list(stored),))
        self._copy("instances", INSTANCE_COLUMNS, [ws.instances[k] for k in ws.dirty_instances])
        ws.dirty_instances = set()
        added = {k: row for k in ws.dirty_claims - ws.stored_claims if (row := ws.claims[k]) is not None}
        self._copy("host_claims", CLAIM_COLUMNS, list(added.values()))
        ws.dirty_claims -= added.keys()
        # a claim made and dropped within the batch was never written: nothing to delete either
        ws.dirty_claims -= {k for k in ws.dirty_claims - ws.stored_claims if ws.claims[k] is None}

    def _copy(self, table: str, columns: Sequence[str], rows: list[Row]) -> None:
        if not rows:
            return
        statement = self._query(
            ("copy", table, tuple(columns)),
            lambda: sql.SQL("COPY {}.{} ({}) FROM STDIN").format(
                self._s, sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns))
            ),
        )
        # each column dumped by its table type (a jsonb column's dict or list straight to orjson,
        # ``set_json_dumps`` in ``__init__``), not found per value from its Python type
        types = self._column_types(table, columns)  # before the COPY holds the connection
        values = operator.itemgetter(*columns)  # a row's values in ``columns``' order (two or more)
        with self.conn.cursor() as cur, cur.copy(statement) as copy:
            copy.set_types(types)
            for row in rows:
                copy.write_row(values(row))

    def _column_types(self, table: str, columns: Sequence[str]) -> list[int]:
        """``table``'s column types in ``columns``' order (read once per view and table)."""
        if table not in self._types:
            with self.conn.cursor(row_factory=psycopg.rows.tuple_row) as cur:
                cur.execute(
                    "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
                    "WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped",
                    (f"{self.schema}.{table}",),
                )
                found: dict[str, str] = dict(cur.fetchall())
            # as oids: ``set_types`` would look each name up again, every COPY
            self._types[table] = [self.conn.adapters.types.get_oid(found[c]) for c in columns]
        return self._types[table]

    def _write(self, position: int) -> None:
        ws = self.ws
        self._upsert("instances", INSTANCE_COLUMNS, ("id",), [ws.instances[k] for k in ws.dirty_instances])
        self._upsert("hosts", HOST_COLUMNS, ("id",), [ws.hosts[k] for k in ws.dirty_hosts])
        self._upsert("flavors", FLAVOR_COLUMNS, ("flavorid",), [ws.flavors[k] for k in ws.dirty_flavors])
        kept = [row for k in ws.dirty_claims if (row := ws.claims[k]) is not None]
        gone = [k for k in ws.dirty_claims if ws.claims[k] is None]
        self._upsert("host_claims", CLAIM_COLUMNS, ("host_id", "instance_id"), kept)
        if gone:  # one statement for all of them (a rebuild's batch gives up hundreds)
            delete = self._query(
                "delete claims",
                lambda: sql.SQL(
                    "DELETE FROM {}.host_claims "
                    "WHERE (host_id, instance_id) IN (SELECT * FROM unnest(%b::uuid[], %b::text[]))"
                ).format(self._s),
            )
            self.conn.execute(delete, ([h for h, _ in gone], [i for _, i in gone]))
        for statement, params in ws.statements:
            self.conn.execute(self._statement(statement), params)
        track = self._query(
            "tracking",
            lambda: sql.SQL("UPDATE {}.tracking SET position = %s, updated_at = now()").format(self._s),
        )
        self.conn.execute(track, (position,))
        self.conn.execute("SELECT pg_notify(%s, %s)", (POSITION_CHANNEL, str(position)))

    def _statement(self, statement: str) -> bytes:
        """A statement of the tables written without reading (``{s}``: this view's schema)."""
        return self._query(("statement", statement), lambda: sql.SQL(statement).format(s=self._s))  # type: ignore[arg-type]

    def discard(self) -> None:
        self._ws = None

    def _upsert(self, table: str, columns: Sequence[str], key: Sequence[str], rows: list[Row]) -> None:
        if not rows:
            return
        as_json = len(rows) >= self.rows_as_json_from
        query = self._query(
            ("upsert", table, tuple(columns), tuple(key), as_json),
            lambda: _upsert_statement(self._s, table, columns, key, as_json),
        )
        if not as_json:
            with self.conn.cursor() as cur:
                cur.executemany(query, [tuple(_adapt(row[c]) for c in columns) for row in rows])
            return
        values = operator.itemgetter(*columns)
        array = [dict(zip(columns, values(row), strict=True)) for row in rows]
        self.conn.execute(query, (_dumps_str(array),))


def _upsert_statement(
    schema: sql.Identifier, table: str, columns: Sequence[str], key: Sequence[str], as_json: bool
) -> sql.Composable:
    """The upsert of ``table``'s rows: one execution a row, or (``as_json``: a rebuild's or a
    catch-up's batch) all of them in one statement, as one JSON array that PostgreSQL turns into
    the table's row type. The same values arrive: json null is SQL NULL, a jsonb column takes the
    JSON value as it is."""
    names = sql.SQL(", ").join(map(sql.Identifier, columns))
    conflict = sql.SQL("ON CONFLICT ({}) DO UPDATE SET {}").format(
        sql.SQL(", ").join(map(sql.Identifier, key)),
        sql.SQL(", ").join(
            sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in columns if c not in key
        ),
    )
    if not as_json:
        return sql.SQL("INSERT INTO {}.{} ({}) VALUES ({}) {}").format(
            schema,
            sql.Identifier(table),
            names,
            sql.SQL(", ").join(sql.Placeholder() * len(columns)),
            conflict,
        )
    return sql.SQL(
        "INSERT INTO {s}.{t} ({c}) SELECT {c} FROM jsonb_populate_recordset(NULL::{s}.{t}, %s::jsonb) {u}"
    ).format(s=schema, t=sql.Identifier(table), c=names, u=conflict)


def _rows(cur: psycopg.Cursor[Row] | None) -> list[Row]:
    if cur is None:
        return []
    with cur:
        return cur.fetchall()


def _adapt(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return Jsonb(value, dumps=_dumps_str)
    return value


def _dumps_str(obj: Any) -> str:
    return dumps(obj).decode()


class _JsonbCopyDumper(Dumper):
    """A jsonb column's value in a fresh view's COPY (found by the column's type, ``Copy.set_types``):
    the bytes of the one JSON policy, as ``set_json_dumps(_dumps_str)`` gives them without their
    round trip through ``str``."""

    oid = postgres.types["jsonb"].oid

    def dump(self, obj: Any) -> bytes:
        return dumps(obj)
