"""The service catalog as Keystone keeps it: regions, services and their endpoints.

Each is an aggregate whose events carry the whole new state (``Created``, ``Updated``), so the read
model and an auditor see what the catalog said at every moment. The first run seeds the catalog
Stratus always served (compute, identity, image, placement in ``RegionOne``); seeded endpoints hold
a path (``/v2.1``) that the API completes with the address the client called, so a seeded catalog
is right behind any proxy, while an operator's endpoints hold whole URLs.
"""

from __future__ import annotations

from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from commands.errors import InvalidInput

_NS = uuid5(NAMESPACE_URL, "urn:stratus:identity:catalog")
INTERFACES = ("public", "internal", "admin")
DEFAULT_REGION = "RegionOne"


def region_aggregate_id(region_id: str) -> UUID:
    """A region's id is any text the operator chose; its aggregate's is derived from it."""
    return uuid5(_NS, f"region\x00{region_id}")


def seeded_id(kind: str, *parts: str) -> str:
    """Ids of what the first run seeds: the same in every deployment, so seeding twice adds nothing."""
    return uuid5(_NS, "\x00".join(("seed", kind, *parts))).hex


class Region(Aggregate):
    """A region of the service catalog, maybe inside a parent region."""

    @staticmethod
    def create_id(region_id: str, **_: object) -> UUID:
        return region_aggregate_id(region_id)

    class Created(Aggregate.Created):
        """A region of the service catalog was created. Its aggregate's id is derived from region_id."""

        region_id: str
        description: str
        parent_region_id: str | None

    @event(Created)
    def __init__(self, region_id: str, description: str, parent_region_id: str | None) -> None:
        self.region_id = region_id
        self.description = description
        self.parent_region_id = parent_region_id
        self.deleted = False

    def update(self, *, description: str | None = None, parent_region_id: str | None = None) -> None:
        new = (
            self.description if description is None else description,
            self.parent_region_id if parent_region_id is None else parent_region_id,
        )
        if new[1] == self.region_id:
            raise InvalidInput("Invalid input for field 'parent_region_id': not the region itself.")
        if new != (self.description, self.parent_region_id):
            self._updated(description=new[0], parent_region_id=new[1])

    class Updated(Aggregate.Event):
        """The region's description or parent changed (its whole new state)."""

        description: str
        parent_region_id: str | None

    @event(Updated)
    def _updated(self, description: str, parent_region_id: str | None) -> None:
        self.description = description
        self.parent_region_id = parent_region_id

    def delete(self) -> None:
        self._deleted()

    class Deleted(Aggregate.Event):
        """The region was deleted."""

    @event(Deleted)
    def _deleted(self) -> None:
        self.deleted = True


class Service(Aggregate):
    """A service of the service catalog (compute, identity, image, placement, ...)."""

    @staticmethod
    def create_id(service_id: str, **_: object) -> UUID:
        return UUID(hex=service_id)

    class Created(Aggregate.Created):
        """A service was added to the catalog."""

        service_id: str
        type: str
        name: str
        description: str
        enabled: bool

    @event(Created)
    def __init__(self, service_id: str, type: str, name: str, description: str, enabled: bool) -> None:
        self.service_id = service_id
        self.type = type
        self.name = name
        self.description = description
        self.enabled = enabled
        self.deleted = False

    def update(self, changes: dict[str, Any]) -> None:
        """``changes``: any of type, name, description, enabled."""
        current = {
            "type": self.type,
            "name": self.name,
            "description": self.description,
            "enabled": self.enabled,
        }
        new = _merged(current, changes)
        if new != current:
            self._updated(**new)

    class Updated(Aggregate.Event):
        """The service changed (its whole new state)."""

        type: str
        name: str
        description: str
        enabled: bool

    @event(Updated)
    def _updated(self, type: str, name: str, description: str, enabled: bool) -> None:
        self.type = type
        self.name = name
        self.description = description
        self.enabled = enabled

    def delete(self) -> None:
        self._deleted()

    class Deleted(Aggregate.Event):
        """The service was deleted (its endpoints in the same append)."""

    @event(Deleted)
    def _deleted(self) -> None:
        self.deleted = True


class Endpoint(Aggregate):
    """One interface (public, internal, admin) of a service in a region, at a URL."""

    @staticmethod
    def create_id(endpoint_id: str, **_: object) -> UUID:
        return UUID(hex=endpoint_id)

    class Created(Aggregate.Created):
        """An endpoint of a service was added to the catalog. A url that is a path (/v2.1) is completed
        with the address the client called."""

        endpoint_id: str
        service_id: str
        interface: str
        url: str
        region_id: str | None
        enabled: bool

    @event(Created)
    def __init__(
        self,
        endpoint_id: str,
        service_id: str,
        interface: str,
        url: str,
        region_id: str | None,
        enabled: bool,
    ) -> None:
        self.endpoint_id = endpoint_id
        self.service_id = service_id
        self.interface = interface
        self.url = url
        self.region_id = region_id
        self.enabled = enabled
        self.deleted = False

    @classmethod
    def create(
        cls, endpoint_id: str, service_id: str, interface: str, url: str, region_id: str | None, enabled: bool
    ) -> Endpoint:
        _check_interface(interface)
        return cls(
            endpoint_id=endpoint_id,
            service_id=service_id,
            interface=interface,
            url=url,
            region_id=region_id,
            enabled=enabled,
        )

    def update(self, changes: dict[str, Any]) -> None:
        """``changes``: any of service_id, interface, url, region_id, enabled."""
        current = {
            "service_id": self.service_id,
            "interface": self.interface,
            "url": self.url,
            "region_id": self.region_id,
            "enabled": self.enabled,
        }
        new = _merged(current, changes)
        _check_interface(new["interface"])
        if new != current:
            self._updated(**new)

    class Updated(Aggregate.Event):
        """The endpoint changed (its whole new state)."""

        service_id: str
        interface: str
        url: str
        region_id: str | None
        enabled: bool

    @event(Updated)
    def _updated(
        self, service_id: str, interface: str, url: str, region_id: str | None, enabled: bool
    ) -> None:
        self.service_id = service_id
        self.interface = interface
        self.url = url
        self.region_id = region_id
        self.enabled = enabled

    def delete(self) -> None:
        self._deleted()

    class Deleted(Aggregate.Event):
        """The endpoint was deleted."""

    @event(Deleted)
    def _deleted(self) -> None:
        self.deleted = True


def _merged(current: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``current`` with the fields ``changes`` gives (others, and None values, ignored)."""
    return {**current, **{k: v for k, v in changes.items() if k in current and v is not None}}


def _check_interface(interface: str) -> None:
    if interface not in INTERFACES:
        raise InvalidInput(f"Invalid input for field 'interface': one of {', '.join(INTERFACES)}.")
