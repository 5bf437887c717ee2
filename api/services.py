"""``/v2.1/os-services``: the compute services (one ``nova-compute`` per hypervisor host), their
state and the operator's switches, in Nova's shapes per microversion: 2.11's ``force-down``; from
2.53 ids are UUIDs and a service is updated as ``PUT /os-services/{service_id}`` (``status``,
``disabled_reason``, ``forced_down``), answered with the whole service, where the action routes
(``disable``, ``enable``...) now name no service (400 "Invalid uuid", as Nova).

A service's ``status`` (enabled/disabled, with a reason) and ``forced_down`` are events on the
host's log; the scheduler places nothing on a disabled or forced-down host. ``state`` is derived:
``up`` when the host was heard from (any event of its own: registration, claims, releases,
heartbeats) within ``service_down_time`` seconds (Nova's 60) and it is not forced down.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

import falcon
from jsonschema import Draft202012Validator

from api import auth, versions
from api.body import as_bool, read_json
from api.errors import BadRequest, ItemNotFound
from api.readmodel import POSITION_HEADER, ReadModel
from commands import loaders
from commands.bus import MessageBus
from commands.host_aggregate import DEFAULT_ZONE
from commands.hosts.services import COMPUTE_BINARY, SetServiceStatus
from projections import admin_queries
from stratus.context import acting
from stratus.liveness import SCHEDULER_BINARY

SERVICE_DOWN_TIME = timedelta(seconds=60)
INTERNAL_ZONE = "internal"  # Nova's zone of the control-plane services
# The body schema of each service action.
ACTION_SCHEMAS = {
    "enable": "services.enable",
    "disable": "services.enable",
    "disable-log-reason": "services.disable_log_reason",
    "force-down": "services.force_down",
}


def _now() -> datetime:
    return datetime.now(UTC)


def service_view(
    row: dict[str, Any], now: datetime, down_after: timedelta = SERVICE_DOWN_TIME, alive: bool | None = None
) -> dict[str, Any]:
    """``alive``: whether the host's worker sends heartbeats (``stratus.liveness``); None when
    heartbeats are not tracked, and the host's last event decides."""
    updated = row["updated_at"]
    heard = updated is not None and now - updated <= down_after
    up = not row["forced_down"] and (heard if alive is None else alive)
    return {
        "id": str(row["id"]),
        "binary": COMPUTE_BINARY,
        "host": row["hostname"],
        "zone": row["availability_zone"] or DEFAULT_ZONE,
        "status": "disabled" if row["disabled"] else "enabled",
        "state": "up" if up else "down",
        "updated_at": updated.astimezone(UTC).replace(tzinfo=None).isoformat() if updated else None,
        "disabled_reason": row["disabled_reason"],
        "forced_down": row["forced_down"],
    }


def integer_id(service_uuid: UUID | str) -> int:
    """A service's id as Nova showed it before microversion 2.53 (an integer), stable: taken from
    its UUID (31 bits; the few services of a cloud do not collide in practice). A UUID's text (as
    PostgreSQL writes it, a listed row's) is read from its first eight hex digits, which are those
    bits and one more: parsing the whole UUID was most of a hypervisor's view before 2.53."""
    if isinstance(service_uuid, UUID):
        return int(service_uuid.int >> 97) or 1
    return int(service_uuid[:8], 16) >> 1 or 1


def scheduler_view(beat: dict[str, Any]) -> dict[str, Any]:
    """A scheduler that beats (``stratus.liveness``): always enabled, in Nova's ``internal`` zone."""
    host = str(beat["host"])
    return {
        "id": str(uuid5(NAMESPACE_URL, f"stratus:{SCHEDULER_BINARY}:{host}")),
        "binary": SCHEDULER_BINARY,
        "host": host,
        "zone": INTERNAL_ZONE,
        "status": "enabled",
        "state": "up" if beat["up"] else "down",
        "updated_at": datetime.fromtimestamp(float(beat["at"]), UTC).replace(tzinfo=None).isoformat(),
        "disabled_reason": None,
        "forced_down": False,
    }


class Services:
    """``GET /v2.1/os-services`` (admin; filters ``host``, ``binary``): the compute services, then the
    schedulers that send heartbeats."""

    def __init__(
        self,
        read_model: ReadModel,
        now: Callable[[], datetime] = _now,
        liveness: Callable[[list[str]], dict[str, bool]] | None = None,
        schedulers: Callable[[], list[dict[str, Any]]] | None = None,
    ) -> None:
        self._read = read_model
        self._now = now
        self._liveness = liveness
        self._schedulers = schedulers

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:os-services:list")
        binary = req.get_param("binary") or None
        host = req.get_param("host") or None
        shown: list[dict[str, Any]] = []
        forced_down = versions.at_least(req, 11)  # the key Nova added at 2.11
        if binary in (None, COMPUTE_BINARY):
            with self._read.connection(req) as conn:
                rows = admin_queries.list_compute_services(conn, host)
            now = self._now()
            alive = self._liveness([r["hostname"] for r in rows]) if self._liveness and rows else {}
            shown += [service_view(r, now, alive=alive.get(r["hostname"])) for r in rows]
        if binary in (None, SCHEDULER_BINARY) and self._schedulers is not None:
            shown += [scheduler_view(b) for b in self._schedulers() if host in (None, b["host"])]
        if not forced_down:
            shown = [{k: v for k, v in s.items() if k != "forced_down"} for s in shown]
        if not versions.at_least(req, 53):  # Nova's ids were its database's integers before 2.53
            shown = [{**s, "id": integer_id(s["id"])} for s in shown]
        resp.media = {"services": shown}


class ServiceAction:
    """``PUT /v2.1/os-services/{action}``: ``enable``, ``disable``, ``disable-log-reason``,
    ``force-down``; from 2.53 ``PUT /v2.1/os-services/{service_id}``."""

    def __init__(
        self,
        bus: MessageBus,
        validators: dict[str, Draft202012Validator],
        max_body_bytes: int,
        read_model: ReadModel,
        now: Callable[[], datetime] = _now,
        liveness: Callable[[list[str]], dict[str, bool]] | None = None,
    ) -> None:
        self._bus = bus
        self._validators = validators
        self._max_body = max_body_bytes
        self._read = read_model
        self._now = now
        self._liveness = liveness

    def on_put(self, req: falcon.Request, resp: falcon.Response, action: str) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:os-services:update")
        if versions.at_least(req, 53):
            self._update(req, resp, action)
            return
        schema = ACTION_SCHEMAS.get(action)
        if action == "force-down" and not versions.at_least(req, 11):
            schema = None  # Nova added force-down at 2.11
        if schema is None:
            raise BadRequest(f"Unknown action {action[:64]}")
        body = read_json(req, self._validators[schema], self._max_body)
        host, binary = body["host"], body["binary"]
        service: dict[str, Any] = {"host": host, "binary": binary}
        if action == "enable":
            command = SetServiceStatus(host, binary, disabled=False)
            service["status"] = "enabled"
        elif action == "disable":
            command = SetServiceStatus(host, binary, disabled=True)
            service["status"] = "disabled"
        elif action == "disable-log-reason":
            command = SetServiceStatus(host, binary, disabled=True, disabled_reason=body["disabled_reason"])
            service.update(status="disabled", disabled_reason=body["disabled_reason"])
        else:
            command = SetServiceStatus(host, binary, forced_down=body["forced_down"])
            service["forced_down"] = body["forced_down"]
        with acting(req.context.command):
            result = self._bus.handle(command)
        resp.set_header(POSITION_HEADER, str(result.position))
        resp.media = {"service": service}

    def _update(self, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
        """2.53's update of the service ``service_id`` (a UUID); only ``nova-compute`` is updated."""
        body = read_json(req, self._validators["services.update"], self._max_body)
        try:
            UUID(service_id)
        except ValueError:
            raise BadRequest(f"Invalid uuid {service_id[:64]}") from None
        with self._read.connection(req) as conn:
            row = next(
                (r for r in admin_queries.list_compute_services(conn) if str(r["id"]) == service_id), None
            )
        if row is None:
            raise ItemNotFound(f"Service {service_id} could not be found.")
        disabled: bool | None = None
        if "status" in body:
            disabled = body["status"] == "disabled"
            if not disabled and body.get("disabled_reason"):
                raise BadRequest("Specifying 'disabled_reason' with status 'enabled' is invalid.")
        forced_down = as_bool(body["forced_down"]) if "forced_down" in body else None
        if disabled is None and forced_down is None:
            raise BadRequest(
                "No updates were requested. Fields 'status' or 'forced_down' should be specified."
            )
        reason = body.get("disabled_reason") if disabled else None
        command = SetServiceStatus(row["hostname"], COMPUTE_BINARY, disabled, reason, forced_down)
        with acting(req.context.command):
            result = self._bus.handle(command)
        host = loaders.host(self._bus.uow, row["hostname"])
        updated = {
            **row,
            "disabled": host.disabled,
            "disabled_reason": host.disabled_reason,
            "forced_down": host.forced_down,
            "updated_at": self._now(),
        }
        alive = self._liveness([row["hostname"]]).get(row["hostname"]) if self._liveness else None
        resp.set_header(POSITION_HEADER, str(result.position))
        resp.media = {"service": service_view(updated, self._now(), alive=alive)}
