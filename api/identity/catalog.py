"""``/identity/v3/regions``, ``/services``, ``/endpoints`` and the catalog built from them.

The catalog in a token and in ``/auth/catalog`` lists every enabled service with its enabled
endpoints. An endpoint whose URL is a path (the seeded ones: ``/v2.1``) is completed with the
address the client called, so the seeded catalog stays right behind any proxy.
"""

from __future__ import annotations

from typing import Any

import falcon

from api import policy
from api.errors import BadRequest
from api.identity.common import Resource, Row, collection, filters
from api.identity.views import endpoint_url, endpoint_view, region_view, service_view
from commands.keystone.catalog import (
    CreateEndpoint,
    CreateRegion,
    CreateService,
    DeleteEndpoint,
    DeleteRegion,
    DeleteService,
    UpdateEndpoint,
    UpdateRegion,
    UpdateService,
)
from projections import directory_queries as dq
from stratus.context import acting

SCHEMAS = (
    "identity.regions.create",
    "identity.regions.update",
    "identity.services.create",
    "identity.services.update",
    "identity.endpoints.create",
    "identity.endpoints.update",
)


def catalog(conn: Any, req: falcon.Request) -> list[dict[str, Any]]:
    """The catalog as a token carries it."""
    endpoints: dict[str, list[dict[str, Any]]] = {}
    for e in dq.list_endpoints(conn):
        if e["enabled"]:
            endpoints.setdefault(e["service_id"], []).append(
                {
                    "id": e["id"],
                    "interface": e["interface"],
                    "region": e["region_id"],
                    "region_id": e["region_id"],
                    "url": endpoint_url(req, e["url"]),
                }
            )
    return [
        {"id": s["id"], "type": s["type"], "name": s["name"], "endpoints": endpoints.get(s["id"], [])}
        for s in dq.list_services(conn)
        if s["enabled"]
    ]


class _CatalogResource(Resource):
    def _region_for(self, req: falcon.Request, spec: dict[str, Any]) -> None:
        """The endpoint's region must exist; Keystone makes one named by the older ``region``."""
        region_id = _region_of(spec)
        if region_id is None:
            return
        with self._read.connection(req) as conn:
            if dq.get_region(conn, region_id) is not None:
                return
        if spec.get("region_id"):
            raise BadRequest(f"Invalid input for field 'region_id': no region {region_id}.")
        self._bus.handle(CreateRegion(region_id))

    def _region(self, conn: Any, region_id: str) -> Row:
        return self._found(dq.get_region(conn, region_id), "region", region_id)

    def _service(self, conn: Any, service_id: str) -> Row:
        return self._found(dq.get_service(conn, service_id), "service", service_id)

    def _endpoint(self, conn: Any, endpoint_id: str) -> Row:
        return self._found(dq.get_endpoint(conn, endpoint_id), "endpoint", endpoint_id)

    def _create(
        self, req: falcon.Request, resp: falcon.Response, spec: dict[str, Any], rid: str | None
    ) -> None:
        cmd = CreateRegion(rid, spec.get("description") or "", spec.get("parent_region_id"))
        row = self._wrote(req, cmd, self._region)
        resp.status = falcon.HTTP_201
        resp.media = {"region": region_view(req, row)}


# -- regions --------------------------------------------------------------------------------------
class Regions(_CatalogResource):
    """``GET``/``POST /identity/v3/regions``."""

    @falcon.before(policy.require("identity:list_regions"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._read.connection(req) as conn:
            rows = dq.list_regions(conn, parent_region_id=req.get_param("parent_region_id"))
        resp.media = collection(req, "regions", [region_view(req, r) for r in rows])

    @falcon.before(policy.require("identity:create_region"))
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        spec = self._body(req, "identity.regions.create")["region"]
        self._create(req, resp, spec, spec.get("id"))


class RegionItem(_CatalogResource):
    """``GET``/``PUT``/``PATCH``/``DELETE /identity/v3/regions/{id}`` (``PUT`` creates it with that id)."""

    @falcon.before(policy.require("identity:get_region"))
    def on_get(self, req: falcon.Request, resp: falcon.Response, region_id: str) -> None:
        with self._read.connection(req) as conn:
            resp.media = {"region": region_view(req, self._region(conn, region_id))}

    @falcon.before(policy.require("identity:create_region"))
    def on_put(self, req: falcon.Request, resp: falcon.Response, region_id: str) -> None:
        """Keystone's create with the id in the path."""
        spec = self._body(req, "identity.regions.create")["region"]
        if spec.get("id") not in (None, region_id):
            raise BadRequest("Invalid input for field 'id': it differs from the id in the path.")
        self._create(req, resp, spec, region_id)

    @falcon.before(policy.require("identity:update_region"))
    def on_patch(self, req: falcon.Request, resp: falcon.Response, region_id: str) -> None:
        spec = self._body(req, "identity.regions.update")["region"]
        cmd = UpdateRegion(region_id, spec.get("description"), spec.get("parent_region_id"))
        row = self._wrote(req, cmd, self._region)
        resp.media = {"region": region_view(req, row)}

    @falcon.before(policy.require("identity:delete_region"))
    def on_delete(self, req: falcon.Request, resp: falcon.Response, region_id: str) -> None:
        self._handled(req, DeleteRegion(region_id))
        resp.status = falcon.HTTP_204


# -- services -------------------------------------------------------------------------------------
class Services(_CatalogResource):
    """``GET``/``POST /identity/v3/services``."""

    @falcon.before(policy.require("identity:list_services"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._read.connection(req) as conn:
            rows = dq.list_services(conn, **filters(req, "type", "name"))
        resp.media = collection(req, "services", [service_view(req, r) for r in rows])

    @falcon.before(policy.require("identity:create_service"))
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        spec = self._body(req, "identity.services.create")["service"]
        cmd = CreateService(
            spec["type"], spec.get("name") or "", spec.get("description") or "", spec.get("enabled", True)
        )
        row = self._wrote(req, cmd, self._service)
        resp.status = falcon.HTTP_201
        resp.media = {"service": service_view(req, row)}


class ServiceItem(_CatalogResource):
    """``GET``/``PATCH``/``DELETE /identity/v3/services/{id}``."""

    @falcon.before(policy.require("identity:get_service"))
    def on_get(self, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
        with self._read.connection(req) as conn:
            resp.media = {"service": service_view(req, self._service(conn, service_id))}

    @falcon.before(policy.require("identity:update_service"))
    def on_patch(self, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
        spec = self._body(req, "identity.services.update")["service"]
        row = self._wrote(req, UpdateService(service_id, spec), self._service)
        resp.media = {"service": service_view(req, row)}

    @falcon.before(policy.require("identity:delete_service"))
    def on_delete(self, req: falcon.Request, resp: falcon.Response, service_id: str) -> None:
        with self._read.connection(req) as conn:
            endpoints = tuple(e["id"] for e in dq.list_endpoints(conn, service_id=service_id))
        self._handled(req, DeleteService(service_id, endpoints))
        resp.status = falcon.HTTP_204


# -- endpoints ------------------------------------------------------------------------------------
def _region_of(spec: dict[str, Any]) -> str | None:
    """``region_id``, or the older ``region`` Keystone still accepts."""
    value = spec.get("region_id") or spec.get("region")
    return str(value) if value else None


class Endpoints(_CatalogResource):
    """``GET``/``POST /identity/v3/endpoints``."""

    @falcon.before(policy.require("identity:list_endpoints"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._read.connection(req) as conn:
            rows = dq.list_endpoints(
                conn,
                service_id=req.get_param("service_id"),
                interface=req.get_param("interface"),
                region_id=req.get_param("region_id"),
            )
        resp.media = collection(req, "endpoints", [endpoint_view(req, r) for r in rows])

    @falcon.before(policy.require("identity:create_endpoint"))
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        spec = self._body(req, "identity.endpoints.create")["endpoint"]
        cmd = CreateEndpoint(
            spec["service_id"], spec["interface"], spec["url"], _region_of(spec), spec.get("enabled", True)
        )
        with self._read.connection(req) as conn:
            self._service(conn, cmd.service_id)
        with acting(req.context.command):
            self._region_for(req, spec)
            result = self._bus.handle(cmd)
        row = self._after(req, result.position, lambda conn: self._endpoint(conn, result.id))
        resp.status = falcon.HTTP_201
        resp.media = {"endpoint": endpoint_view(req, row)}


class EndpointItem(_CatalogResource):
    """``GET``/``PATCH``/``DELETE /identity/v3/endpoints/{id}``."""

    @falcon.before(policy.require("identity:get_endpoint"))
    def on_get(self, req: falcon.Request, resp: falcon.Response, endpoint_id: str) -> None:
        with self._read.connection(req) as conn:
            resp.media = {"endpoint": endpoint_view(req, self._endpoint(conn, endpoint_id))}

    @falcon.before(policy.require("identity:update_endpoint"))
    def on_patch(self, req: falcon.Request, resp: falcon.Response, endpoint_id: str) -> None:
        spec = dict(self._body(req, "identity.endpoints.update")["endpoint"])
        with acting(req.context.command):
            self._region_for(req, spec)
            result = self._bus.handle(UpdateEndpoint(endpoint_id, {**spec, "region_id": _region_of(spec)}))
        row = self._after(req, result.position, lambda conn: self._endpoint(conn, endpoint_id))
        resp.media = {"endpoint": endpoint_view(req, row)}

    @falcon.before(policy.require("identity:delete_endpoint"))
    def on_delete(self, req: falcon.Request, resp: falcon.Response, endpoint_id: str) -> None:
        self._handled(req, DeleteEndpoint(endpoint_id))
        resp.status = falcon.HTTP_204
