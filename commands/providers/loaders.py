"""The decision state every Placement handler loads: a provider, a consumer, the catalogue of custom
resource classes and traits, and the registry of providers' names."""

from __future__ import annotations

from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate

from commands.errors import NotFound
from commands.host import Host
from commands.placement import _CATALOG_ID, Consumer, PlacementCatalog, consumer_aggregate_id
from commands.provider import ResourceProvider
from commands.registry import PROVIDER_NAMES, Registry, registry_id
from commands.unit_of_work import UnitOfWork


def provider(uow: UnitOfWork, provider_uuid: str) -> Host | ResourceProvider:
    """A compute host's provider or a live ``ResourceProvider``; 404 in Placement's words."""
    try:
        agg: Aggregate = uow.app.repository.get(UUID(provider_uuid))
    except (AggregateNotFoundError, ValueError):
        raise NotFound(f"No resource provider with uuid {provider_uuid} found") from None
    if isinstance(agg, Host) or (isinstance(agg, ResourceProvider) and not agg.deleted):
        return agg
    raise NotFound(f"No resource provider with uuid {provider_uuid} found")


def consumer(uow: UnitOfWork, consumer_uuid: str) -> Consumer | None:
    """The consumer's record (None: it never allocated)."""
    try:
        agg: Aggregate = uow.app.repository.get(consumer_aggregate_id(consumer_uuid))
    except AggregateNotFoundError:
        return None
    return agg if isinstance(agg, Consumer) else None


def placement_catalog(uow: UnitOfWork) -> PlacementCatalog:
    """The custom resource classes and traits operators created."""
    try:
        agg: Aggregate = uow.app.repository.get(_CATALOG_ID)
    except AggregateNotFoundError:
        return PlacementCatalog()
    assert isinstance(agg, PlacementCatalog)
    return agg


def provider_names(uow: UnitOfWork) -> Registry:
    """The registry of providers' names (unique among providers, compute hosts' included)."""
    try:
        agg: Aggregate = uow.app.repository.get(registry_id(PROVIDER_NAMES))
    except AggregateNotFoundError:
        return Registry(PROVIDER_NAMES)  # type: ignore[call-arg]
    assert isinstance(agg, Registry)
    return agg
