"""What the API reads of images, their members and Glance's tasks (tables of ``projections.images``).

Same conventions as ``projections.queries``: an open connection in, plain dicts out, tables named
``stratus_rm.<table>``.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any, NamedTuple

import psycopg
from psycopg import sql
from psycopg.rows import RowFactory, dict_row, tuple_row

from projections.queries import (
    _ISOTIME,
    Listed,
    MarkerNotFound,
    Row,
    _as_uuid,
    _fetchall,
    _fetchone,
    composed_once,
    view_rows,
)
from projections.schema import LIVE_SCHEMA

_S = sql.Identifier(LIVE_SCHEMA)
# A listed image as the views show it: its id as text, its times formatted by PostgreSQL as Glance
# and Nova show them (``api.timestamps.isotime``); in Python these were most of a page's view.
_LISTED_IMAGE = (
    "id::text AS id, name, owner, visibility, status, container_format, disk_format, min_disk, min_ram,"
    " protected, tags, properties, os_hidden, size, checksum, os_hash_algo, os_hash_value, "
    + _ISOTIME.format("created_at")
    + " AS created_at, "
    + _ISOTIME.format("updated_at")
    + " AS updated_at"
)


class ListedImage(NamedTuple):
    """A listed image's columns (``_LISTED_IMAGE``), in its statement's order: a row of
    ``list_images(plain=True)`` is a plain tuple of them, which a view unpacks by position."""

    id: str
    name: str | None
    owner: str | None
    visibility: str
    status: str
    container_format: str | None
    disk_format: str | None
    min_disk: int
    min_ram: int
    protected: bool
    tags: Any
    properties: Any
    os_hidden: bool
    size: int | None
    checksum: str | None
    os_hash_algo: str | None
    os_hash_value: str | None
    created_at: str
    updated_at: str


# Conditions on a column (its name as composition quoted it), and a project's membership of a shared
# image; ``{s}``: the schema, in ``_newest_first_statements``.
_COMPARED = {
    "min_ram": '"min_ram" >= %s', "min_disk": '"min_disk" >= %s', "name": '"name" = %s',
    "status": '"status" = %s', "owner": '"owner" = %s', "type": '"type" = %s',
}  # fmt: skip
_MEMBER = (
    "(visibility = 'shared' AND EXISTS (SELECT 1 FROM {s}.image_members m WHERE m.image_id = images.id"
    " AND m.member_id = %s AND (%s = 'all' OR m.status = %s)))"
)


def list_images(
    conn: psycopg.Connection[Any],
    *,
    project_id: str | None,
    limit: int,
    marker: str | None = None,
    name: str | None = None,
    status: str | None = None,
    visibility: str | None = None,
    owner: str | None = None,
    member_status: str = "accepted",
    os_hidden: bool = False,
    tags: tuple[str, ...] = (),
    changed_since: datetime | None = None,
    min_ram: int | None = None,
    min_disk: int | None = None,
    plain: bool = False,
) -> list[Listed]:
    """A page of images that are not deleted, newest first (Glance's default sort), as the views
    show them (``_LISTED_IMAGE``), rows as a list's (``view_rows``); with ``plain``, each row a plain
    tuple of the same values (``ListedImage``'s order: no named tuple made a row, no attribute read).

    ``project_id`` is the caller's project (None: an admin, who sees every image). Without a
    ``visibility`` filter a project sees public images, its own, and shared images it is a member of
    with ``member_status`` (``accepted`` unless asked; ``all`` for any); community images only when
    it asks for ``visibility=community`` (Glance's rules). Hidden images (``os_hidden``) are listed
    only when asked for, and then only they.
    """
    where = ["NOT deleted", "os_hidden = %s"]
    params: list[Any] = [os_hidden]
    if visibility is not None:
        where.append("visibility = %s")
        params.append(visibility)
    if project_id is not None:
        if visibility in ("public", "community"):
            pass
        elif visibility is None:
            where.append(f"(visibility = 'public' OR owner = %s OR {_MEMBER})")
            params.extend((project_id, project_id, member_status, member_status))
        elif visibility == "shared":
            where.append(f"(owner = %s OR {_MEMBER})")
            params.extend((project_id, project_id, member_status, member_status))
        else:
            where.append("owner = %s")
            params.append(project_id)
    for tag in tags:
        where.append("tags ? %s")
        params.append(tag)
    if changed_since is not None:  # Nova's image proxy: updated at or after
        where.append("updated_at >= %s")
        params.append(changed_since)
    for column, value in (
        ("min_ram", min_ram), ("min_disk", min_disk), ("name", name), ("status", status), ("owner", owner)
    ):  # fmt: skip
        if value is not None:
            where.append(_COMPARED[column])
            params.append(value)
    rows = tuple_row if plain else view_rows
    return _newest_first(conn, "images", where, params, limit, marker, _LISTED_IMAGE, rows)


def get_image(conn: psycopg.Connection[Any], image_id: str) -> Row | None:
    """One image, deleted or not (the API decides who may see it)."""
    uid = _as_uuid(image_id)
    if uid is None:
        return None
    return _fetchone(conn, sql.SQL("SELECT * FROM {}.images WHERE id = %s").format(_S), (uid,))


def list_tasks(
    conn: psycopg.Connection[Any],
    *,
    limit: int,
    marker: str | None = None,
    since: Any = None,
    status: str | None = None,
    task_type: str | None = None,
) -> list[Row]:
    """A page of Glance tasks, newest first; those that expired before ``since`` are left out."""
    where = ["(status = 'pending' OR updated_at >= %s)"]
    params: list[Any] = [since]
    for column, value in (("status", status), ("type", task_type)):
        if value is not None:
            where.append(_COMPARED[column])
            params.append(value)
    return _newest_first(conn, "image_tasks", where, params, limit, marker)


def _newest_first(
    conn: psycopg.Connection[Any],
    table: str,
    where: list[str],
    params: list[Any],
    limit: int,
    marker: str | None,
    columns: str = "*",
    row_factory: RowFactory[Any] = dict_row,
) -> list[Any]:
    """A page of ``table``'s rows (``columns`` of them) matching ``where`` (this module's SQL, the
    values in ``params``), newest first, after ``marker``'s row (by id)."""
    page, find = _newest_first_statements(table, " AND ".join(where), columns, marker is not None)
    if marker is not None:
        uid = _as_uuid(marker)
        mark = None if uid is None else _fetchone(conn, find, (uid,))
        if mark is None:
            raise MarkerNotFound(marker)
        params = [*params, mark["created_at"], mark["id"]]
    if row_factory is tuple_row:
        return _fetchall(conn, page, [*params, max(0, limit)], tuple_row, as_text=True)
    return _fetchall(conn, page, [*params, max(0, limit)], row_factory)


@functools.lru_cache(maxsize=256)
def _newest_first_statements(table: str, where: str, columns: str, marked: bool) -> tuple[sql.SQL, sql.SQL]:
    """``_newest_first``'s page statement and its marker's, composed once for each shape of request
    (``composed_once``: composing them took an images page 23-37 us)."""
    name = sql.Identifier(table)
    conditions = sql.SQL(where).format(s=_S)
    if marked:
        conditions = sql.SQL(" AND ").join([conditions, sql.SQL("(created_at, id) < (%s, %s)")])
    # the table's columns by name: ``columns`` may show them under the same names, formatted
    query = sql.SQL("SELECT {} FROM {}.{} WHERE {} ORDER BY {}.created_at DESC, {}.id DESC LIMIT %s").format(
        sql.SQL(columns), _S, name, conditions, name, name
    )
    find = sql.SQL("SELECT id, created_at FROM {}.{} WHERE id = %s").format(_S, name)
    return composed_once(query), composed_once(find)
