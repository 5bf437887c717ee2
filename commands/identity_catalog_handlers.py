"""Handlers for the service catalog: regions, services, endpoints (see ``commands.identity_catalog``)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import IntegrityError

from commands.errors import AlreadyExists, NotFound
from commands.identity_base import IdentityBase
from commands.identity_catalog import (
    DEFAULT_REGION,
    Endpoint,
    Region,
    Service,
    region_aggregate_id,
    seeded_id,
)
from commands.unit_of_work import Result

# What Stratus always served: (service type, name, path under the API's address).
SEEDED_SERVICES = (
    ("compute", "nova", "/v2.1"),
    ("identity", "keystone", "/identity"),
    ("image", "glance", "/image"),
    ("placement", "placement", "/placement"),
)


@dataclass(frozen=True)
class CreateRegion:
    """Create a region of the service catalog."""

    region_id: str | None = None
    description: str = ""
    parent_region_id: str | None = None


@dataclass(frozen=True)
class CreateService:
    """Create a service of the service catalog."""

    type: str
    name: str = ""
    description: str = ""
    enabled: bool = True


@dataclass(frozen=True)
class CreateEndpoint:
    """Create an endpoint of a service in the catalog."""

    service_id: str
    interface: str
    url: str
    region_id: str | None = None
    enabled: bool = True


class ServiceCatalogHandlers(IdentityBase):
    """Keystone's service catalog commands: regions, services, endpoints."""

    def region(self, region_id: str) -> Region:
        return self._load(Region, region_aggregate_id(region_id), "region", region_id)

    def service(self, service_id: str) -> Service:
        return self._identity(Service, service_id, "service")

    def endpoint(self, endpoint_id: str) -> Endpoint:
        return self._identity(Endpoint, endpoint_id, "endpoint")

    def create_region(self, cmd: CreateRegion) -> Result:
        rid = cmd.region_id or self._new_id()
        if cmd.parent_region_id is not None:
            self.region(cmd.parent_region_id)
        try:
            gone: Region | None = self.app.repository.get(region_aggregate_id(rid))
        except AggregateNotFoundError:
            gone = None
        if gone is not None:  # a region's id is the operator's: once used, it stays used
            raise AlreadyExists(f"Conflict occurred attempting to store region - Duplicate ID, {rid}.")
        region = Region(region_id=rid, description=cmd.description, parent_region_id=cmd.parent_region_id)
        try:
            return Result(rid, self.save(region))
        except IntegrityError:
            raise AlreadyExists(f"Conflict occurred attempting to store region - {rid}.") from None

    def update_region(self, region_id: str, description: str | None, parent_region_id: str | None) -> Result:
        if parent_region_id is not None:
            self.region(parent_region_id)

        def decide() -> Result:
            region = self.region(region_id)
            region.update(description=description, parent_region_id=parent_region_id)
            return Result(region_id, self.save(region))

        return self.retrying(decide)

    def delete_region(self, region_id: str) -> Result:
        def decide() -> Result:
            region = self.region(region_id)
            region.delete()
            return Result(region_id, self.save(region))

        return self.retrying(decide)

    def create_service(self, cmd: CreateService, service_id: str | None = None) -> Result:
        sid = service_id or self._new_id()
        service = Service(
            service_id=sid, type=cmd.type, name=cmd.name, description=cmd.description, enabled=cmd.enabled
        )
        return Result(sid, self.save(service))

    def update_service(self, service_id: str, changes: dict[str, Any]) -> Result:
        def decide() -> Result:
            service = self.service(service_id)
            service.update(changes)
            return Result(service_id, self.save(service))

        return self.retrying(decide)

    def delete_service(self, service_id: str, endpoints: tuple[str, ...] = ()) -> Result:
        """The service and its endpoints (``endpoints``, as the read model lists them) go together."""

        def decide() -> Result:
            service = self.service(service_id)
            service.delete()
            gone = [self.endpoint(e) for e in endpoints]
            for endpoint in gone:
                endpoint.delete()
            return Result(service_id, self.save(service, *gone))

        return self.retrying(decide)

    def create_endpoint(self, cmd: CreateEndpoint, endpoint_id: str | None = None) -> Result:
        self.service(cmd.service_id)
        if cmd.region_id is not None:
            self.region(cmd.region_id)
        eid = endpoint_id or self._new_id()
        endpoint = Endpoint.create(eid, cmd.service_id, cmd.interface, cmd.url, cmd.region_id, cmd.enabled)
        return Result(eid, self.save(endpoint))

    def update_endpoint(self, endpoint_id: str, changes: dict[str, Any]) -> Result:
        if changes.get("service_id") is not None:
            self.service(changes["service_id"])
        if changes.get("region_id") is not None:
            self.region(changes["region_id"])

        def decide() -> Result:
            endpoint = self.endpoint(endpoint_id)
            endpoint.update(changes)
            return Result(endpoint_id, self.save(endpoint))

        return self.retrying(decide)

    def delete_endpoint(self, endpoint_id: str) -> Result:
        def decide() -> Result:
            endpoint = self.endpoint(endpoint_id)
            endpoint.delete()
            return Result(endpoint_id, self.save(endpoint))

        return self.retrying(decide)

    def seed_catalog(self) -> int:
        """The catalog Stratus always served, once (every id is derived: seeding again adds nothing)."""
        position = 0
        with contextlib.suppress(IntegrityError):  # seeded before
            position = self.save(Region(region_id=DEFAULT_REGION, description="", parent_region_id=None))
        for service_type, name, path in SEEDED_SERVICES:
            sid = seeded_id("service", name)
            try:
                self.service(sid)
                continue
            except NotFound:
                pass
            service = Service(service_id=sid, type=service_type, name=name, description="", enabled=True)
            endpoints = [
                Endpoint.create(seeded_id("endpoint", name, i), sid, i, path, DEFAULT_REGION, True)
                for i in ("public", "internal", "admin")
            ]
            with contextlib.suppress(IntegrityError):  # another API worker seeded it a moment ago
                position = self.save(service, *endpoints)
        return position
