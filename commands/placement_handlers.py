"""``PlacementHandlers``: Placement's use cases as the methods callers used before the bus, each one
line over it. It exists for the tests that still call it; new code sends the commands of
``commands.providers`` to the bus: ``bus.handle(SetTraits(rp, None, ["CUSTOM_FAST"]))``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import EllipsisType
from typing import Any
from uuid import UUID

from commands.bus import Facade
from commands.provider import ResourceProvider
from commands.providers.allocations import (
    ConsumerChange,
    DeleteAllocations,
    ReplaceAllocations,
)
from commands.providers.custom import CreateResourceClass, CreateTrait, DeleteResourceClass, DeleteTrait
from commands.providers.inventories import (
    DeleteInventory,
    SetAggregates,
    SetInventories,
    SetInventory,
    SetTraits,
)
from commands.providers.manage import CreateProvider, DeleteProvider, UpdateProvider
from commands.resource_provider import Provider

__all__ = ["ConsumerChange", "PlacementHandlers"]


class PlacementHandlers(Facade):
    """Placement's commands as methods over a bus of their own (for tests; see the module)."""

    def create_provider(self, provider_uuid: UUID, name: str, parent_uuid: str | None) -> ResourceProvider:
        return self.handle(CreateProvider(provider_uuid, name, parent_uuid))  # type: ignore[no-any-return]

    def update_provider(
        self, provider_uuid: str, name: str, parent_uuid: str | EllipsisType | None, *, reparenting: bool
    ) -> Provider:
        return self.handle(UpdateProvider(provider_uuid, name, parent_uuid, reparenting))  # type: ignore[no-any-return]

    def delete_provider(self, provider_uuid: str, has_children: Callable[[str], bool]) -> None:
        self.handle(DeleteProvider(provider_uuid, has_children))

    def set_inventories(
        self, provider_uuid: str, generation: int | None, inventories: dict[str, dict[str, Any]]
    ) -> tuple[Provider, int]:
        return self.handle(SetInventories(provider_uuid, generation, inventories))  # type: ignore[no-any-return]

    def set_inventory(
        self, provider_uuid: str, generation: int | None, resource_class: str, fields: dict[str, Any]
    ) -> tuple[Provider, int]:
        return self.handle(SetInventory(provider_uuid, generation, resource_class, fields))  # type: ignore[no-any-return]

    def delete_inventory(
        self, provider_uuid: str, generation: int | None, resource_class: str
    ) -> tuple[Provider, int]:
        return self.handle(DeleteInventory(provider_uuid, generation, resource_class))  # type: ignore[no-any-return]

    def set_traits(
        self, provider_uuid: str, generation: int | None, traits: list[str]
    ) -> tuple[Provider, int]:
        return self.handle(SetTraits(provider_uuid, generation, traits))  # type: ignore[no-any-return]

    def set_aggregates(
        self, provider_uuid: str, generation: int | None, aggregates: list[str]
    ) -> tuple[Provider, int]:
        return self.handle(SetAggregates(provider_uuid, generation, aggregates))  # type: ignore[no-any-return]

    def create_resource_class(self, name: str) -> bool:
        return self.handle(CreateResourceClass(name))  # type: ignore[no-any-return]

    def create_trait(self, name: str) -> bool:
        return self.handle(CreateTrait(name))  # type: ignore[no-any-return]

    def delete_resource_class(self, name: str, in_use: Callable[[str], bool]) -> None:
        self.handle(DeleteResourceClass(name, in_use))

    def delete_trait(self, name: str, in_use: Callable[[str], bool]) -> None:
        self.handle(DeleteTrait(name, in_use))

    def put_allocations(
        self,
        consumer_uuid: str,
        allocations: Mapping[str, Mapping[str, int]],
        *,
        consumer_generation: int | None,
        project_id: str,
        user_id: str,
        consumer_type: str = "INSTANCE",
        check_generation: bool = True,
    ) -> int:
        change = ConsumerChange(
            consumer_uuid,
            allocations,
            consumer_generation,
            project_id,
            user_id,
            consumer_type,
            check_generation,
        )
        return self.replace_allocations([change])

    def replace_allocations(self, changes: Sequence[ConsumerChange]) -> int:
        return self.handle(ReplaceAllocations(tuple(changes)))  # type: ignore[no-any-return]

    def delete_allocations(self, consumer_uuid: str) -> int:
        return self.handle(DeleteAllocations(consumer_uuid))  # type: ignore[no-any-return]
