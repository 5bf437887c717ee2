"""``/v2.1/os-hypervisors``: the compute hosts, their capacity and usage, in Nova's 2.1 shapes (admin).

Hosts are not created through the API: a hypervisor worker registers its host on the event log
when it starts, as nova-compute does. Differences from Nova, documented in docs/api.md: ids are
the hosts' UUIDs (Nova used integers before 2.53). ``state`` is ``down`` when the host is forced
down or its hypervisor worker has not sent a heartbeat for ``STRATUS_HOST_DOWN_AFTER`` seconds
(``stratus.liveness``), else ``up``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import falcon

from api import auth
from api.errors import BadRequest, ItemNotFound
from api.readmodel import ReadModel
from api.versions import at_least
from projections import queries

_POLICY = "os_compute_api:os-hypervisors:list"


def brief_view(host: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(host["id"]),
        "hypervisor_hostname": host["hostname"],
        "state": "down" if host.get("forced_down") or not host.get("alive", True) else "up",
        "status": "disabled" if host.get("disabled") else "enabled",
    }


def detail_view(host: dict[str, Any], cpu_info_object: bool = False) -> dict[str, Any]:
    """``cpu_info_object``: 2.28 and later give ``cpu_info`` as an object, earlier as a JSON string."""
    # Nova's resource tracker counts what the host reserves for itself as used (memory and disk)
    memory_used = host["memory_mb_used"] + host.get("memory_mb_reserved", 0)
    disk_used = host["disk_gb_used"] + host.get("disk_gb_reserved", 0)
    free_ram = host["memory_mb"] - memory_used
    free_disk = host["disk_gb"] - disk_used
    return {
        **brief_view(host),
        "hypervisor_type": host["hypervisor_type"],
        "hypervisor_version": 0,
        "host_ip": "",
        "cpu_info": {} if cpu_info_object else "{}",  # the test driver and TCG report no CPU model
        "vcpus": host["vcpus"],
        "vcpus_used": host["vcpus_used"],
        "memory_mb": host["memory_mb"],
        "memory_mb_used": memory_used,
        "local_gb": host["disk_gb"],
        "local_gb_used": disk_used,
        "free_ram_mb": free_ram,
        "free_disk_gb": free_disk,
        "disk_available_least": free_disk,
        "current_workload": 0,
        "running_vms": host["running_vms"],
        "service": {
            "host": host["hostname"],
            "id": str(host["id"]),
            "disabled_reason": host.get("disabled_reason"),
        },
    }


# Which of these hosts are alive (``stratus.liveness.Heartbeats.up``); None: liveness not tracked.
Liveness = Callable[[list[str]], dict[str, bool]]
# A host's last heartbeat (``stratus.liveness.Heartbeats.reports``), None when it never beat.
Report = Callable[[str], "dict[str, Any] | None"]


def uptime_line(now: float, booted: float, load: list[float]) -> str:
    """What ``uptime`` prints on the host, the text Nova's libvirt driver returns and the openstack
    CLI parses (``host_time``, ``uptime``, ``users``, ``load_average``); times in UTC, users unknown (0)."""
    days, rest = divmod(max(0, int(now - booted)), 86400)
    hours, minutes = rest // 3600, rest % 3600 // 60
    up = ([f"{days} day{'s' if days != 1 else ''}"] if days else []) + [
        f"{hours:2d}:{minutes:02d}" if hours else f"{minutes} min"
    ]
    averages = ", ".join(f"{x:.2f}" for x in load)
    clock = time.strftime("%H:%M:%S", time.gmtime(now))
    return f" {clock} up {', '.join(up)},  0 users,  load average: {averages}"


class _Hypervisors:
    def __init__(self, read_model: ReadModel, liveness: Liveness | None = None) -> None:
        self._read = read_model
        self._liveness = liveness

    def _alive(self, hosts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self._liveness is None or not hosts:
            return hosts
        up = self._liveness([h["hostname"] for h in hosts])
        return [{**h, "alive": up.get(h["hostname"], False)} for h in hosts]

    def _host(self, req: falcon.Request, hypervisor_id: str, rule: str) -> dict[str, Any]:
        """One host (by id or hostname) with its liveness; 404 when there is none."""
        auth.require_admin(req.context.actor, rule)
        with self._read.connection(req) as conn:
            host = queries.get_host(conn, hypervisor_id)
        if host is None:
            raise ItemNotFound(f"Hypervisor with ID {hypervisor_id} could not be found.")
        return self._alive([host])[0]

    def _hosts(self, req: falcon.Request) -> list[dict[str, Any]]:
        auth.require_admin(req.context.actor, _POLICY)
        with self._read.connection(req) as conn:
            return self._alive(queries.list_hosts(conn))


class HypervisorCollection(_Hypervisors):
    """``GET /v2.1/os-hypervisors``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"hypervisors": [brief_view(h) for h in self._hosts(req)]}


class HypervisorDetailCollection(_Hypervisors):
    """``GET /v2.1/os-hypervisors/detail``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        cpu_object = at_least(req, 28)
        resp.media = {"hypervisors": [detail_view(h, cpu_object) for h in self._hosts(req)]}


class HypervisorItem(_Hypervisors):
    """``GET /v2.1/os-hypervisors/{hypervisor_id}`` (by id or hostname)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, hypervisor_id: str) -> None:
        host = self._host(req, hypervisor_id, "os_compute_api:os-hypervisors:show")
        resp.media = {"hypervisor": detail_view(host, at_least(req, 28))}


class HypervisorUptime(_Hypervisors):
    """``GET /v2.1/os-hypervisors/{hypervisor_id}/uptime``: the host's ``uptime`` line, from its last
    heartbeat; a host that is down answers 400 as Nova does when its compute service is unavailable."""

    def __init__(self, read_model: ReadModel, liveness: Liveness, report: Report) -> None:
        super().__init__(read_model, liveness)
        self._report = report

    def on_get(self, req: falcon.Request, resp: falcon.Response, hypervisor_id: str) -> None:
        host = self._host(req, hypervisor_id, "os_compute_api:os-hypervisors:uptime")
        beat = self._report(host["hostname"]) if brief_view(host)["state"] == "up" else None
        if beat is None or "booted" not in beat:
            raise BadRequest(f"Compute service of {host['hostname']} is unavailable at this time.")
        line = uptime_line(time.time(), float(beat["booted"]), list(beat["load"]))
        resp.media = {"hypervisor": {**brief_view(host), "uptime": line}}
