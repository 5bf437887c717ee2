"""The service catalog's use cases: regions, services, endpoints (``commands.identity_catalog``), and
the catalog Stratus always served, seeded once."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import IntegrityError

from commands.errors import AlreadyExists, NotFound
from commands.identity_catalog import (
    DEFAULT_REGION,
    Endpoint,
    Region,
    Service,
    region_aggregate_id,
    seeded_id,
)
from commands.keystone import loaders
from commands.unit_of_work import Result, UnitOfWork, retried

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
class UpdateRegion:
    """Change a region's description or parent."""

    region_id: str
    description: str | None = None
    parent_region_id: str | None = None


@dataclass(frozen=True)
class DeleteRegion:
    """Delete a region."""

    region_id: str


@dataclass(frozen=True)
class CreateService:
    """Create a service of the service catalog (``service_id``: a given id; None: a new one)."""

    type: str
    name: str = ""
    description: str = ""
    enabled: bool = True
    service_id: str | None = None


@dataclass(frozen=True)
class UpdateService:
    """Change a service's fields (``changes``: Keystone's body)."""

    service_id: str
    changes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DeleteService:
    """Delete a service and its endpoints (``endpoints``, as the read model lists them)."""

    service_id: str
    endpoints: tuple[str, ...] = ()


@dataclass(frozen=True)
class CreateEndpoint:
    """Create an endpoint of a service in the catalog (``endpoint_id``: a given id; None: a new one)."""

    service_id: str
    interface: str
    url: str
    region_id: str | None = None
    enabled: bool = True
    endpoint_id: str | None = None


@dataclass(frozen=True)
class UpdateEndpoint:
    """Change an endpoint's fields (``changes``: Keystone's body)."""

    endpoint_id: str
    changes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DeleteEndpoint:
    """Delete an endpoint."""

    endpoint_id: str


@dataclass(frozen=True)
class SeedCatalog:
    """The catalog Stratus always served, once (every id is derived: seeding again adds nothing)."""


def region(uow: UnitOfWork, region_id: str) -> Region:
    return loaders.load(uow, Region, region_aggregate_id(region_id), "region", region_id)


def service(uow: UnitOfWork, service_id: str) -> Service:
    return loaders.identity(uow, Service, service_id, "service")


def endpoint(uow: UnitOfWork, endpoint_id: str) -> Endpoint:
    return loaders.identity(uow, Endpoint, endpoint_id, "endpoint")


def create_region(cmd: CreateRegion, uow: UnitOfWork, new_identity_id: Callable[[], str]) -> Result:
    rid = cmd.region_id or new_identity_id()
    if cmd.parent_region_id is not None:
        region(uow, cmd.parent_region_id)
    try:
        gone: Region | None = uow.app.repository.get(region_aggregate_id(rid))
    except AggregateNotFoundError:
        gone = None
    if gone is not None:  # a region's id is the operator's: once used, it stays used
        raise AlreadyExists(f"Conflict occurred attempting to store region - Duplicate ID, {rid}.")
    new = Region(region_id=rid, description=cmd.description, parent_region_id=cmd.parent_region_id)
    try:
        return Result(rid, uow.save(new))
    except IntegrityError:
        raise AlreadyExists(f"Conflict occurred attempting to store region - {rid}.") from None


@retried
def update_region(cmd: UpdateRegion, uow: UnitOfWork) -> Result:
    if cmd.parent_region_id is not None:
        region(uow, cmd.parent_region_id)
    changed = region(uow, cmd.region_id)
    changed.update(description=cmd.description, parent_region_id=cmd.parent_region_id)
    return Result(cmd.region_id, uow.save(changed))


@retried
def delete_region(cmd: DeleteRegion, uow: UnitOfWork) -> Result:
    gone = region(uow, cmd.region_id)
    gone.delete()
    return Result(cmd.region_id, uow.save(gone))


def create_service(cmd: CreateService, uow: UnitOfWork, new_identity_id: Callable[[], str]) -> Result:
    sid = cmd.service_id or new_identity_id()
    new = Service(
        service_id=sid, type=cmd.type, name=cmd.name, description=cmd.description, enabled=cmd.enabled
    )
    return Result(sid, uow.save(new))


@retried
def update_service(cmd: UpdateService, uow: UnitOfWork) -> Result:
    changed = service(uow, cmd.service_id)
    changed.update(cmd.changes)
    return Result(cmd.service_id, uow.save(changed))


@retried
def delete_service(cmd: DeleteService, uow: UnitOfWork) -> Result:
    """The service and its endpoints go together."""
    gone = service(uow, cmd.service_id)
    gone.delete()
    endpoints = [endpoint(uow, e) for e in cmd.endpoints]
    for e in endpoints:
        e.delete()
    return Result(cmd.service_id, uow.save(gone, *endpoints))


def create_endpoint(cmd: CreateEndpoint, uow: UnitOfWork, new_identity_id: Callable[[], str]) -> Result:
    service(uow, cmd.service_id)
    if cmd.region_id is not None:
        region(uow, cmd.region_id)
    eid = cmd.endpoint_id or new_identity_id()
    new = Endpoint.create(eid, cmd.service_id, cmd.interface, cmd.url, cmd.region_id, cmd.enabled)
    return Result(eid, uow.save(new))


@retried
def update_endpoint(cmd: UpdateEndpoint, uow: UnitOfWork) -> Result:
    if cmd.changes.get("service_id") is not None:
        service(uow, cmd.changes["service_id"])
    if cmd.changes.get("region_id") is not None:
        region(uow, cmd.changes["region_id"])
    changed = endpoint(uow, cmd.endpoint_id)
    changed.update(cmd.changes)
    return Result(cmd.endpoint_id, uow.save(changed))


@retried
def delete_endpoint(cmd: DeleteEndpoint, uow: UnitOfWork) -> Result:
    gone = endpoint(uow, cmd.endpoint_id)
    gone.delete()
    return Result(cmd.endpoint_id, uow.save(gone))


def seed_catalog(cmd: SeedCatalog, uow: UnitOfWork) -> int:
    """The log's position after the seeding (0: everything was in place)."""
    position = 0
    with contextlib.suppress(IntegrityError):  # seeded before
        position = uow.save(Region(region_id=DEFAULT_REGION, description="", parent_region_id=None))
    for service_type, name, path in SEEDED_SERVICES:
        sid = seeded_id("service", name)
        try:
            service(uow, sid)
            continue
        except NotFound:
            pass
        new = Service(service_id=sid, type=service_type, name=name, description="", enabled=True)
        endpoints = [
            Endpoint.create(seeded_id("endpoint", name, i), sid, i, path, DEFAULT_REGION, True)
            for i in ("public", "internal", "admin")
        ]
        with contextlib.suppress(IntegrityError):  # another API worker seeded it a moment ago
            position = uow.save(new, *endpoints)
    return position
