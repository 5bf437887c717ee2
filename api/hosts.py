"""``/v2.1/os-hosts``: Nova's deprecated host API (microversions 2.1 to 2.42; 404 from 2.43), which
tempest and older tools still use.

The list names every compute host (service ``compute``, its zone); a host's detail is its total
resources, what its claims use now (``(used_now)`` and ``(used_max)``: Stratus claims a flavor's
whole size, so the two are equal), then what each project's servers there use. ``PUT`` enables or
disables the host's compute service (an event, as ``os-services`` records it); maintenance mode and
the power actions (``startup``, ``shutdown``, ``reboot``) answer 501, as Nova's libvirt driver does.
All admin-only.
"""

from __future__ import annotations

from typing import Any

import falcon
from jsonschema import Draft202012Validator

from api import auth, versions
from api import error_codes as codes
from api.body import read_json
from api.errors import ApiError, BadRequest, ItemNotFound
from api.readmodel import POSITION_HEADER, ReadModel
from api.services import COMPUTE_BINARY
from commands.bus import MessageBus
from commands.hosts.services import SetServiceStatus
from projections import admin_queries, queries
from stratus.context import acting

REMOVED_IN = 43  # the microversion that removed os-hosts
DEFAULT_ZONE = "nova"


class NotImplementedByDriver(ApiError, error=codes.NOT_IMPLEMENTED):
    """What Nova's libvirt driver does not do either (host power actions): 501, as Nova answers."""


def _before_removal(req: falcon.Request, resp: falcon.Response, resource: object, params: Any) -> None:
    auth.require_admin(req.context.actor, "os_compute_api:os-hosts")
    if versions.at_least(req, REMOVED_IN):
        raise ItemNotFound("The resource could not be found.")


def _compute_host(conn: Any, host_name: str) -> dict[str, Any]:
    """The compute host named ``host_name`` (by name only: os-hosts knows no ids); Nova's 404 otherwise."""
    host = queries.get_host(conn, host_name)
    if host is None or host["hostname"] != host_name:
        raise ItemNotFound(f"Compute host {host_name} could not be found.")
    return host


class Hosts:
    """``GET /v2.1/os-hosts``: the compute hosts (until microversion 2.43, as Nova)."""

    def __init__(self, read: ReadModel) -> None:
        self._read = read

    @falcon.before(_before_removal)
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        zone = req.get_param("zone") or None  # blank: every host, as Nova
        with self._read.connection(req) as conn:
            rows = admin_queries.list_compute_services(conn)
        hosts = [
            {"host_name": r["hostname"], "service": "compute", "zone": r["availability_zone"] or DEFAULT_ZONE}
            for r in rows
        ]
        resp.media = {"hosts": [h for h in hosts if zone is None or h["zone"] == zone]}


class Host:
    """``GET``/``PUT /v2.1/os-hosts/{host}``: usage by project; enable or disable the host."""

    def __init__(
        self, read: ReadModel, bus: MessageBus, validator: Draft202012Validator, max_body: int
    ) -> None:
        self._read = read
        self._bus = bus
        self._validator = validator
        self._max_body = max_body

    @falcon.before(_before_removal)
    def on_get(self, req: falcon.Request, resp: falcon.Response, host_name: str) -> None:
        with self._read.connection(req) as conn:
            host = _compute_host(conn, host_name)
            projects = admin_queries.host_usage_by_project(conn, host["id"])
        used = {
            "cpu": sum(p["cpu"] for p in projects),
            "memory_mb": sum(p["memory_mb"] for p in projects),
            "disk_gb": sum(p["disk_gb"] for p in projects),
        }
        total = {"cpu": host["vcpus"], "memory_mb": host["memory_mb"], "disk_gb": host["disk_gb"]}
        rows = [("(total)", total), ("(used_now)", used), ("(used_max)", used)]
        rows += [(p["project"], p) for p in projects]
        resp.media = {
            "host": [
                {
                    "resource": {
                        "host": host_name,
                        "project": project,
                        "cpu": int(r["cpu"]),
                        "memory_mb": int(r["memory_mb"]),
                        "disk_gb": int(r["disk_gb"]),
                    }
                }
                for project, r in rows
            ]
        }

    @falcon.before(_before_removal)
    def on_put(self, req: falcon.Request, resp: falcon.Response, host_name: str) -> None:
        body = read_json(req, self._validator, self._max_body)
        with self._read.connection(req) as conn:
            _compute_host(conn, host_name)
        if "maintenance_mode" in body:
            raise NotImplementedByDriver("Virt driver does not implement host maintenance mode.")
        disabled = body["status"] == "disable"
        with acting(req.context.command):
            command = SetServiceStatus(host_name, COMPUTE_BINARY, disabled=disabled)
            result = self._bus.handle(command)
        resp.set_header(POSITION_HEADER, str(result.position))
        resp.media = {"host": host_name, "status": "disabled" if disabled else "enabled"}


class HostPowerAction:
    """``GET /v2.1/os-hosts/{host}/{startup,shutdown,reboot}``: Nova's libvirt driver answers 501."""

    def __init__(self, read: ReadModel) -> None:
        self._read = read

    @falcon.before(_before_removal)
    def on_get(self, req: falcon.Request, resp: falcon.Response, host_name: str, action: str) -> None:
        if action not in ("startup", "shutdown", "reboot"):
            raise BadRequest(f"Invalid host power action {action[:32]!r}")
        with self._read.connection(req) as conn:
            _compute_host(conn, host_name)
        raise NotImplementedByDriver("Virt driver does not implement host power management.")
