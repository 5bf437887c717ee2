"""ResourceProvider: a Placement resource provider that is not a compute host.

Operators and Placement's other clients (osc-placement, Neutron, Cyborg) create providers for what
is not a hypervisor: sharing storage pools, bandwidth on a physical network, nested children of a
host (a GPU, a NIC). They take inventories, traits, aggregates and allocations by the same rules as
a host's provider (``commands.resource_provider.Provider``), recorded as their own events, so no
projection of compute hosts (hypervisors, services, the scheduler's view) ever sees them.

The provider's uuid is the aggregate's id; its name is unique among providers (hosts included),
kept by a ``Registry``. It knows its parent; its root is found by following parents.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from commands.errors import Conflict, InvalidInput
from commands.resource_provider import (
    Provider,
    ProviderInUse,
    allocated,
    allocation_removed,
    inventories_set,
    provider_aggregates_set,
    traits_set,
)

MAX_NAME = 200


class DuplicateProvider(Conflict):
    """Another provider has the name or the uuid (Placement: 409 placement.duplicate_name)."""

    code = "placement.duplicate_name"


class CannotDeleteParent(ProviderInUse):
    """A provider with children cannot be deleted (Placement: 409)."""

    code = "placement.resource_provider.cannot_delete_parent"


def check_name(name: str) -> None:
    if not name or len(name) > MAX_NAME:
        raise InvalidInput(f"Failed validating 'maxLength': a provider's name has 1 to {MAX_NAME} characters")


class ResourceProvider(Provider, Aggregate):
    """A Placement resource provider that is not a compute host (a sharing pool, a NIC, a GPU)."""

    class Created(Aggregate.Created):
        """A Placement resource provider that is not a compute host was created (POST /resource_providers):
        its uuid is the aggregate's id, its name unique among providers, its parent (null: a root)
        another provider. It starts with no inventories, traits or aggregates, at generation 0."""

        name: str
        parent_provider_uuid: str | None

    @event(Created)
    def __init__(self, name: str, parent_provider_uuid: str | None) -> None:
        self.name = name
        self.parent_provider_uuid = parent_provider_uuid
        self.inventories: dict[str, dict[str, Any]] = {}
        self.traits: list[str] = []
        self.provider_aggregates: list[str] = []
        self.allocations: dict[str, dict[str, int]] = {}
        self.generation = 0
        self.deleted = False

    @classmethod
    def create(cls, uuid: UUID, name: str, parent_provider_uuid: str | None) -> ResourceProvider:
        check_name(name)
        if parent_provider_uuid == str(uuid):
            raise InvalidInput(
                f'Unable to create resource provider "{name}", {uuid}: parent provider UUID cannot be same '
                "as UUID. Please set parent provider UUID to None if there is no parent."
            )
        return cls._create(cls.Created, id=uuid, name=name, parent_provider_uuid=parent_provider_uuid)  # type: ignore[attr-defined, no-any-return]

    @property
    def provider_name(self) -> str:
        return self.name

    def update(self, name: str, parent_provider_uuid: str | None, *, reparenting: bool) -> None:
        """Rename and (re)parent (Placement's PUT). Without ``reparenting`` (before 1.37) a parent can
        only be given to a root, never changed or taken away. The caller has checked that the parent
        exists and is not in this provider's subtree."""
        check_name(name)
        parent = self.parent_provider_uuid
        if parent is not None and parent_provider_uuid != parent and not reparenting:
            what = "re-parenting" if parent_provider_uuid is not None else "un-parenting"
            raise InvalidInput(
                f"Unable to save resource provider {self.id}: {what} a provider is not currently allowed."
            )
        if (name, parent_provider_uuid) != (self.name, parent):
            self._updated(name, parent_provider_uuid)

    class Updated(Aggregate.Event):
        """The provider was renamed or (re)parented (PUT /resource_providers/{uuid}); the generation is
        unchanged, as in Placement."""

        name: str
        parent_provider_uuid: str | None

    @event(Updated)
    def _updated(self, name: str, parent_provider_uuid: str | None) -> None:
        self.name = name
        self.parent_provider_uuid = parent_provider_uuid

    def delete(self) -> None:
        """Placement refuses to delete a provider something is allocated from; its inventories, traits
        and aggregates go with it. (Children are the caller's check: a provider does not list them.)"""
        if self.allocations:
            raise ProviderInUse(
                f"Unable to delete resource provider {self.id}: Resource provider has allocations."
            )
        self._deleted()

    class Deleted(Aggregate.Event):
        """The provider was deleted (DELETE /resource_providers/{uuid}) with its inventories, traits and
        aggregates; it had no allocations and no children."""

    @event(Deleted)
    def _deleted(self) -> None:
        self.deleted = True
        self.inventories, self.traits, self.provider_aggregates = {}, [], []

    class InventoriesSet(Aggregate.Event):
        """The provider's inventories were replaced: per resource class, total, reserved, min_unit,
        max_unit, step_size and allocation_ratio (capacity = int((total - reserved) *
        allocation_ratio)). Bumps the provider generation."""

        inventories: dict[str, dict[str, Any]]

    _inventories_set = event(InventoriesSet)(inventories_set)

    class TraitsSet(Aggregate.Event):
        """The provider's traits were replaced. Bumps the provider generation."""

        traits: list[str]

    _traits_set = event(TraitsSet)(traits_set)

    class ProviderAggregatesSet(Aggregate.Event):
        """The Placement aggregates (uuids) the provider is a member of were replaced. Bumps the provider
        generation."""

        aggregates: list[str]

    _provider_aggregates_set = event(ProviderAggregatesSet)(provider_aggregates_set)

    class ResourcesAllocated(Aggregate.Event):
        """A Placement consumer holds these amounts per resource class on the provider, replacing what it
        held. Appended atomically with the consumer's own event. Bumps the provider generation."""

        consumer_id: str
        resources: dict[str, int]

    _allocated = event(ResourcesAllocated)(allocated)

    class AllocationRemoved(Aggregate.Event):
        """A Placement consumer no longer holds anything on the provider. Bumps the provider generation."""

        consumer_id: str

    _allocation_removed = event(AllocationRemoved)(allocation_removed)
