"""``/v2.1/os-migrations`` (admin): moves of servers between hosts, in Nova's shape per
microversion, from the read model's ``migrations`` table (filled by the projection of migration
events). ``migration_type`` from 2.23, ``uuid`` and paging (``limit``, ``marker``,
``changes-since``) from 2.59, ``changes-before`` from 2.66, ``user_id``/``project_id`` (keys and
filters) from 2.80. Filters at every version: ``status``, ``host``, ``instance_uuid``,
``migration_type``. Unknown query parameters are refused from 2.59, as Nova.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import falcon

from api import auth
from api.errors import BadRequest
from api.links import next_links, page_params, time_param
from api.readmodel import ReadModel
from api.versions import at_least
from commands.flavor import flavor_aggregate_id
from projections import admin_queries
from projections.queries import _as_uuid


def _naive(value: datetime | None) -> str | None:
    return value.astimezone(UTC).replace(tzinfo=None).isoformat() if value else None


_PARAMS = {
    1: {"status", "host", "instance_uuid", "migration_type", "source_compute", "hidden"},
    59: {"limit", "marker", "changes-since"},
    66: {"changes-before"},
    80: {"user_id", "project_id"},
}


def flavor_number(flavorid: str | None) -> int | None:
    """Nova's instance_type_id is its database's integer for the flavor: Stratus's is stable, taken
    from the flavor's aggregate id (31 bits)."""
    return None if flavorid is None else (flavor_aggregate_id(str(flavorid)).int >> 97) or 1


def migration_view(req: falcon.Request, row: dict[str, Any]) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": row["number"],
        "instance_uuid": str(row["instance_uuid"]),
        "status": row["status"],
        "source_compute": row["source_compute"],
        "dest_compute": row["dest_compute"],
        "source_node": row["source_node"],
        "dest_node": row["dest_node"],
        "dest_host": row["dest_host"],
        "old_instance_type_id": flavor_number(row["old_flavor_id"]),
        "new_instance_type_id": flavor_number(row["new_flavor_id"]),
        "created_at": _naive(row["created_at"]),
        "updated_at": _naive(row["updated_at"]),
    }
    # 2.23's links are for in-progress live migrations only, which Stratus does not make.
    if at_least(req, 23):
        view["migration_type"] = row["migration_type"]
    if at_least(req, 59):
        view["uuid"] = str(row["id"])
    if at_least(req, 80):
        view["user_id"] = row["user_id"]
        view["project_id"] = row["project_id"]
    return view


def _check_params(req: falcon.Request) -> None:
    if not at_least(req, 59):
        return
    known = set().union(*(names for minor, names in _PARAMS.items() if at_least(req, minor)))
    unknown = sorted(set(req.params) - known)
    if unknown:
        raise BadRequest(
            f"Invalid input for query parameters {unknown[0][:64]}. Additional properties are not allowed."
        )


class Migrations:
    """``GET /v2.1/os-migrations``: every migration, resize and evacuation (admin only)."""

    def __init__(self, read_model: ReadModel) -> None:
        self._read = read_model

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:os-migrations:index")
        instance = req.get_param("instance_uuid")
        instance_uuid = _as_uuid(instance) if instance else None
        if instance and instance_uuid is None:
            resp.media = {"migrations": []}
            return
        _check_params(req)
        paged = at_least(req, 59)
        limit, marker = page_params(req) if paged else (None, None)
        marker_uuid = _as_uuid(marker) if marker else None
        if marker and marker_uuid is None:
            raise BadRequest(f"Marker {marker[:64]} could not be found.")
        with self._read.connection(req) as conn:
            rows = admin_queries.list_migrations(
                conn,
                instance_uuid=instance_uuid,
                status=req.get_param("status") or None,
                host=req.get_param("host") or None,
                migration_type=req.get_param("migration_type") or None,
                user_id=(req.get_param("user_id") or None) if at_least(req, 80) else None,
                project_id=(req.get_param("project_id") or None) if at_least(req, 80) else None,
                changed_since=time_param(req, "changes-since") if paged else None,
                changed_before=time_param(req, "changes-before") if at_least(req, 66) else None,
                limit=limit,
                marker=marker_uuid,
            )
        body: dict[str, Any] = {"migrations": [migration_view(req, r) for r in rows]}
        links = next_links(req, "os-migrations", [{"id": str(r["id"])} for r in rows], limit) if limit else []
        if links:
            body["migrations_links"] = links
        resp.media = body
