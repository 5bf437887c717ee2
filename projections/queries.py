"""What the API reads: servers, flavors and hosts from the read models, and read-your-writes.

Every function takes an open psycopg connection (the caller's pool owns it) and returns plain dicts
keyed by the column names of ``projections.schema`` (uuid columns come back as ``uuid.UUID``,
timestamps as aware ``datetime``). Tables are always named ``stratus_rm.<table>``: a rebuild swaps
the schema under that name without readers noticing.

``wait_for_position`` is how a client reads its own write: every command returns the log position
of its last event, and the projector announces each batch it commits with a NOTIFY on
``stratus_rm_position``.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

import orjson
import psycopg
from psycopg import sql
from psycopg.rows import RowFactory, dict_row, namedtuple_row, tuple_row
from psycopg.types.json import set_json_loads
from psycopg.types.string import TextLoader

from projections.schema import LIVE_SCHEMA, POSITION_CHANNEL
from stratus.serialization import dumps


def read_json_with_orjson(conn: psycopg.Connection[Any]) -> None:
    """Load ``conn``'s json and jsonb values with orjson (the one JSON policy) instead of the standard
    library's ``json``: a server row has four jsonb columns, and ``json.loads`` was a tenth of a
    ``GET /servers/detail`` page's CPU. A value orjson refuses (a number beyond 64 bits, which jsonb
    can hold) is read by ``json`` as before."""
    set_json_loads(_loads_json, conn)


def _loads_json(data: bytes | bytearray | memoryview | str) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(bytes(data) if isinstance(data, memoryview) else data)


class QueryError(Exception):
    """A read-model query could not be answered."""


class MarkerNotFound(QueryError):
    """The paging marker names no row the caller can see (Nova answers 400)."""

    def __init__(self, marker: str) -> None:
        super().__init__(f"marker [{marker}] not found")
        self.marker = marker


class InvalidFilter(QueryError):
    """A filter value cannot be used (e.g. a ``name`` that is not a valid regular expression)."""


class ReadModelUnavailable(QueryError):
    """The read-model tables do not exist yet (the projector has never run against this database)."""


Row = dict[str, Any]
Listed = Any  # a list's row (``view_rows``): a named tuple of its statement's columns
_S = sql.Identifier(LIVE_SCHEMA)
_SCHEMA = _S.as_string()  # as text, for SQL composed as text


def _fetchall(
    conn: psycopg.Connection[Any],
    query: sql.SQL | sql.Composed,
    params: Any = None,
    row_factory: RowFactory[Any] = dict_row,
    *,
    as_text: bool = False,
) -> list[Any]:
    """The statement's rows; the values of the types in ``_AS_TEXT`` as their text when the rows are
    a list's (``view_rows``) or ``as_text`` asks for it."""
    try:
        with conn.cursor(row_factory=row_factory) as cur:
            if as_text or row_factory is view_rows:
                for oid in _AS_TEXT:  # this cursor's only
                    cur.adapters.register_loader(oid, TextLoader)
            cur.execute(query, params)
            return cur.fetchall()
    except psycopg.errors.UndefinedTable as e:
        raise ReadModelUnavailable(f"the read models are not there yet: {e}") from e
    except psycopg.errors.InvalidRegularExpression as e:
        raise InvalidFilter(f"invalid regular expression: {e.diag.message_primary}") from e


# A row factory for a list's page: each row a named tuple of the statement's columns (by name,
# ``row.flavorid``; psycopg makes the class once for each distinct set of columns), and, as
# ``_fetchall`` reads them, the values of the types in ``_AS_TEXT`` as their text: a view decodes
# the jsonb values it shows (``decode_json``), shows a uuid's text as it is, and the lists show no
# time PostgreSQL has not formatted already. A dict a row, and every jsonb value parsed, every uuid
# and time made an object, were a fifth of a page's CPU.
view_rows = namedtuple_row
_AS_TEXT = (3802, 2950, 1184)  # PostgreSQL's jsonb, uuid and timestamptz


def composed_once(query: sql.Composed) -> sql.SQL:
    """A statement composed once, when its module is imported, as its text (this module's SQL and
    identifiers only, no values): composing it again for each request took ~10-20 us."""
    return sql.SQL(query.as_string())


def _fetchone(conn: psycopg.Connection[Any], query: sql.SQL | sql.Composed, params: Any = None) -> Row | None:
    rows = _fetchall(conn, query, params)
    return rows[0] if rows else None


def _as_uuid(value: str) -> UUID | None:
    try:
        return UUID(value)
    except (ValueError, TypeError, AttributeError):
        return None


# -- positions ------------------------------------------------------------------------------------
def current_position(conn: psycopg.Connection[Any]) -> int:
    """The last log position the read models have applied (0 before the first event)."""
    row = _fetchone(conn, sql.SQL("SELECT position FROM {}.tracking").format(_S))
    return int(row["position"]) if row else 0


def wait_for_position(conn: psycopg.Connection[Any], position: int, timeout: float) -> bool:
    """Block until the read models have applied the log up to ``position``; False on timeout.

    On an autocommit connection this LISTENs for the projector's per-batch NOTIFY (and re-checks
    the tracking row at least every 0.25 s, so a missed notification costs little). On a connection
    inside a transaction it polls (a REPEATABLE READ snapshot would never see progress: use autocommit).
    """
    if current_position(conn) >= position:
        return True
    deadline = time.monotonic() + timeout
    if not conn.autocommit:
        return _poll(conn, position, deadline)
    channel = sql.Identifier(POSITION_CHANNEL)
    conn.execute(sql.SQL("LISTEN {}").format(channel))
    try:
        while True:
            # A batch may have committed between the first check and LISTEN: check again first.
            if current_position(conn) >= position:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            for notify in conn.notifies(timeout=min(remaining, 0.25)):
                if notify.payload.isdigit() and int(notify.payload) >= position:
                    return True
    finally:
        conn.execute(sql.SQL("UNLISTEN {}").format(channel))


def _poll(conn: psycopg.Connection[Any], position: int, deadline: float) -> bool:
    interval = 0.005
    while True:
        if current_position(conn) >= position:
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(interval, remaining))
        interval = min(interval * 2, 0.1)


# -- servers --------------------------------------------------------------------------------------
# Nova's list filters on a server's own columns: exact (``equal``) and regular expressions (``matching``).
LIST_EQUAL = {
    "uuid": "id", "user_id": "user_id", "vm_state": "vm_state", "task_state": "task_state",
    "launch_index": "launch_index",
}  # fmt: skip
LIST_MATCHING = {
    "key_name": "key_name", "availability_zone": "availability_zone", "description": "description",
    "hostname": "coalesce(hostname, lower(name))", "access_ip_v4": "access_ip_v4",
    "access_ip_v6": "access_ip_v6", "locked_by": "locked_by", "power_state": "power_state",
    "node": "host", "kernel_id": "image->>'kernel_id'", "ramdisk_id": "image->>'ramdisk_id'",
    "created_at": "created_at", "launched_at": "launched_at", "terminated_at": "deleted_at",
    "config_drive": "CASE WHEN config_drive THEN 'True' ELSE '' END", "root_device_name": "''",
    "progress": "''", "auto_disk_config": "disk_config",
}  # fmt: skip


def list_servers(
    conn: psycopg.Connection[Any],
    *,
    project_id: str | None,
    limit: int,
    marker: str | None,
    name: str | None = None,
    status: str | None = None,
    host: str | None = None,
    include_deleted: bool = False,
    changes_since: datetime | None = None,
    tags: list[str] | None = None,
    tags_any: list[str] | None = None,
    not_tags: list[str] | None = None,
    not_tags_any: list[str] | None = None,
    ip: str | None = None,
    reservation_id: str | None = None,
    flavor: str | None = None,
    image: str | None = None,
    locked: bool | None = None,
    changes_before: datetime | None = None,
    equal: dict[str, Any] | None = None,
    matching: dict[str, str] | None = None,
    sort: list[tuple[str, bool]] | None = None,
) -> list[ServerRow]:
    """A page of servers (``ServerRow``), newest first (created_at desc, id desc), as Nova pages them.

    ``project_id=None`` lists every project (admin). ``marker`` is the id of the last server of the
    previous page; ``MarkerNotFound`` if the caller cannot see it. ``name`` is a POSIX regular
    expression (Nova's semantics); ``status`` an API status such as ``ACTIVE`` (case-insensitive).
    ``changes_since`` keeps servers updated at or after it, deleted ones included (as Nova does);
    ``tags`` (all of them), ``tags_any``, ``not_tags`` (not all of them), ``not_tags_any`` (none of
    them) filter on tags; ``ip`` is a regular expression matched against the fixed addresses;
    ``flavor`` and ``image`` are the flavor's and image's ids; ``locked`` (2.73) whether it is locked;
    ``changes_before`` keeps servers updated at or before it (2.66); ``equal`` maps columns of
    ``LIST_EQUAL`` to values, ``matching`` columns of ``LIST_MATCHING`` to POSIX regular expressions.
    ``sort``: Nova's sort keys (``SORT_KEYS``) with ``True`` for descending; created_at and id break
    ties, and the marker pages through the same order.
    """
    where: list[str] = []  # this module's SQL only: the values are parameters
    params: list[Any] = []
    if project_id is not None:
        where.append("project_id = %s")
        params.append(project_id)
    if not include_deleted and changes_since is None:
        where.append("NOT deleted")
    if changes_since is not None:
        where.append("updated_at >= %s")
        params.append(changes_since)
    if tags:
        where.append("tags @> %s::jsonb")
        params.append(_json_list(tags))
    if tags_any:
        where.append("tags ?| %s")
        params.append(list(tags_any))
    if not_tags:
        where.append("NOT (tags @> %s::jsonb)")
        params.append(_json_list(not_tags))
    if not_tags_any:
        where.append("NOT (tags ?| %s)")
        params.append(list(not_tags_any))
    if ip is not None:
        where.append("EXISTS (SELECT 1 FROM jsonb_array_elements(ports) p WHERE p->>'address' ~ %s)")
        params.append(ip)
    for condition, value in (
        ("reservation_id = %s", reservation_id),
        ("flavor->>'id' = %s", flavor),
        ("image_ref = %s", image),
        ("(locked_by IS NOT NULL) = %s", locked),
        ("updated_at <= %s", changes_before),
        ("host = %s", host),
    ):
        if value is not None:
            where.append(condition)
            params.append(value)
    for column, value in (equal or {}).items():
        where.append(f"{LIST_EQUAL[column]}::text = %s")
        params.append(str(value))
    for column, pattern in (matching or {}).items():
        where.append(f"coalesce({LIST_MATCHING[column]}::text, '') ~ %s")
        params.append(pattern)
    if name is not None:
        where.append("name ~ %s")
        params.append(name)
    if status is not None:
        where.append("status = %s")
        params.append(status.upper())
    first = tuple((SORT_KEYS[k], desc) for k, desc in (sort or ()) if k in SORT_KEYS)
    marked: list[Any] = []  # the marker's parameters: first in the query, and after the filters'
    if marker is not None:
        uid = _as_uuid(marker)
        if uid is None:
            raise MarkerNotFound(marker)
        marked = [uid] if project_id is None else [uid, project_id]
    query = _server_statement(tuple(where), first, marker is not None, project_id is None)
    try:
        rows: list[ServerRow] = _fetchall(
            conn, query, [*marked, *params, *marked, max(0, limit)], _server_rows
        )
    except InvalidFilter:
        if marker is not None:
            _check_marker(conn, marker, project_id)  # a marker not found is said first, as before
        raise
    if not rows and marker is not None:
        _check_marker(conn, marker, project_id)
    return rows


@functools.lru_cache(maxsize=256)
def _server_statement(
    where: tuple[str, ...], first: tuple[tuple[str, bool], ...], marked: bool, every_project: bool
) -> sql.SQL:
    """``list_servers``' statement for its filters' conditions (``where``), its sort keys (``first``)
    and a marker (``marked``) of any project's server or of the project's, composed once for each
    shape of request: composing its text took ~6 us a page, ~20 us with a marker.

    Composed as text (psycopg's composition took ~40 us a page): every piece is this module's own
    SQL, the values are parameters. The outer ORDER BY names page's columns: some of the view's
    have the same names (the id as text)."""
    keys = _unique_columns([*first, ("created_at", True), ("id", True)])
    source = f"{_SCHEMA}.instances i"
    conditions = list(where)
    if marked:
        # The marker's sort values (``mark``), read by the page's own query: no round trip of their
        # own. A marker the caller cannot see gives no rows; ``_check_marker`` then says so.
        values = ", ".join(f"{_sortable(c)} AS k{n}" for n, (c, _) in enumerate(keys))
        seen = "id = %s" if every_project else "id = %s AND project_id = %s"
        source += f", (SELECT {values} FROM {_SCHEMA}.instances WHERE {seen}) mark"
        lead = f"(SELECT {_sortable(keys[0][0])} FROM {_SCHEMA}.instances WHERE {seen})"
        conditions.append(_after(keys, lead))
    page = f"SELECT i.* FROM {source} {'WHERE ' + ' AND '.join(conditions) if conditions else ''}"
    return sql.SQL(
        f"SELECT {_PAGE_COLUMNS} FROM ({page} ORDER BY {_order(keys)} LIMIT %s) page {_PAGE_HOST} "
        f"ORDER BY {_order(keys, 'page.')}"
    )


def _order(keys: list[tuple[str, bool]], table: str = "") -> str:
    return ", ".join(f"{_sortable(c, table)} {'DESC' if d else 'ASC'}" for c, d in keys)


class ServerRow(NamedTuple):
    """A server as the API shows it (``api.server_views.ServerView``), read by ``list_servers`` and
    ``server_view_row``: ``instances``' columns in this order, but the jsonb columns as their text
    (a view decodes, with ``decode_json``, those its microversion shows), the id as text, and the
    times already in Nova's formats: ``created`` and ``updated`` as ``isotime``
    ("2026-11-26T16:52:21Z"), ``launched_at`` and ``terminated_at`` (``deleted_at``) as OS-SRV-USG's
    naive ISO 8601 with microseconds when there are any; ``host_zone``: the zone of its host."""

    id: str
    name: str
    project_id: str
    user_id: str
    flavor: str
    image_ref: str
    metadata: str
    availability_zone: str | None
    description: str | None
    key_name: str | None
    ports: str
    tags: str
    reservation_id: str | None
    image: str | None
    user_data: str | None
    launch_index: int
    locked_by: str | None
    locked_reason: str | None
    access_ip_v4: str | None
    access_ip_v6: str | None
    hostname: str | None
    disk_config: str
    config_drive: bool
    vm_state: str
    task_state: str | None
    power_state: int
    status: str
    host: str | None
    fault: str | None
    created: str
    updated: str
    launched_at: str | None
    terminated_at: str | None
    deleted: bool
    host_zone: str | None


# Nova's timestamps, formatted where they are read: strftime("%Y-%m-%dT%H:%M:%SZ") in UTC (its year
# unpadded, as glibc's %Y: FM), and OS-SRV-USG's isoformat() of the naive UTC time (year padded to
# four digits, ".ffffff" only when there are microseconds). In Python these were ~4 us a row.
_ISOTIME = """to_char({0} AT TIME ZONE 'UTC', 'FMYYYY-MM-DD"T"HH24:MI:SS"Z"')"""
_USAGE_TIME = (
    """to_char({0} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')"""
    """ || CASE WHEN date_trunc('second', {0}) = {0} THEN ''"""
    """ ELSE to_char({0} AT TIME ZONE 'UTC', '.US') END"""
)
_VIEW_COLUMNS: dict[str, str] = {
    "id": "{t}.id::text",
    "flavor": "{t}.flavor::text",
    "metadata": "{t}.metadata::text",
    "ports": "{t}.ports::text",
    "tags": "{t}.tags::text",
    "image": "{t}.image::text",
    "user_data": "{t}.user_data::text",
    "fault": "{t}.fault::text",
    "created": _ISOTIME.format("{t}.created_at"),
    "updated": _ISOTIME.format("{t}.updated_at"),
    "launched_at": _USAGE_TIME.format("{t}.launched_at"),
    "terminated_at": _USAGE_TIME.format("{t}.deleted_at"),
    "host_zone": "hz.availability_zone",
}


def _view_columns(alias: str) -> str:
    """``ServerRow``'s columns, in its order, of the instances row named ``alias`` and its host
    ``hz`` (``_with_host``): one piece of SQL (composed once: composing it took ~0.1 ms a query)."""
    return (
        sql.SQL(", ")
        .join(
            sql.SQL(_VIEW_COLUMNS.get(name, "{t}." + name)).format(t=sql.Identifier(alias))
            for name in ServerRow._fields
        )
        .as_string()
    )


def _with_host(alias: str) -> str:
    """The host (``hz``) the server ``alias`` runs on, for its zone: a join (a hash of the hosts for
    a page) where a subquery a row had cost a page ~0.4 ms in PostgreSQL. Hostnames are unique."""
    join = sql.SQL("LEFT JOIN {}.hosts hz ON hz.hostname = {}.host").format(_S, sql.Identifier(alias))
    return join.as_string()


def _server_rows(cursor: psycopg.Cursor[Any]) -> Callable[[Sequence[Any]], ServerRow]:
    return ServerRow._make


def decode_json(value: Any) -> Any:
    """A jsonb column's text as a listed row carries it (``ServerRow``, ``view_rows``), decoded as
    the pool reads json (``read_json_with_orjson``); anything else as it is: None for SQL's NULL, or
    a value decoded already (a single item's row, an aggregate's field, shown by the same view)."""
    if not isinstance(value, str):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:  # a number beyond 64 bits
        return json.loads(value)


# Nova's server sort keys and the read model's columns for them.
SORT_KEYS = {
    "access_ip_v4": "access_ip_v4", "access_ip_v6": "access_ip_v6", "auto_disk_config": "disk_config",
    "availability_zone": "availability_zone", "created_at": "created_at",
    "display_description": "description",
    "display_name": "name", "host": "host", "hostname": "hostname", "image_ref": "image_ref",
    "instance_type_id": "flavor_id", "kernel_id": "kernel_id", "key_name": "key_name",
    "launch_index": "launch_index", "launched_at": "launched_at", "locked": "locked",
    "locked_by": "locked_by",
    "node": "host", "power_state": "power_state", "progress": "created_at", "project_id": "project_id",
    "ramdisk_id": "ramdisk_id", "task_state": "task_state", "terminated_at": "deleted_at",
    "updated_at": "updated_at", "user_id": "user_id", "uuid": "id", "vm_state": "vm_state",
    "config_drive": "created_at", "root_device_name": "created_at",
}  # fmt: skip
# How each column sorts: NULLs as the smallest value of their type (Nova sorts NULLs first ascending).
# ``{t}``: the table's name and a dot, or nothing.
_SORTABLE = {
    "created_at": "{t}created_at", "updated_at": "{t}updated_at", "id": "{t}id",
    "launched_at": "coalesce({t}launched_at, '-infinity'::timestamptz)",
    "deleted_at": "coalesce({t}deleted_at, '-infinity'::timestamptz)",
    "power_state": "{t}power_state", "launch_index": "{t}launch_index",
    "locked": "({t}locked_by IS NOT NULL)", "flavor_id": "coalesce({t}flavor->>'id', '')",
    "kernel_id": "coalesce({t}image->>'kernel_id', '')",
    "ramdisk_id": "coalesce({t}image->>'ramdisk_id', '')",
}  # fmt: skip


def _sortable(column: str, table: str = "") -> str:
    return _SORTABLE.get(column, "coalesce({t}" + column + "::text, '')").format(t=table)


def _unique_columns(keys: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    seen: set[str] = set()
    unique = []
    for column, desc in keys:
        if column not in seen:
            seen.add(column)
            unique.append((column, desc))
    return unique


def _after(keys: list[tuple[str, bool]], lead: str) -> str:
    """Rows after the marker (its values ``mark.k0``, ``mark.k1``...) in the order ``keys``: any
    key decides once the ones before it tie."""
    ors = []
    for i, (column, desc) in enumerate(keys):
        ties = [f"{_sortable(c)} = mark.k{j}" for j, (c, _) in enumerate(keys[:i])]
        step = f"{_sortable(column)} {'<' if desc else '>'} mark.k{i}"
        ors.append("(" + " AND ".join([*ties, step]) + ")")
    # The first key's bound, implied by every arm and given as a value the planner computes once
    # (``lead``, a scalar subquery), lets the page's index start at the marker instead of reading
    # and dropping every row before it: a page deep in a long list cost as much as the rows before
    # it (docs/performance.md, "GET /servers/detail").
    column, desc = keys[0]
    return f"({_sortable(column)} {'<=' if desc else '>='} {lead} AND ({' OR '.join(ors)}))"


def _host_zone(alias: str) -> sql.Composed:
    """The zone of the host a server runs on (its aggregates' zone, None for the default zone): what
    a server placed without asking for a zone shows as its availability zone, as in Nova."""
    zone = sql.SQL("(SELECT h.availability_zone FROM {}.hosts h WHERE h.hostname = {}.host) AS host_zone")
    return zone.format(_S, sql.Identifier(alias))


_PAGE_COLUMNS, _PAGE_HOST = _view_columns("page"), _with_host("page")  # a page's rows (``list_servers``)
_ONE_COLUMNS, _ONE_HOST = _view_columns("i"), _with_host("i")  # one server's (``server_view_row``)


def _json_list(values: list[str]) -> str:
    return dumps(list(values)).decode()


def _check_marker(conn: psycopg.Connection[Any], marker: str, project_id: str | None) -> None:
    """``MarkerNotFound`` unless the marker is a server the caller may see."""
    query = sql.SQL("SELECT 1 FROM {}.instances WHERE id = %s").format(_S)
    params: list[Any] = [_as_uuid(marker)]
    if project_id is not None:
        query = query + sql.SQL(" AND project_id = %s")
        params.append(project_id)
    if _fetchone(conn, query, params) is None:
        raise MarkerNotFound(marker)


def get_server(conn: psycopg.Connection[Any], server_id: str, project_id: str | None) -> Row | None:
    """One server (deleted ones included: the API decides what a deleted server shows)."""
    columns = sql.SQL("i.*, {}").format(_host_zone("i"))
    rows = _one_server(conn, columns, server_id, project_id, dict_row, sql.SQL(""))
    return rows[0] if rows else None


def server_view_row(
    conn: psycopg.Connection[Any], server_id: str, project_id: str | None
) -> ServerRow | None:
    """One server as the API shows it (``ServerRow``), deleted ones included, as ``get_server``."""
    rows = _one_server(conn, sql.SQL(_ONE_COLUMNS), server_id, project_id, _server_rows, sql.SQL(_ONE_HOST))
    return rows[0] if rows else None


def _one_server(
    conn: psycopg.Connection[Any],
    columns: sql.Composable,
    server_id: str,
    project_id: str | None,
    row_factory: RowFactory[Any],
    joined: sql.Composable,
) -> list[Any]:
    """The server ``server_id`` (``i``) of ``project_id`` (None: any), with ``joined`` tables."""
    uid = _as_uuid(server_id)
    if uid is None:
        return []
    query = sql.SQL("SELECT {} FROM {}.instances i {} WHERE i.id = %s").format(columns, _S, joined)
    params: list[Any] = [uid]
    if project_id is not None:
        query = query + sql.SQL(" AND i.project_id = %s")
        params.append(project_id)
    return _fetchall(conn, query, params, row_factory)


# -- flavors --------------------------------------------------------------------------------------
# Nova's flavor sort keys and the read model's columns for them.
FLAVOR_SORT_KEYS: dict[str, str] = {
    "flavorid": "flavorid", "id": "flavorid", "name": "name", "memory_mb": "ram", "root_gb": "disk",
    "ephemeral_gb": "ephemeral", "swap": "swap", "vcpus": "vcpus", "rxtx_factor": "rxtx_factor",
    "is_public": "is_public", "description": "description", "created_at": "created_at",
    "updated_at": "created_at", "disabled": "flavorid", "vcpu_weight": "flavorid",
}  # fmt: skip


def list_flavors(
    conn: psycopg.Connection[Any],
    *,
    limit: int | None = None,
    marker: str | None = None,
    include_private: bool = True,
    project_id: str | None = None,
    min_ram: int | None = None,
    min_disk: int | None = None,
    name: str | None = None,
    sort_key: str = "flavorid",
    descending: bool = False,
) -> list[Listed]:
    """Flavors that are not deleted, ordered by ``sort_key`` (one of ``FLAVOR_SORT_KEYS``; then by
    flavorid), at least ``min_ram`` MiB and ``min_disk`` GiB; marker = flavorid. Rows as a list's
    (``view_rows``).

    Without ``include_private``: the public flavors, and the private ones ``project_id`` has access to.
    """
    private = [] if include_private else [project_id or ""]
    filters = (min_ram, min_disk, name)
    page, find = _flavor_statements(
        include_private,
        *(v is not None for v in filters),
        sort_key,
        descending,
        marker is not None,
        limit is not None,
    )
    params: list[Any] = [*private, *(v for v in filters if v is not None)]
    if marker is not None:
        # The marker must be a flavor the caller may see: a private flavor of another project is
        # "not found" like one that does not exist, so that the marker does not reveal it.
        found = _fetchone(conn, find, (marker, *private))
        if found is None:
            raise MarkerNotFound(marker)
        params.extend([found["k"], marker])
    if limit is not None:
        params.append(max(0, limit))
    return _fetchall(conn, page, params, view_rows)


@functools.lru_cache(maxsize=256)
def _flavor_statements(
    include_private: bool,
    min_ram: bool,
    min_disk: bool,
    name: bool,
    sort_key: str,
    descending: bool,
    marked: bool,
    limited: bool,
) -> tuple[sql.SQL, sql.SQL]:
    """``list_flavors``' page statement and its marker's, for the filters given (True: given),
    composed once for each shape of request (``composed_once``)."""
    where: list[sql.Composable] = [sql.SQL("NOT deleted")]
    visible = sql.SQL("(is_public OR projects ? %s)") if not include_private else sql.SQL("true")
    if not include_private:
        where.append(visible)
    for column, given in (("ram", min_ram), ("disk", min_disk)):
        if given:
            where.append(sql.SQL("{} >= %s").format(sql.Identifier(column)))
    if name:
        where.append(sql.SQL("name = %s"))
    key = sql.Identifier(FLAVOR_SORT_KEYS[sort_key])
    order = sql.SQL("DESC" if descending else "ASC")
    if marked:
        after = sql.SQL("<" if descending else ">")
        where.append(sql.SQL("({}, flavorid) {} (%s, %s)").format(key, after))
    query = sql.SQL("SELECT * FROM {}.flavors WHERE {} ORDER BY {} {}, flavorid {}").format(
        _S, sql.SQL(" AND ").join(where), key, order, order
    )
    if limited:
        query = query + sql.SQL(" LIMIT %s")
    find = sql.SQL("SELECT {} AS k FROM {}.flavors WHERE flavorid = %s AND {}").format(key, _S, visible)
    return composed_once(query), composed_once(find)


def get_flavor(conn: psycopg.Connection[Any], flavorid: str) -> Row | None:
    """One flavor by its Nova flavor id, deleted or not (servers keep showing their flavor)."""
    return _fetchone(conn, sql.SQL("SELECT * FROM {}.flavors WHERE flavorid = %s").format(_S), (flavorid,))


# -- hosts ----------------------------------------------------------------------------------------
_HOSTS = composed_once(sql.SQL("SELECT * FROM {}.hosts ORDER BY hostname").format(_S))


# A page of them: after a hostname, at most a number (os-hypervisors paged, 2.33).
_HOSTS_PAGE = composed_once(sql.SQL("SELECT * FROM {}.hosts ORDER BY hostname LIMIT %s").format(_S))
_HOSTS_AFTER = composed_once(
    sql.SQL("SELECT * FROM {}.hosts WHERE hostname > %s ORDER BY hostname LIMIT %s").format(_S)
)
# A page's marker: the host whose id, as os-hypervisors shows it, is the marker's text; its UUID's
# text from 2.53, before it the integer ``api.services.integer_id`` reads from its first eight hex
# digits (``int(text[:8], 16) >> 1 or 1``). The first by hostname when two share one.
_MARKED = "SELECT hostname FROM {}.hosts WHERE {} = %s ORDER BY hostname LIMIT 1"
_NUMBER = "greatest(('x' || left(id::text, 8))::bit(32)::bigint >> 1, 1)"
_MARKED_BY_UUID = composed_once(sql.SQL(_MARKED).format(_S, sql.SQL("id::text")))
_MARKED_BY_NUMBER = composed_once(sql.SQL(_MARKED).format(_S, sql.SQL(_NUMBER + "::text")))
# One host by its integer id (a show, its uptime, before 2.53).
_HOST_BY_NUMBER = composed_once(
    sql.SQL("SELECT * FROM {}.hosts WHERE {} = %s ORDER BY hostname LIMIT 1").format(_S, sql.SQL(_NUMBER))
)


_HOSTS_MATCHING = composed_once(
    sql.SQL("SELECT * FROM {}.hosts WHERE strpos(hostname, %s) > 0 ORDER BY hostname").format(_S)
)


def hosts_matching(conn: psycopg.Connection[Any], pattern: str) -> list[Listed]:
    """The hypervisors whose hostname contains ``pattern`` (Nova's ``LIKE %pattern%``, its
    characters as they are), as ``list_hosts`` lists them."""
    return _fetchall(conn, _HOSTS_MATCHING, (pattern,), view_rows)


def list_hosts(conn: psycopg.Connection[Any]) -> list[Listed]:
    """Every registered hypervisor with its capacity, usage and free resources, by hostname; rows
    as a list's (``view_rows``)."""
    return _fetchall(conn, _HOSTS, None, view_rows)


def page_of_hosts(
    conn: psycopg.Connection[Any], limit: int, marker: str | None = None, *, uuid_ids: bool = True
) -> list[Listed]:
    """At most ``limit`` hypervisors by hostname (as ``list_hosts``), after the one whose shown id
    is ``marker`` (its UUID's text, or with ``uuid_ids`` False its integer id's);
    ``MarkerNotFound`` when no host has that id."""
    if marker is None:
        return _fetchall(conn, _HOSTS_PAGE, (max(0, limit),), view_rows)
    found = _fetchall(conn, _MARKED_BY_UUID if uuid_ids else _MARKED_BY_NUMBER, (marker,), tuple_row)
    if not found:
        raise MarkerNotFound(marker)
    return _fetchall(conn, _HOSTS_AFTER, (found[0][0], max(0, limit)), view_rows)


def host_by_number(conn: psycopg.Connection[Any], number: int) -> Row | None:
    """The hypervisor whose integer id (before 2.53: ``api.services.integer_id``, 31 bits) is
    ``number``, the first by hostname when two share it; as ``get_host`` reads it."""
    if not 0 <= number <= 0x7FFFFFFF:
        return None  # no host's (and beyond a bigint, not a parameter PostgreSQL takes)
    return _fetchone(conn, _HOST_BY_NUMBER, (number,))


def get_host(conn: psycopg.Connection[Any], hostname_or_id: str) -> Row | None:
    """One hypervisor, by its id (uuid) or its hostname."""
    uid = _as_uuid(hostname_or_id)
    if uid is not None:
        row = _fetchone(conn, sql.SQL("SELECT * FROM {}.hosts WHERE id = %s").format(_S), (uid,))
        if row is not None:
            return row
    return _fetchone(
        conn, sql.SQL("SELECT * FROM {}.hosts WHERE hostname = %s").format(_S), (hostname_or_id,)
    )
