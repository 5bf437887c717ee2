"""``/v2.1/os-simple-tenant-usage``: what each project's servers used over a period (hours of
vCPUs, RAM and disk), computed from the read model's creation and deletion times, in Nova's 2.1
shapes. A server counts from its creation (Nova: ``launched_at`` or creation) until its deletion or
the end of the period.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import falcon

from api import auth
from api.errors import BadRequest, ItemNotFound
from api.readmodel import ReadModel
from api.services import _now
from projections import admin_queries
from stratus.context import Actor

_TRUE = ("1", "true", "t", "yes", "y", "on")


def _parse(value: str | None, name: str, now: datetime) -> datetime:
    if not value:
        return now
    try:
        parsed = datetime.fromisoformat(value.strip().replace(" ", "T").removesuffix("Z"))
    except ValueError:
        raise BadRequest(f"Invalid {name} time: {value[:64]!r}.") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _naive(value: datetime | None) -> str | None:
    return value.astimezone(UTC).replace(tzinfo=None).isoformat() if value else None


def server_usage(row: dict[str, Any], start: datetime, end: datetime, now: datetime) -> dict[str, Any]:
    flavor = row["flavor"] or {}
    began = max(row["created_at"], start)
    ended_at = row["deleted_at"]
    stop = min(ended_at or end, end)
    hours = max((stop - began).total_seconds(), 0) / 3600
    vcpus, ram = int(flavor.get("vcpus", 0)), int(flavor.get("ram", 0))
    disk = int(flavor.get("disk", 0)) + int(flavor.get("ephemeral", 0))
    return {
        "instance_id": str(row["id"]),
        "name": row["name"],
        "hours": hours,
        "memory_mb": ram,
        "local_gb": disk,
        "vcpus": vcpus,
        "tenant_id": row["project_id"],
        "flavor": flavor.get("name", ""),
        "started_at": _naive(row["created_at"]),
        "ended_at": _naive(ended_at),
        "state": "terminated" if row["deleted"] else row["vm_state"],
        "uptime": int(((ended_at or now) - row["created_at"]).total_seconds()),
    }


def tenant_usage(
    project_id: str, servers: list[dict[str, Any]], start: datetime, end: datetime, detailed: bool
) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "tenant_id": project_id,
        "total_local_gb_usage": sum(s["local_gb"] * s["hours"] for s in servers),
        "total_vcpus_usage": sum(s["vcpus"] * s["hours"] for s in servers),
        "total_memory_mb_usage": sum(s["memory_mb"] * s["hours"] for s in servers),
        "total_hours": sum(s["hours"] for s in servers),
        "start": _naive(start),
        "stop": _naive(end),
    }
    if detailed:
        usage["server_usages"] = servers
    return usage


class _Usage:
    def __init__(self, read_model: ReadModel, now: Callable[[], datetime] = _now) -> None:
        self._read = read_model
        self._now = now

    def _period(self, req: falcon.Request) -> tuple[datetime, datetime, datetime]:
        now = self._now()
        start = _parse(req.get_param("start"), "start", now)
        end = _parse(req.get_param("end"), "end", now)
        if start > end:
            raise BadRequest("Invalid start time. The start time cannot occur after the end time.")
        return start, min(end, now), now

    def _usages(self, req: falcon.Request, project_id: str | None, detailed: bool) -> list[dict[str, Any]]:
        start, end, now = self._period(req)
        with self._read.connection(req) as conn:
            rows = admin_queries.servers_in_period(conn, start, end, project_id)
        by_project: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            by_project.setdefault(row["project_id"], []).append(server_usage(row, start, end, now))
        return [tenant_usage(p, s, start, end, detailed) for p, s in by_project.items()]


class TenantUsages(_Usage):
    """``GET /v2.1/os-simple-tenant-usage`` (admin; ``detailed=1`` adds each server)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if req.env.get("PATH_INFO", "").endswith("/"):  # a blank tenant id: Nova routes it nowhere
            raise ItemNotFound(f"The resource {req.path}/ could not be found.")
        auth.require_admin(req.context.actor, "os_compute_api:os-simple-tenant-usage:list")
        detailed = (req.get_param("detailed") or "").strip().lower() in _TRUE
        resp.media = {"tenant_usages": self._usages(req, None, detailed)}


class TenantUsage(_Usage):
    """``GET /v2.1/os-simple-tenant-usage/{tenant_id}`` (the project itself, or an admin)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, tenant_id: str) -> None:
        actor: Actor = req.context.actor
        if tenant_id != actor.project_id:
            auth.require_admin(actor, "os_compute_api:os-simple-tenant-usage:show")
        usages = self._usages(req, tenant_id, detailed=True)
        resp.media = {"tenant_usage": usages[0] if usages else {}}
