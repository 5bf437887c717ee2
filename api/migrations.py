"""``/v2.1/os-migrations`` (admin): moves of servers between hosts, in Nova's 2.1 shape, from the
read model's ``migrations`` table (filled by the projection of migration events; empty until
Stratus migrates servers). Filters: ``status``, ``host``, ``instance_uuid``, ``migration_type``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import falcon

from api import auth
from api.readmodel import ReadModel
from projections import admin_queries
from projections.queries import _as_uuid


def _naive(value: datetime | None) -> str | None:
    return value.astimezone(UTC).replace(tzinfo=None).isoformat() if value else None


def migration_view(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["number"],
        "uuid": str(row["id"]),
        "instance_uuid": str(row["instance_uuid"]),
        "status": row["status"],
        "migration_type": row["migration_type"],
        "source_compute": row["source_compute"],
        "dest_compute": row["dest_compute"],
        "source_node": row["source_node"],
        "dest_node": row["dest_node"],
        "dest_host": row["dest_host"],
        "old_instance_type_id": row["old_flavor_id"],
        "new_instance_type_id": row["new_flavor_id"],
        "created_at": _naive(row["created_at"]),
        "updated_at": _naive(row["updated_at"]),
    }


class Migrations:
    def __init__(self, read_model: ReadModel) -> None:
        self._read = read_model

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:os-migrations:index")
        instance = req.get_param("instance_uuid")
        instance_uuid = _as_uuid(instance) if instance else None
        if instance and instance_uuid is None:
            resp.media = {"migrations": []}
            return
        with self._read.connection(req) as conn:
            rows = admin_queries.list_migrations(
                conn,
                instance_uuid=instance_uuid,
                status=req.get_param("status") or None,
                host=req.get_param("host") or None,
                migration_type=req.get_param("migration_type") or None,
            )
        resp.media = {"migrations": [migration_view(r) for r in rows]}
