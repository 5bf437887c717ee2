"""Placement's own aggregates: a consumer's allocations (``Consumer``) and the catalogue of custom
resource classes and traits (``PlacementCatalog``). Their use cases are in ``commands.providers``.

A provider is a compute host (``commands.host.Host``) or any other provider operators created
(``commands.provider.ResourceProvider``); on a host, the scheduler's claims and these allocations
are events on the same aggregate, checked against the same inventories. A consumer's allocations
across providers are one atomic append (the ``Consumer`` and every provider it touches), each under
its aggregate's optimistic-concurrency check: Placement's generations, enforced by the log.
"""

from __future__ import annotations

import re
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from commands.errors import ConflictingState, InvalidInput, NotFound
from commands.resource_provider import (
    STANDARD_CLASSES,
    ProviderGenerationConflict,
)

_NS = uuid5(NAMESPACE_URL, "urn:stratus:placement-consumer")


def consumer_aggregate_id(consumer_uuid: str) -> UUID:
    return uuid5(_NS, consumer_uuid)


_CUSTOM = re.compile(r"^CUSTOM_[A-Z0-9_]+$")


class TraitInUse(ConflictingState):
    """A trait some provider has cannot be deleted (Placement: 409)."""


class ConsumerGenerationConflict(ProviderGenerationConflict):
    """Placement: 409 placement.concurrent_update, for the consumer's generation."""


class Consumer(Aggregate):
    """A Placement consumer that is not an instance of this cloud (instances hold Host claims)."""

    @staticmethod
    def create_id(consumer_uuid: str, project_id: str, user_id: str, consumer_type: str) -> UUID:
        return consumer_aggregate_id(consumer_uuid)

    class Created(Aggregate.Created):
        """A Placement consumer (one that is not an instance of this cloud) first allocated resources."""

        consumer_uuid: str
        project_id: str
        user_id: str
        consumer_type: str

    @event(Created)
    def __init__(self, consumer_uuid: str, project_id: str, user_id: str, consumer_type: str) -> None:
        self.consumer_uuid = consumer_uuid
        self.project_id = project_id
        self.user_id = user_id
        self.consumer_type = consumer_type
        self.allocations: dict[str, dict[str, int]] = {}  # provider uuid -> resource class -> amount
        self.generation = 0

    @property
    def active(self) -> bool:
        return bool(self.allocations)

    def check_generation(self, generation: int | None) -> None:
        expected = self.generation if self.active else None
        if generation != expected:
            raise ConsumerGenerationConflict(
                f"consumer generation conflict - expected {expected} but got {generation}"
            )

    def replace(self, allocations: dict[str, dict[str, int]], project_id: str, user_id: str) -> None:
        self._replaced(allocations, project_id, user_id)

    class AllocationsReplaced(Aggregate.Event):
        """The consumer's allocations were replaced (empty: all removed), appended atomically with the
        providers' ResourcesAllocated/AllocationRemoved. Bumps the consumer generation."""

        allocations: dict[str, dict[str, int]]
        project_id: str
        user_id: str

    @event(AllocationsReplaced)
    def _replaced(self, allocations: dict[str, dict[str, int]], project_id: str, user_id: str) -> None:
        self.allocations = allocations
        self.project_id = project_id
        self.user_id = user_id
        self.generation += 1


_CATALOG_ID = uuid5(NAMESPACE_URL, "urn:stratus:placement-catalog")


class PlacementCatalog(Aggregate):
    """The custom resource classes and traits operators created (Placement's ``/resource_classes``
    and ``/traits/{name}``); the standard ones are known without being created."""

    @staticmethod
    def create_id() -> UUID:
        return _CATALOG_ID

    class Opened(Aggregate.Created):
        """The catalogue of custom resource classes and traits was opened (its first change)."""

    @event(Opened)
    def __init__(self) -> None:
        self.resource_classes: list[str] = []
        self.traits: list[str] = []

    def add_resource_class(self, name: str) -> bool:
        """False when it exists already."""
        if not _CUSTOM.match(name):
            raise InvalidInput(
                f"Invalid resource class name {name!r}: a custom class starts with CUSTOM_ and has only "
                "A-Z, 0-9 and _"
            )
        if name in self.resource_classes:
            return False
        self._resource_class_created(name)
        return True

    class ResourceClassCreated(Aggregate.Event):
        """An operator created a custom resource class (PUT or POST /placement/resource_classes)."""

        name: str

    @event(ResourceClassCreated)
    def _resource_class_created(self, name: str) -> None:
        self.resource_classes = sorted({*self.resource_classes, name})

    def remove_resource_class(self, name: str) -> None:
        if name in STANDARD_CLASSES:
            raise InvalidInput(f"Cannot delete standard resource class {name}.")
        if name not in self.resource_classes:
            raise NotFound(f"No such resource class {name}.")
        self._resource_class_deleted(name)

    class ResourceClassDeleted(Aggregate.Event):
        """An operator deleted a custom resource class no inventory used."""

        name: str

    @event(ResourceClassDeleted)
    def _resource_class_deleted(self, name: str) -> None:
        self.resource_classes = [c for c in self.resource_classes if c != name]

    def add_trait(self, name: str) -> bool:
        """False when it exists already."""
        if not _CUSTOM.match(name) or len(name) > 255:
            raise InvalidInput(
                "The trait is invalid. A valid trait must be no longer than 255 characters, start with the "
                'prefix "CUSTOM_" and use following characters: "A"-"Z", "0"-"9" and "_"'
            )
        if name in self.traits:
            return False
        self._trait_created(name)
        return True

    class TraitCreated(Aggregate.Event):
        """An operator created a custom trait (PUT /placement/traits/{name})."""

        name: str

    @event(TraitCreated)
    def _trait_created(self, name: str) -> None:
        self.traits = sorted({*self.traits, name})

    def remove_trait(self, name: str) -> None:
        if not name.startswith("CUSTOM_"):
            raise InvalidInput(f"Cannot delete standard trait {name}.")
        if name not in self.traits:
            raise NotFound(f"No such trait(s): {name}.")
        self._trait_deleted(name)

    class TraitDeleted(Aggregate.Event):
        """An operator deleted a custom trait no provider had."""

        name: str

    @event(TraitDeleted)
    def _trait_deleted(self, name: str) -> None:
        self.traits = [t for t in self.traits if t != name]
