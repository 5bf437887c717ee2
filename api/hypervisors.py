"""``/v2.1/os-hypervisors``: the compute hosts, their capacity and usage, in Nova's shapes per
microversion (admin).

Hosts are not created through the API: a hypervisor worker registers its host on the event log
when it starts, as nova-compute does. ``state`` is ``down`` when the host is forced down or its
hypervisor worker has not sent a heartbeat for ``STRATUS_HOST_DOWN_AFTER`` seconds
(``stratus.liveness``), else ``up``; ``host_ip`` is the address the worker reports in its heartbeat.

The microversions, as Nova: before 2.53 ids are integers (derived from the host's UUID, as
services' are) and a host is searched on ``/{pattern}/search`` and ``/{pattern}/servers``; from
2.53 ids are UUIDs and those routes are query parameters of the lists
(``hypervisor_hostname_pattern``, ``with_servers``); 2.33 pages (``limit``, ``marker``); 2.75 gives
``servers: []`` when asked for and there are none; 2.88 drops the usage (placement has it) and the
statistics and uptime routes, and shows ``uptime`` in the detail instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from uuid import UUID

import falcon

from api import auth
from api.body import as_bool
from api.errors import BadRequest, ItemNotFound
from api.links import next_links, page_params
from api.readmodel import ReadModel
from api.services import integer_id
from api.versions import at_least
from projections import admin_queries, queries

_POLICY = "os_compute_api:os-hypervisors:%s"
UUID_IDS = 53  # the microversion from which ids are UUIDs and search/servers are query parameters
NO_USAGE = 88  # the microversion that dropped the usage, statistics and the uptime route
_USAGE = (
    "vcpus", "memory_mb", "local_gb", "vcpus_used", "memory_mb_used", "local_gb_used", "free_ram_mb",
    "free_disk_gb", "current_workload", "running_vms", "disk_available_least",
)  # fmt: skip
_TRUE_FALSE = ("1", "0", "t", "f", "true", "false", "on", "off", "y", "n", "yes", "no")


def _id(req: falcon.Request, host: dict[str, Any]) -> int | str:
    """A host's id as the microversion shows it (the read model's ``id`` is a UUID or its text)."""
    return str(host["id"]) if at_least(req, UUID_IDS) else integer_id(host["id"])


def brief_view(
    host: dict[str, Any], req: falcon.Request | None = None, shown_id: int | str | None = None
) -> dict[str, Any]:
    """``shown_id``: ``_id(req, host)`` when the caller has it already."""
    if shown_id is None:
        shown_id = _id(req, host) if req is not None else str(host["id"])
    return {
        "id": shown_id,
        "hypervisor_hostname": host["hostname"],
        "state": "down" if host.get("forced_down") or not host.get("alive", True) else "up",
        "status": "disabled" if host.get("disabled") else "enabled",
    }


def usage(host: dict[str, Any]) -> dict[str, int]:
    """What Nova's detail showed of a host's resources before 2.88; its resource tracker counts
    what the host reserves for itself as used (memory and disk)."""
    memory_used = host["memory_mb_used"] + host.get("memory_mb_reserved", 0)
    disk_used = host["disk_gb_used"] + host.get("disk_gb_reserved", 0)
    free_disk = host["disk_gb"] - disk_used
    return {
        "vcpus": host["vcpus"],
        "vcpus_used": host["vcpus_used"],
        "memory_mb": host["memory_mb"],
        "memory_mb_used": memory_used,
        "local_gb": host["disk_gb"],
        "local_gb_used": disk_used,
        "free_ram_mb": host["memory_mb"] - memory_used,
        "free_disk_gb": free_disk,
        "disk_available_least": free_disk,
        "current_workload": 0,
        "running_vms": host["running_vms"],
    }


def detail_view(host: dict[str, Any], req: falcon.Request, report: dict[str, Any] | None) -> dict[str, Any]:
    """``report``: the host's last heartbeat (its address, when it booted), None if it never beat."""
    shown_id = _id(req, host)
    view = {
        **brief_view(host, req, shown_id),
        "hypervisor_type": host["hypervisor_type"],
        "hypervisor_version": 0,
        "host_ip": (report or {}).get("ip") or "127.0.0.1",  # Nova's my_ip when it finds no route
        "service": {
            "host": host["hostname"],
            "id": shown_id,
            "disabled_reason": host.get("disabled_reason"),
        },
    }
    if at_least(req, NO_USAGE):
        view["uptime"] = _uptime(report) if view["state"] == "up" else None
    else:
        view.update(usage(host))
        # 2.28 and later give ``cpu_info`` as an object, earlier as a JSON string; the test driver
        # and TCG report no CPU model
        view["cpu_info"] = {} if at_least(req, 28) else "{}"
    return view


def _uptime(report: dict[str, Any] | None) -> str | None:
    if report is None or "booted" not in report:
        return None
    return uptime_line(time.time(), float(report["booted"]), list(report["load"]))


# Which of these hosts are alive (``stratus.liveness.Heartbeats.up``); None: liveness not tracked.
Liveness = Callable[[list[str]], dict[str, bool]]
# The hosts' last heartbeats (``stratus.liveness.Heartbeats.reports``), None for one that never beat.
Reports = Callable[[list[str]], "dict[str, dict[str, Any] | None]"]


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


def _with_servers(req: falcon.Request) -> bool:
    """``with_servers`` (2.53), a strict boolean as Nova's ``bool_from_string(strict=True)``."""
    raw = req.get_param("with_servers")
    if raw is None or not at_least(req, UUID_IDS):
        return False
    if raw.strip().lower() not in _TRUE_FALSE:
        raise BadRequest(f"Invalid input for query parameters with_servers. Value: {raw[:64]}.")
    return as_bool(raw.strip())


def _is_uuid(value: str) -> bool:
    try:
        UUID(value)
    except ValueError:
        return False
    return True


def _until(minor: int) -> Callable[..., None]:
    """A ``falcon.before`` hook for a route a later microversion removed: 404 from it, as Nova."""

    def hook(req: falcon.Request, resp: falcon.Response, resource: object, params: dict[str, Any]) -> None:
        if at_least(req, minor):
            raise ItemNotFound("The resource could not be found.")

    return hook


class _Hypervisors:
    def __init__(
        self, read_model: ReadModel, liveness: Liveness | None = None, reports: Reports | None = None
    ) -> None:
        self._read = read_model
        self._liveness = liveness
        self._reports = reports

    def _alive(self, hosts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self._liveness is None or not hosts:
            return hosts
        up = self._liveness([h["hostname"] for h in hosts])
        return [{**h, "alive": up.get(h["hostname"], False)} for h in hosts]

    def _beats(self, hosts: list[dict[str, Any]]) -> dict[str, dict[str, Any] | None]:
        if self._reports is None or not hosts:
            return {}
        return self._reports([h["hostname"] for h in hosts])

    def _host(self, req: falcon.Request, hypervisor_id: str, rule: str) -> dict[str, Any]:
        """One host with its liveness; 404 when there is none. From 2.53 by UUID only (400 for
        anything else, as Nova); before, by its integer id, and also by UUID or hostname."""
        auth.require_admin(req.context.actor, _POLICY % rule)
        missing = ItemNotFound(f"Hypervisor with ID '{hypervisor_id}' could not be found.")
        with self._read.connection(req) as conn:
            if at_least(req, UUID_IDS):
                if not _is_uuid(hypervisor_id):
                    raise BadRequest(f"Invalid uuid {hypervisor_id}")
                host = queries.get_host(conn, hypervisor_id)
            elif hypervisor_id.isdigit():
                number = int(hypervisor_id)
                host = next((h for h in queries.list_hosts(conn) if integer_id(str(h["id"])) == number), None)
            else:
                host = queries.get_host(conn, hypervisor_id)
        if host is None or (at_least(req, UUID_IDS) and str(host["id"]) != hypervisor_id.lower()):
            raise missing
        return self._alive([host])[0]

    def _matching(self, req: falcon.Request, pattern: str) -> list[dict[str, Any]]:
        """The hosts whose name contains ``pattern`` (Nova's ``LIKE %pattern%``); 404 when none."""
        with self._read.connection(req) as conn:
            hosts = [h for h in queries.list_hosts(conn) if pattern in h["hostname"]]
        if not hosts:
            raise ItemNotFound(f"No hypervisor matching '{pattern}' could be found.")
        return self._alive(hosts)

    def _servers(self, req: falcon.Request, hosts: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        with self._read.connection(req) as conn:
            return admin_queries.servers_on_hosts(conn, [h["hostname"] for h in hosts])

    def _list(self, req: falcon.Request, detail: bool) -> dict[str, Any]:
        auth.require_admin(req.context.actor, _POLICY % ("list-detail" if detail else "list"))
        pattern = req.get_param("hypervisor_hostname_pattern") if at_least(req, UUID_IDS) else None
        with_servers = _with_servers(req)
        paged = at_least(req, 33)
        limit, marker = page_params(req) if paged else (0, None)
        if pattern is not None:
            if req.get_param("limit") is not None or marker:
                raise BadRequest(
                    "Paging over hypervisors with the hypervisor_hostname_pattern query parameter is "
                    "not supported."
                )
            hosts, paged = self._matching(req, pattern), False
        else:
            with self._read.connection(req) as conn:
                hosts = queries.list_hosts(conn)
            if marker is not None:
                ids = [str(_id(req, h)) for h in hosts]
                if marker not in ids:
                    raise BadRequest(f"marker [{marker}] not found")
                hosts = hosts[ids.index(marker) + 1 :]
            if paged:
                hosts = hosts[:limit]
            hosts = self._alive(hosts)
        beats = self._beats(hosts) if detail else {}
        servers = self._servers(req, hosts) if with_servers else {}
        shown = []
        for host in hosts:
            view = detail_view(host, req, beats.get(host["hostname"])) if detail else brief_view(host, req)
            shown.append(_add_servers(req, view, servers.get(host["hostname"]), with_servers))
        body: dict[str, Any] = {"hypervisors": shown}
        links = next_links(req, "os-hypervisors/detail" if detail else "os-hypervisors", shown, limit)
        if paged and links:
            body["hypervisors_links"] = links
        return body


def _add_servers(
    req: falcon.Request, view: dict[str, Any], servers: list[dict[str, Any]] | None, asked: bool
) -> dict[str, Any]:
    """Nova shows the servers when there are some, and from 2.75 an empty list when asked for."""
    if servers:
        view["servers"] = servers
    elif asked and at_least(req, 75):
        view["servers"] = []
    return view


class HypervisorCollection(_Hypervisors):
    """``GET /v2.1/os-hypervisors``."""

    read_beside_check = auth.READ_BESIDE_CHECK  # a list: read beside its token's check

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = self._list(req, detail=False)


class HypervisorDetailCollection(_Hypervisors):
    """``GET /v2.1/os-hypervisors/detail``."""

    read_beside_check = auth.READ_BESIDE_CHECK  # a list: read beside its token's check

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = self._list(req, detail=True)


class HypervisorItem(_Hypervisors):
    """``GET /v2.1/os-hypervisors/{hypervisor_id}`` (2.53: ``with_servers``)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, hypervisor_id: str) -> None:
        with_servers = _with_servers(req)
        host = self._host(req, hypervisor_id, "show")
        view = detail_view(host, req, self._beats([host]).get(host["hostname"]))
        servers = self._servers(req, [host]).get(host["hostname"]) if with_servers else None
        resp.media = {"hypervisor": _add_servers(req, view, servers, with_servers)}


class HypervisorStatistics(_Hypervisors):
    """``GET /v2.1/os-hypervisors/statistics`` (until 2.87): the sums of every host's usage."""

    @falcon.before(_until(NO_USAGE))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        auth.require_admin(req.context.actor, _POLICY % "statistics")
        with self._read.connection(req) as conn:
            hosts = queries.list_hosts(conn)
        totals = {name: sum(usage(h)[name] for h in hosts) for name in _USAGE}
        resp.media = {"hypervisor_statistics": {"count": len(hosts), **totals}}


class HypervisorSearch(_Hypervisors):
    """``GET /v2.1/os-hypervisors/{pattern}/search`` (until 2.52): the hosts whose name matches."""

    @falcon.before(_until(UUID_IDS))
    def on_get(self, req: falcon.Request, resp: falcon.Response, hypervisor_id: str) -> None:
        auth.require_admin(req.context.actor, _POLICY % "search")
        resp.media = {"hypervisors": [brief_view(h, req) for h in self._matching(req, hypervisor_id)]}


class HypervisorServers(_Hypervisors):
    """``GET /v2.1/os-hypervisors/{pattern}/servers`` (until 2.52): the matching hosts and their servers."""

    @falcon.before(_until(UUID_IDS))
    def on_get(self, req: falcon.Request, resp: falcon.Response, hypervisor_id: str) -> None:
        auth.require_admin(req.context.actor, _POLICY % "servers")
        hosts = self._matching(req, hypervisor_id)
        servers = self._servers(req, hosts)
        shown = [_add_servers(req, brief_view(h, req), servers.get(h["hostname"]), False) for h in hosts]
        resp.media = {"hypervisors": shown}


class HypervisorUptime(_Hypervisors):
    """``GET /v2.1/os-hypervisors/{hypervisor_id}/uptime`` (until 2.87): the host's ``uptime`` line,
    from its last heartbeat; a host that is down answers 400 as Nova does when its compute service
    is unavailable."""

    @falcon.before(_until(NO_USAGE))
    def on_get(self, req: falcon.Request, resp: falcon.Response, hypervisor_id: str) -> None:
        host = self._host(req, hypervisor_id, "uptime")
        view = brief_view(host, req)
        line = _uptime(self._beats([host]).get(host["hostname"])) if view["state"] == "up" else None
        if line is None:
            raise BadRequest(f"Compute service of {host['hostname']} is unavailable at this time.")
        resp.media = {"hypervisor": {**view, "uptime": line}}


def add_routes(app: falcon.App, read: ReadModel, liveness: Liveness | None, reports: Reports | None) -> None:
    base = "/v2.1/os-hypervisors"
    args = (read, liveness, reports)
    app.add_route(base, HypervisorCollection(*args))
    app.add_route(f"{base}/detail", HypervisorDetailCollection(*args))
    app.add_route(f"{base}/statistics", HypervisorStatistics(*args))
    app.add_route(f"{base}/{{hypervisor_id}}", HypervisorItem(*args))
    app.add_route(f"{base}/{{hypervisor_id}}/uptime", HypervisorUptime(*args))
    app.add_route(f"{base}/{{hypervisor_id}}/search", HypervisorSearch(*args))
    app.add_route(f"{base}/{{hypervisor_id}}/servers", HypervisorServers(*args))
