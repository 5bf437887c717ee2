"""What ``queries.list_servers`` and ``server_view_row`` read for the API's server views
(``ServerRow``) is the read model's row as ``get_server`` reads it, in the forms Nova shows: the
times formatted by PostgreSQL as Nova's ``strftime`` and OS-SRV-USG's ``isoformat`` would format
them (an early year, a time zone, microseconds or none), the jsonb columns as text that decodes to
the same values, the id as the uuid's text; and pages keep their order and markers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from uuid import UUID, uuid4

import orjson
import psycopg
import pytest

from projections import queries
from projections.queries import ServerRow, decode_json
from projections.schema import LIVE_SCHEMA

TIMES = [
    datetime(2026, 11, 26, 16, 52, 21, 991679, tzinfo=UTC),
    datetime(2026, 11, 26, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=-5))),
    datetime(2026, 1, 1, 3, 0, 0, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(2026, 3, 29, 1, 30, tzinfo=UTC),
    datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC),
    datetime(5, 6, 7, 8, 9, 10, 500, tzinfo=UTC),
    datetime(1000, 1, 1, tzinfo=UTC),
]
_JSONB = ("flavor", "metadata", "ports", "tags", "image", "user_data", "fault")


def _insert(conn: psycopg.Connection[Any], **columns: Any) -> UUID:
    row: dict[str, Any] = {
        "id": uuid4(),
        "name": "vm",
        "project_id": "p",
        "user_id": "u",
        "flavor": '{"id": "1", "ram": 64}',
        "vm_state": "active",
        "status": "ACTIVE",
        "created_at": TIMES[0],
        "updated_at": TIMES[0],
        "version": 1,
        "position": 1,
        **columns,
    }
    names = ", ".join(row)
    values = ", ".join("%s::jsonb" if k in _JSONB else "%s" for k in row)
    conn.execute(f"INSERT INTO {LIVE_SCHEMA}.instances ({names}) VALUES ({values})", list(row.values()))
    return row["id"]  # type: ignore[no-any-return]


def _nova_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _usage_time(value: datetime) -> str:
    return value.astimezone(UTC).replace(tzinfo=None).isoformat()


@pytest.mark.parametrize("when", TIMES)
def test_times_are_formatted_as_nova_formats_them(rm: psycopg.Connection[Any], when: datetime) -> None:
    sid = _insert(rm, created_at=when, updated_at=when, launched_at=when, deleted_at=when)
    row = queries.server_view_row(rm, str(sid), None)
    assert row is not None
    assert (row.created, row.updated) == (_nova_time(when), _nova_time(when))
    assert (row.launched_at, row.terminated_at) == (_usage_time(when), _usage_time(when))


def test_a_view_row_is_the_read_models_row(rm: psycopg.Connection[Any]) -> None:
    rm.execute(
        f"INSERT INTO {LIVE_SCHEMA}.hosts (id, hostname, hypervisor_type, vcpus, memory_mb, disk_gb, "
        "cpu_allocation_ratio, ram_allocation_ratio, disk_allocation_ratio, availability_zone, "
        "created_at, updated_at, version, position) "
        "VALUES (%s, 'h1', 'qemu', 1, 1, 1, 1, 1, 1, 'zone-b', now(), now(), 1, 1)",
        (uuid4(),),
    )
    sid = _insert(
        rm,
        host="h1",
        metadata='{"é": "ü", "big": 18446744073709551616}',
        ports='[{"address": "10.0.0.5", "mac": "fa:16:3e:00:00:01", "network_name": "private"}]',
        tags='["a", "b"]',
        image='{"kernel_id": "k"}',
        fault='{"code": 500, "message": "boom"}',
        launched_at=TIMES[2],
        locked_by="owner",
    )
    full = queries.get_server(rm, str(sid), "p")
    row = queries.server_view_row(rm, str(sid), "p")
    assert full is not None and row is not None
    assert row.id == str(full["id"])
    assert row.host_zone == full["host_zone"] == "zone-b"
    for name in _JSONB:
        assert decode_json(getattr(row, name)) == full[name], name
    times = {"created": "created_at", "updated": "updated_at", "launched_at": "launched_at"}
    assert row.terminated_at is None and full["deleted_at"] is None
    assert {f: getattr(row, f) for f in times} == {
        "created": _nova_time(full["created_at"]),
        "updated": _nova_time(full["updated_at"]),
        "launched_at": _usage_time(full["launched_at"]),
    }
    plain = set(ServerRow._fields) - set(_JSONB) - set(times) - {"id", "terminated_at"}
    assert {f: getattr(row, f) for f in plain} == {f: full[f] for f in plain}
    assert queries.server_view_row(rm, str(sid), "another project") is None
    assert queries.server_view_row(rm, "not a uuid", None) is None
    # a number beyond 64 bits, which orjson refuses, decodes as the pool's loader decodes it
    assert decode_json(row.metadata)["big"] == 18446744073709551616
    assert orjson.loads(row.tags) == ["a", "b"]


def test_pages_keep_the_order_and_markers(rm: psycopg.Connection[Any]) -> None:
    """Servers created at the same time are ordered by id, newest page first, a marker resuming
    after its server (the view's id is text, its order the uuid's)."""
    ids = sorted((_insert(rm) for _ in range(7)), reverse=True)
    _insert(rm, created_at=TIMES[0] - timedelta(seconds=1), name="older")
    first = queries.list_servers(rm, project_id="p", limit=4, marker=None)
    rest = queries.list_servers(rm, project_id="p", limit=10, marker=first[-1].id)
    assert [r.id for r in first + rest][:7] == [str(i) for i in ids]
    assert [r.name for r in rest][-1] == "older"
    by_id = queries.list_servers(rm, project_id="p", limit=10, marker=None, sort=[("uuid", False)])
    assert [r.id for r in by_id] == sorted(r.id for r in by_id)
    after = queries.list_servers(rm, project_id="p", limit=10, marker=by_id[2].id, sort=[("uuid", False)])
    assert [r.id for r in after] == [r.id for r in by_id[3:]]


def test_a_marker_the_caller_cannot_see_is_not_found(rm: psycopg.Connection[Any]) -> None:
    """The marker is read within the page's query; a page after it that is empty is still a page,
    and a marker of another project, of no server, or not a uuid is ``MarkerNotFound``, before a
    filter that cannot be used is refused, as when the marker was read first."""
    mine, theirs = _insert(rm), _insert(rm, project_id="other")
    assert queries.list_servers(rm, project_id="p", limit=5, marker=str(mine)) == []
    assert [r.id for r in queries.list_servers(rm, project_id=None, limit=5, marker=str(theirs))] == (
        [str(mine)] if str(mine) < str(theirs) else []
    )
    for marker in (str(theirs), str(uuid4()), "not a uuid"):
        with pytest.raises(queries.MarkerNotFound):
            queries.list_servers(rm, project_id="p", limit=5, marker=marker)
        with pytest.raises(queries.MarkerNotFound):
            queries.list_servers(rm, project_id="p", limit=5, marker=marker, name="(")
    with pytest.raises(queries.InvalidFilter):
        queries.list_servers(rm, project_id="p", limit=5, marker=str(mine), name="(")


def test_a_page_after_a_marker_starts_at_the_marker_in_the_index(rm: psycopg.Connection[Any]) -> None:
    """A page deep in a long list reads about a page of rows, not every row before its marker: the
    marker's first sort key bounds the index scan (it cost as much as the rows before it)."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ids = [_insert(rm, created_at=start + timedelta(seconds=n)) for n in range(400)]
    rm.execute(f"ANALYZE {LIVE_SCHEMA}.instances")
    marker = str(ids[99])  # newest first: 300 rows come before it
    seen: list[tuple[Any, Any]] = []
    fetch = queries._fetchall

    def recording(conn: Any, query: Any, params: Any = None, *args: Any) -> Any:
        seen.append((query, params))
        return fetch(conn, query, params, *args)

    queries._fetchall = recording  # type: ignore[assignment]
    try:
        rows = queries.list_servers(rm, project_id="p", limit=20, marker=marker)
    finally:
        queries._fetchall = fetch  # type: ignore[assignment]
    assert [r.id for r in rows] == [str(i) for i in reversed(ids[79:99])]
    ((query, params),) = seen
    with rm.transaction():
        rm.execute("SET LOCAL enable_seqscan = off")
        plan = rm.execute(psycopg.sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) ") + query, params).fetchone()[0]
    scans = []

    def walk(node: dict[str, Any]) -> None:
        if (
            node.get("Relation Name") == "instances"
            and "Index" in node["Node Type"]
            and node.get("Alias") == "i"
        ):
            scans.append(node)
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    (scan,) = scans
    assert "created_at" in scan.get("Index Cond", ""), scan
    assert scan["Actual Rows"] <= 25, scan  # the page and its ties, not the 300 rows before the marker
