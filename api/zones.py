"""``/v2.1/os-availability-zone`` and ``/v2.1/os-aggregates``: availability zones, and the host
aggregates that define them, in Nova's 2.1 shapes.

Zones are not objects of their own: an aggregate with ``availability_zone`` metadata defines one,
and its hosts are in it; hosts in no zone are in ``nova`` (Nova's default). Aggregate ids are
Nova's integers; from 2.41 an aggregate shows its ``uuid`` too. From 2.81 an operator may ask an
aggregate's hosts to cache images ahead of boots (``POST .../images``): Stratus answers 202 as
Nova after checking the request, and records nothing, since its hosts fetch an image on first boot.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import falcon

from api import auth, versions
from api.errors import BadRequest, ItemNotFound
from api.readmodel import POSITION_HEADER, ReadModel
from api.resource import BusResource
from api.services import _now, service_view
from commands.host_aggregate import DEFAULT_ZONE, INTERNAL_ZONE
from commands.hosts import aggregates
from commands.hosts.services import COMPUTE_BINARY
from projections import admin_queries
from stratus.context import acting


def _time(value: datetime | None) -> str | None:
    return value.astimezone(UTC).replace(tzinfo=None).isoformat() if value else None


def aggregate_view(row: dict[str, Any], req: falcon.Request) -> dict[str, Any]:
    return _versioned(
        req,
        {
            "id": row["number"],
            "uuid": str(row["id"]),
            "name": row["name"],
            "availability_zone": row["availability_zone"],
            "hosts": list(row["hosts"] or []),
            "metadata": dict(row["metadata"] or {}),
            "created_at": _time(row["created_at"]),
            "updated_at": _time(row["updated_at"]),
            "deleted_at": None,
            "deleted": False,
        },
    )


def _versioned(req: falcon.Request, view: dict[str, Any]) -> dict[str, Any]:
    """Nova shows an aggregate's ``uuid`` from microversion 2.41."""
    if not versions.at_least(req, 41):
        view.pop("uuid")
    return view


class AvailabilityZones:
    """``GET /v2.1/os-availability-zone`` (everyone) and ``.../detail`` (admin, with hosts)."""

    def __init__(
        self,
        read_model: ReadModel,
        detail: bool,
        now: Callable[[], datetime] = _now,
        liveness: Callable[[list[str]], dict[str, bool]] | None = None,
    ) -> None:
        self._read = read_model
        self._detail = detail
        self._now = now
        self._liveness = liveness

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self._detail:
            auth.require_admin(req.context.actor, "os_compute_api:os-availability-zone:detail")
        with self._read.connection(req) as conn:
            zones = admin_queries.availability_zones(conn, DEFAULT_ZONE)
        now = self._now()
        info = []
        for name, hosts in sorted(zones.items()):
            alive = self._liveness([h["hostname"] for h in hosts]) if self._liveness and hosts else {}
            services = [service_view(h, now, alive=alive.get(h["hostname"])) for h in hosts]
            available = any(s["status"] == "enabled" and s["state"] == "up" for s in services)
            entry: dict[str, Any] = {"zoneName": name, "zoneState": {"available": available}, "hosts": None}
            if self._detail:
                entry["hosts"] = {
                    s["host"]: {
                        COMPUTE_BINARY: {
                            "available": s["state"] == "up",
                            "active": s["status"] == "enabled",
                            "updated_at": s["updated_at"],
                        }
                    }
                    for s in services
                } or None
            info.append(entry)
        if self._detail:
            # Nova lists its non-compute services in the "internal" zone; Stratus's scheduler is not a
            # registered service (it keeps no state of its own), so that zone has no hosts.
            info.append({"zoneName": INTERNAL_ZONE, "zoneState": {"available": True}, "hosts": None})
        resp.media = {"availabilityZoneInfo": info}


class _Aggregates(BusResource):
    def _row(self, req: falcon.Request, aggregate_id: str) -> dict[str, Any]:
        with self._read.connection(req) as conn:
            row = admin_queries.get_host_aggregate(conn, aggregate_id)
        if row is None:
            raise ItemNotFound(f"Aggregate {aggregate_id} could not be found.")
        return row

    def _uuid(self, req: falcon.Request, aggregate_id: str) -> str:
        """The aggregate's uuid, from its number (what clients send) or its uuid."""
        return str(self._row(req, aggregate_id)["id"])

    def _answer(self, req: falcon.Request, resp: falcon.Response, position: int, aggregate_uuid: str) -> None:
        """Answer with the aggregate as the log has it now (the read model may not have it yet)."""
        agg = aggregates.host_aggregate(self._bus.uow, aggregate_uuid)
        resp.set_header(POSITION_HEADER, str(position))
        view = {
            "id": agg.number,
            "uuid": aggregate_uuid,
            "name": agg.name,
            "availability_zone": agg.availability_zone,
            "hosts": list(agg.hosts),
            "metadata": dict(agg.metadata),
            "created_at": _time(agg.created_on),
            "updated_at": _time(agg.modified_on),
            "deleted_at": None,
            "deleted": False,
        }
        resp.media = {"aggregate": _versioned(req, view)}


class Aggregates(_Aggregates):
    """``GET`` and ``POST /v2.1/os-aggregates`` (admin)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:os-aggregates:index")
        with self._read.connection(req) as conn:
            rows = admin_queries.list_host_aggregates(conn)
        resp.media = {"aggregates": [aggregate_view(r, req) for r in rows]}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:os-aggregates:create")
        spec = self._body(req, "aggregates.create")["aggregate"]
        command = aggregates.CreateHostAggregate(spec["name"], spec.get("availability_zone"))
        with acting(req.context.command):
            result = self._bus.handle(command)
        self._answer(req, resp, result.position, result.id)
        for key in ("hosts", "metadata"):  # Nova's create answer has neither
            resp.media["aggregate"].pop(key)


class Aggregate(_Aggregates):
    """``GET``, ``PUT`` and ``DELETE /v2.1/os-aggregates/{aggregate_id}`` (admin)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, aggregate_id: str) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:os-aggregates:show")
        resp.media = {"aggregate": aggregate_view(self._row(req, aggregate_id), req)}

    def on_put(self, req: falcon.Request, resp: falcon.Response, aggregate_id: str) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:os-aggregates:update")
        spec = self._body(req, "aggregates.update")["aggregate"]
        uid = self._uuid(req, aggregate_id)
        command = aggregates.UpdateHostAggregate(
            uid,
            name=spec.get("name"),
            availability_zone=spec.get("availability_zone"),
            set_zone="availability_zone" in spec,
        )
        with acting(req.context.command):
            result = self._bus.handle(command)
        self._answer(req, resp, result.position, uid)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, aggregate_id: str) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:os-aggregates:delete")
        uid = self._uuid(req, aggregate_id)
        with acting(req.context.command):
            result = self._bus.handle(aggregates.DeleteHostAggregate(uid))
        resp.set_header(POSITION_HEADER, str(result.position))
        resp.status = falcon.HTTP_200


class AggregateAction(_Aggregates):
    """``POST /v2.1/os-aggregates/{aggregate_id}/action``: ``add_host``, ``remove_host``, ``set_metadata``."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, aggregate_id: str) -> None:
        body = self._body(req, "aggregates.action")
        ((action, args),) = body.items()
        auth.require_admin(req.context.actor, f"os_compute_api:os-aggregates:{action}")
        uid = self._uuid(req, aggregate_id)
        with acting(req.context.command):
            if action == "add_host":
                result = self._bus.handle(aggregates.AddHostToAggregate(uid, args["host"]))
            elif action == "remove_host":
                result = self._bus.handle(aggregates.RemoveHostFromAggregate(uid, args["host"]))
            else:
                result = self._bus.handle(aggregates.SetHostAggregateMetadata(uid, args["metadata"]))
        self._answer(req, resp, result.position, uid)


class AggregateImages(_Aggregates):
    """``POST /v2.1/os-aggregates/{aggregate_id}/images`` (2.81): cache images on the aggregate's hosts."""

    @falcon.before(versions.since(81))
    def on_post(self, req: falcon.Request, resp: falcon.Response, aggregate_id: str) -> None:
        auth.require_admin(req.context.actor, "compute:aggregates:images")
        body = self._body(req, "aggregates.images")
        if not aggregate_id.isdigit():
            raise BadRequest("Invalid input for field/attribute id. Value: must be an integer")
        ids = [image["id"] for image in body["cache"]]
        if len(set(ids)) != len(ids):
            raise BadRequest("Duplicate images in request")
        self._row(req, aggregate_id)
        resp.status = falcon.HTTP_202
