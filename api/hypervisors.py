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
from types import SimpleNamespace
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
from stratus.liveness import LivenessReader, State

_POLICY = "os_compute_api:os-hypervisors:%s"
UUID_IDS = 53  # the microversion from which ids are UUIDs and search/servers are query parameters
NO_USAGE = 88  # the microversion that dropped the usage, statistics and the uptime route
_USAGE = (
    "vcpus", "memory_mb", "local_gb", "vcpus_used", "memory_mb_used", "local_gb_used", "free_ram_mb",
    "free_disk_gb", "current_workload", "running_vms", "disk_available_least",
)  # fmt: skip
_UNTRACKED: State = (True, None)  # a host's state when liveness is not tracked: alive, no heartbeat
_TRUE_FALSE = ("1", "0", "t", "f", "true", "false", "on", "off", "y", "n", "yes", "no")


def _shown_id(req: falcon.Request) -> Callable[[Any], int | str]:
    """A host's id as the microversion shows it (its ``id``: a UUID, or a listed row's text), settled once."""
    if at_least(req, UUID_IDS):
        return lambda host: str(host.id)
    return lambda host: integer_id(host.id)


def brief_view(host: Any, shown_id: int | str, alive: bool) -> dict[str, Any]:
    """A host (a listed row, ``queries.view_rows``, or a namespace of its columns) in a list;
    ``alive``: whether its worker beats (``_Hypervisors._states_of``)."""
    return {
        "id": shown_id,
        "hypervisor_hostname": host.hostname,
        "state": "up" if alive and not host.forced_down else "down",
        "status": "disabled" if host.disabled else "enabled",
    }


def usage(host: Any) -> dict[str, int]:
    """What Nova's detail showed of a host's resources before 2.88; its resource tracker counts
    what the host reserves for itself as used (memory and disk)."""
    memory_used = host.memory_mb_used + host.memory_mb_reserved
    disk_used = host.disk_gb_used + host.disk_gb_reserved
    free_disk = host.disk_gb - disk_used
    return {
        "vcpus": host.vcpus,
        "vcpus_used": host.vcpus_used,
        "memory_mb": host.memory_mb,
        "memory_mb_used": memory_used,
        "local_gb": host.disk_gb,
        "local_gb_used": disk_used,
        "free_ram_mb": host.memory_mb - memory_used,
        "free_disk_gb": free_disk,
        "disk_available_least": free_disk,
        "current_workload": 0,
        "running_vms": host.running_vms,
    }


# A host's detailed view: the host, whether it is alive, its last heartbeat (None if it never beat).
DetailView = Callable[[Any, bool, "dict[str, Any] | None"], dict[str, Any]]


def detail_view_of(req: falcon.Request) -> DetailView:
    """A host's detail at the request's microversion, settled once a page; ``report``: its last
    heartbeat (its address, when it booted). Keys in the order Nova's come: the brief view's, the
    detail's, then the usage's or the uptime."""
    uuid_ids, no_usage = at_least(req, UUID_IDS), at_least(req, NO_USAGE)
    # 2.28 and later give ``cpu_info`` as an object, earlier as a JSON string; the test driver and
    # TCG report no CPU model
    cpu_info: Any = {} if at_least(req, 28) else "{}"

    def view(host: Any, alive: bool, report: dict[str, Any] | None) -> dict[str, Any]:
        hid = str(host.id) if uuid_ids else integer_id(host.id)
        shown = brief_view(host, hid, alive)
        shown["hypervisor_type"] = host.hypervisor_type
        shown["hypervisor_version"] = 0
        # Nova's my_ip when it finds no route
        shown["host_ip"] = (report.get("ip") if report is not None else None) or "127.0.0.1"
        shown["service"] = {"host": host.hostname, "id": hid, "disabled_reason": host.disabled_reason}
        if no_usage:
            shown["uptime"] = _uptime(report) if shown["state"] == "up" else None
            return shown
        return {**shown, **usage(host), "cpu_info": cpu_info}

    return view


def _uptime(report: dict[str, Any] | None) -> str | None:
    if report is None or "booted" not in report:
        return None
    return uptime_line(time.time(), float(report["booted"]), list(report["load"]))


# Each of these hosts' state: whether it is alive and its last heartbeat, None for one that never
# beat (``stratus.liveness.LivenessReader.states``, one look-up a host for both); None: not tracked.
States = Callable[[list[str]], "dict[str, State]"]


def host_states(heartbeats: LivenessReader, down_after: float) -> States:
    """The hosts' states from their heartbeats beside the log, up by the deployment's ``down_after``."""
    return lambda hosts: heartbeats.states(hosts, down_after)


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
    def __init__(self, read_model: ReadModel, states: States | None = None) -> None:
        self._read = read_model
        self._states = states

    def _states_of(self, hosts: list[Any]) -> dict[str, State]:
        """Each host's state by hostname: alive, last heartbeat (alive without one when liveness
        is not tracked)."""
        if self._states is None or not hosts:
            return {h.hostname: _UNTRACKED for h in hosts}
        return self._states([h.hostname for h in hosts])

    def _host(self, req: falcon.Request, hypervisor_id: str, rule: str) -> tuple[Any, State]:
        """One host and its state (alive, last heartbeat); 404 when there is none. From 2.53 by UUID only (400
        for anything else, as Nova); before, by its integer id, and also by UUID or hostname."""
        auth.require_admin(req.context.actor, _POLICY % rule)
        missing = ItemNotFound(f"Hypervisor with ID '{hypervisor_id}' could not be found.")
        with self._read.connection(req) as conn:
            if at_least(req, UUID_IDS):
                if not _is_uuid(hypervisor_id):
                    raise BadRequest(f"Invalid uuid {hypervisor_id}")
                row = queries.get_host(conn, hypervisor_id)
            elif hypervisor_id.isdigit():
                row = queries.host_by_number(conn, int(hypervisor_id))
            else:
                row = queries.get_host(conn, hypervisor_id)
        if row is None or (at_least(req, UUID_IDS) and str(row["id"]) != hypervisor_id.lower()):
            raise missing
        host = SimpleNamespace(**row)
        return host, self._states_of([host])[host.hostname]

    def _matching(self, req: falcon.Request, pattern: str) -> list[Any]:
        """The hosts whose name contains ``pattern`` (Nova's ``LIKE %pattern%``); 404 when none."""
        with self._read.connection(req) as conn:
            hosts = queries.hosts_matching(conn, pattern)
        if not hosts:
            raise ItemNotFound(f"No hypervisor matching '{pattern}' could be found.")
        return hosts

    def _servers(self, req: falcon.Request, hosts: list[Any]) -> dict[str, list[dict[str, Any]]]:
        with self._read.connection(req) as conn:
            return admin_queries.servers_on_hosts(conn, [h.hostname for h in hosts])

    def _page(self, req: falcon.Request) -> tuple[list[Any], int, bool]:
        """The hosts the list shows (matching ``hypervisor_hostname_pattern``, 2.53, or a page
        from 2.33), its limit and whether it is paged."""
        pattern = req.get_param("hypervisor_hostname_pattern") if at_least(req, UUID_IDS) else None
        paged = at_least(req, 33)
        limit, marker = page_params(req) if paged else (0, None)
        if pattern is not None:
            if req.get_param("limit") is not None or marker:
                raise BadRequest(
                    "Paging over hypervisors with the hypervisor_hostname_pattern query parameter is "
                    "not supported."
                )
            return self._matching(req, pattern), limit, False
        with self._read.connection(req) as conn:
            if not paged or (marker is None and req.get_param("limit") is None):
                hosts = queries.list_hosts(conn)  # every host (a page of the default limit)
                return (hosts[:limit] if paged else hosts), limit, paged
            try:  # a page of hosts read, not every host
                hosts = queries.page_of_hosts(conn, limit, marker, uuid_ids=at_least(req, UUID_IDS))
            except queries.MarkerNotFound:
                raise BadRequest(f"marker [{marker}] not found") from None
        return hosts, limit, paged

    def _briefs(self, req: falcon.Request, hosts: list[Any]) -> list[dict[str, Any]]:
        shown_id, states = _shown_id(req), self._states_of(hosts)
        return [brief_view(h, shown_id(h), states[h.hostname][0]) for h in hosts]

    def _list(self, req: falcon.Request, detail: bool) -> dict[str, Any]:
        auth.require_admin(req.context.actor, _POLICY % ("list-detail" if detail else "list"))
        with_servers = _with_servers(req)
        hosts, limit, paged = self._page(req)
        if detail:
            states, view = self._states_of(hosts), detail_view_of(req)
            shown = [view(h, *states[h.hostname]) for h in hosts]
        else:
            shown = self._briefs(req, hosts)
        if with_servers:
            servers = self._servers(req, hosts)
            for host, one in zip(hosts, shown, strict=True):
                _add_servers(req, one, servers.get(host.hostname), with_servers)
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
        host, (alive, report) = self._host(req, hypervisor_id, "show")
        view = detail_view_of(req)(host, alive, report)
        servers = self._servers(req, [host]).get(host.hostname) if with_servers else None
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
        resp.media = {"hypervisors": self._briefs(req, self._matching(req, hypervisor_id))}


class HypervisorServers(_Hypervisors):
    """``GET /v2.1/os-hypervisors/{pattern}/servers`` (until 2.52): the matching hosts and their servers."""

    @falcon.before(_until(UUID_IDS))
    def on_get(self, req: falcon.Request, resp: falcon.Response, hypervisor_id: str) -> None:
        auth.require_admin(req.context.actor, _POLICY % "servers")
        hosts = self._matching(req, hypervisor_id)
        servers = self._servers(req, hosts)
        views = self._briefs(req, hosts)
        shown = [
            _add_servers(req, v, servers.get(h.hostname), False) for h, v in zip(hosts, views, strict=True)
        ]
        resp.media = {"hypervisors": shown}


class HypervisorUptime(_Hypervisors):
    """``GET /v2.1/os-hypervisors/{hypervisor_id}/uptime`` (until 2.87): the host's ``uptime`` line,
    from its last heartbeat; a host that is down answers 400 as Nova does when its compute service
    is unavailable."""

    @falcon.before(_until(NO_USAGE))
    def on_get(self, req: falcon.Request, resp: falcon.Response, hypervisor_id: str) -> None:
        host, (alive, report) = self._host(req, hypervisor_id, "uptime")
        view = brief_view(host, _shown_id(req)(host), alive)
        line = _uptime(report) if view["state"] == "up" else None
        if line is None:
            raise BadRequest(f"Compute service of {host.hostname} is unavailable at this time.")
        resp.media = {"hypervisor": {**view, "uptime": line}}


def add_routes(app: falcon.App, read: ReadModel, states: States | None) -> None:
    base = "/v2.1/os-hypervisors"
    args = (read, states)
    app.add_route(base, HypervisorCollection(*args))
    app.add_route(f"{base}/detail", HypervisorDetailCollection(*args))
    app.add_route(f"{base}/statistics", HypervisorStatistics(*args))
    app.add_route(f"{base}/{{hypervisor_id}}", HypervisorItem(*args))
    app.add_route(f"{base}/{{hypervisor_id}}/uptime", HypervisorUptime(*args))
    app.add_route(f"{base}/{{hypervisor_id}}/search", HypervisorSearch(*args))
    app.add_route(f"{base}/{{hypervisor_id}}/servers", HypervisorServers(*args))
