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

import operator
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
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
# How many composed statements a view keeps (``ReadModelView._query``): a few dozen are made.
_QUERIES_KEPT = 1024


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


@dataclass(frozen=True)
class Keys:
    """The rows a batch of events may read, loaded in one query per table before it is applied."""

    instances: frozenset[UUID] = frozenset()
    hosts: frozenset[UUID] = frozenset()
    claims: frozenset[ClaimKey] = frozenset()
    flavors: frozenset[UUID] = frozenset()

    @property
    def empty(self) -> bool:
        """No row of any table named."""
        return not (self.instances or self.hosts or self.claims or self.flavors)


# How many rows a catch-up keeps in memory from the batches it wrote (``Carried``): ~1.7 KB each
# (measured: 6,913 rows of a 20,000-event log in 11.4 MiB), so ~13 MiB, what the projector's memory
# ceiling leaves (docs/performance.md, "Memory"); the rows of the last few batches of 2,000 events,
# which the next ones read, and a bound that older rows leave by whole batches.
CARRIED_ROWS = 8_000
_TABLES = ("instances", "hosts", "claims", "flavors")


class Carried:
    """The rows a rebuild's replay wrote in its last batches, kept in memory so that the next batch
    starts from them instead of reading them back (``Keys`` it would ``load``): the replay's fresh
    schema is written by its view alone, so a row kept here is the row the table holds once the
    batches handed to the writer are committed. A claim kept as None is one the table no longer
    holds. Until a row was let go (``CARRIED_ROWS``), a key kept nowhere is a row the table does not
    hold; after, such a key is read from the table (``working_set`` names it)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = CARRIED_ROWS if limit is None else limit
        self._rows: dict[str, dict[Any, tuple[int, Row | None]]] = {t: {} for t in _TABLES}
        self._batches: list[tuple[int, list[tuple[str, Any]]]] = []  # each batch's keys, oldest first
        self._kept = 0
        self._batch = 0
        self.complete = True  # no row let go yet: a key kept nowhere is not in the table

    def working_set(self, keys: Keys) -> tuple[_WorkingSet, Keys]:
        """A working set holding the rows of ``keys`` kept here, and the keys to read from the tables
        (none while ``complete``)."""
        ws = _WorkingSet()
        unknown: dict[str, set[Any]] = {t: set() for t in _TABLES}
        for table in _TABLES:
            kept, rows = self._rows[table], getattr(ws, table)
            for key in getattr(keys, table):
                found = kept.get(key)
                if found is None:
                    if not self.complete:
                        unknown[table].add(key)
                elif found[1] is not None:
                    rows[key] = found[1]
        ws.stored_instances = frozenset(ws.instances)  # kept: written by an earlier batch
        ws.stored_claims = frozenset(ws.claims)
        return ws, Keys(**{t: frozenset(k) for t, k in unknown.items()})

    def keep(self, ws: _WorkingSet) -> None:
        """Keep the rows of ``ws`` (applied, about to be written) as the tables will hold them; let
        the oldest batches' rows go past ``limit``."""
        self._batch += 1
        batch, keys = self._batch, []
        for table, dirty in (
            ("instances", ws.dirty_instances),
            ("hosts", ws.dirty_hosts),
            ("claims", ws.dirty_claims),
            ("flavors", ws.dirty_flavors),
        ):
            kept, rows = self._rows[table], getattr(ws, table)
            before = len(kept)  # the keys new to ``kept`` counted by its growth, not looked up each
            kept.update([(key, (batch, rows[key])) for key in dirty])
            self._kept += len(kept) - before
            keys.extend([(table, key) for key in dirty])
        self._batches.append((batch, keys))
        # the two newest batches stay whatever the bound: the writer may not have committed the
        # older one yet, and a row let go is read back (``Projector._in_memory``) as committed
        while self._kept > self.limit and len(self._batches) > 2:
            old, gone = self._batches.pop(0)
            for table, key in gone:
                kept = self._rows[table]
                if kept.get(key, (None,))[0] == old:  # not written again since
                    del kept[key]
                    self._kept -= 1
                    self.complete = False

    def clear(self) -> None:
        """Forget every row (a batch failed: the tables are read again from the next batch on)."""
        for kept in self._rows.values():
            kept.clear()
        self._batches.clear()
        self._kept = 0
        self.complete = False


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
        """``fresh``: the schema is a rebuild's, written by this view alone; a batch's instances and
        claims that its tables do not hold yet are then written with COPY (``copy_new``) and only
        the others upserted. A replay into the live tables does the same (``copies``) while it
        holds them (``Projector._replay``)."""
        self.conn = conn
        self.fresh = fresh
        # Whether ``copy_new`` writes the batch's instances and new claims with COPY: in a fresh
        # schema, and in a replay's batches, whose working sets know which rows the tables hold
        self.copies = fresh
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
        conn.adapters.register_dumper(None, _JsonbCopyDumper)  # COPY's jsonb columns (by oid: ``_copy``)
        self._ws: _WorkingSet | None = None

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
        """Fetch the rows ``keys`` names: one query per table, all sent in one round trip."""
        ws = self._ws = _WorkingSet()
        self.load_into(ws, keys)
        ws.stored_instances = frozenset(ws.instances)
        ws.stored_claims = frozenset(ws.claims)

    def load_into(self, ws: _WorkingSet, keys: Keys, conn: psycopg.Connection[Any] | None = None) -> None:
        """Add to ``ws`` the rows of ``keys`` the tables hold (one round trip; on ``conn``, else the
        view's connection); ``ws.stored_*`` are the caller's to settle."""
        conn = conn if conn is not None else self.conn
        # the keys as binary arrays (%b): 0.2 us a key to dump, against 1.2 us as a text array (each
        # element made text, then checked for what needs quoting)
        with conn.pipeline():
            instances = self._select("instances", INSTANCE_COLUMNS, "id = ANY(%b)", keys.instances, conn=conn)
            hosts = self._select("hosts", HOST_COLUMNS, "id = ANY(%b)", keys.hosts, conn=conn)
            pairs = list(keys.claims)
            where = "(host_id, instance_id) IN (SELECT * FROM unnest(%b::uuid[], %b::text[]))"
            by_pair = ([h for h, _ in pairs], [i for _, i in pairs])
            claims = self._select("host_claims", CLAIM_COLUMNS, where, keys.claims, *by_pair, conn=conn)
            flavors = self._select("flavors", FLAVOR_COLUMNS, "id = ANY(%b)", keys.flavors, conn=conn)
        ws.instances.update((row["id"], row) for row in _rows(instances))
        ws.hosts.update((row["id"], row) for row in _rows(hosts))
        ws.claims.update(((row["host_id"], row["instance_id"]), row) for row in _rows(claims))
        ws.flavors.update((row["id"], row) for row in _rows(flavors))

    def begin(self, ws: _WorkingSet) -> None:
        """Apply the next events to ``ws`` (a working set made without ``load``: ``Carried``)."""
        self._ws = ws

    def _select(
        self,
        table: str,
        columns: Sequence[str],
        where: str,
        keys: frozenset[Any],
        *params: Any,
        conn: psycopg.Connection[Any] | None = None,
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
        cur = (conn or self.conn).cursor(row_factory=psycopg.rows.dict_row)
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

    def flush(self, position: int, ws: _WorkingSet | None = None) -> None:
        """Write every changed row, then the tracking position and its NOTIFY (delivered at commit).
        ``ws``: a working set handed over (a rebuild's writer thread), else the batch's own."""
        with self.conn.pipeline():
            self._write(position, ws if ws is not None else self.ws)
        if ws is None:
            self._ws = None

    def copy_new(self, ws: _WorkingSet | None = None) -> None:
        """While ``copies`` (a fresh schema; a replay), COPY the batch's changed instances (those its
        table holds already deleted first) and the claims its table does not hold yet, and leave
        only the others to ``flush``'s upserts. No conflict is possible: the working set knows which
        rows the tables hold (read in the batch's transaction, or carried from the replay's batches,
        whose writer refuses a batch unless the tracking position is where they left it, so no one
        else wrote), and only projectors write these tables. Outside pipeline mode (COPY cannot run
        in it), inside the batch's transaction. ``ws``: a working set handed over (a replay's writer
        thread), else the batch's own.

        A stored instance is deleted and copied rather than upserted: PostgreSQL turns a row into
        the table's row type from JSON, then resolves the conflict, at two to three times the CPU of
        a delete by key and a COPY row. The table has no column but ``INSTANCE_COLUMNS`` (no
        statement writes it), so a rewritten row loses nothing."""
        if not self.copies:
            return
        ws = ws if ws is not None else self.ws
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

    def _write(self, position: int, ws: _WorkingSet) -> None:
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
        if self.schema == LIVE_SCHEMA:  # a rebuild's schema is not read yet: its position is no one's news
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
