"""A provider's inventories, traits and aggregates, each set under its generation (Placement's PUT
and DELETE of /resource_providers/{uuid}/inventories, /traits and /aggregates)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from commands.errors import InvalidInput, NotFound
from commands.placement import _CUSTOM
from commands.providers import CONFLICT, loaders
from commands.resource_provider import STANDARD_CLASSES, Provider
from commands.unit_of_work import UnitOfWork, retried


@dataclass(frozen=True)
class SetInventories:
    """Replace a provider's inventories."""

    provider_uuid: str
    generation: int | None
    inventories: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class SetInventory:
    """Set one resource class's inventory of a provider."""

    provider_uuid: str
    generation: int | None
    resource_class: str
    fields: dict[str, Any]


@dataclass(frozen=True)
class DeleteInventory:
    """Remove one resource class's inventory of a provider."""

    provider_uuid: str
    generation: int | None
    resource_class: str


@dataclass(frozen=True)
class SetTraits:
    """Replace a provider's traits (a custom trait must have been created first)."""

    provider_uuid: str
    generation: int | None
    traits: list[str]


@dataclass(frozen=True)
class SetAggregates:
    """Replace the aggregates (uuids) a provider is in."""

    provider_uuid: str
    generation: int | None
    aggregates: list[str]


@retried(conflict=CONFLICT)
def _change(cmd: Any, uow: UnitOfWork, change: Callable[[Provider], None]) -> tuple[Provider, int]:
    provider = loaders.provider(uow, cmd.provider_uuid)
    change(provider)
    return provider, uow.save(provider)


def _known_classes(uow: UnitOfWork, provider_uuid: str, classes: Iterable[str]) -> None:
    """Placement refuses an inventory of a custom class nobody created (400)."""
    created = loaders.placement_catalog(uow).resource_classes
    unknown = [c for c in classes if c not in STANDARD_CLASSES and _CUSTOM.match(c) and c not in created]
    if unknown:
        raise InvalidInput(
            f"Unknown resource class in inventory for resource provider {provider_uuid}: {unknown[0]}"
        )


def set_inventories(cmd: SetInventories, uow: UnitOfWork) -> tuple[Provider, int]:
    _known_classes(uow, cmd.provider_uuid, cmd.inventories)
    return _change(cmd, uow, lambda p: p.set_inventories(cmd.generation, cmd.inventories))


def set_inventory(cmd: SetInventory, uow: UnitOfWork) -> tuple[Provider, int]:
    _known_classes(uow, cmd.provider_uuid, [cmd.resource_class])
    return _change(
        cmd,
        uow,
        lambda p: p.set_inventories(cmd.generation, {**p.inventories, cmd.resource_class: cmd.fields}),
    )


def delete_inventory(cmd: DeleteInventory, uow: UnitOfWork) -> tuple[Provider, int]:
    def change(p: Provider) -> None:
        if cmd.resource_class not in p.inventories:
            raise NotFound(
                f"No inventory of class {cmd.resource_class} found for resource provider {cmd.provider_uuid}"
            )
        p.set_inventories(
            cmd.generation, {rc: i for rc, i in p.inventories.items() if rc != cmd.resource_class}
        )

    return _change(cmd, uow, change)


def set_traits(cmd: SetTraits, uow: UnitOfWork) -> tuple[Provider, int]:
    """A custom trait must have been created first (``PUT /traits/{name}``), as in Placement."""
    created = loaders.placement_catalog(uow).traits
    unknown = sorted({t for t in cmd.traits if t.startswith("CUSTOM_") and t not in created})
    if unknown:
        raise InvalidInput(f"No such trait(s): {', '.join(unknown)}")
    return _change(cmd, uow, lambda p: p.set_traits(cmd.generation, cmd.traits))


def set_aggregates(cmd: SetAggregates, uow: UnitOfWork) -> tuple[Provider, int]:
    for a in cmd.aggregates:
        try:
            UUID(a)
        except ValueError:
            raise InvalidInput(f"Invalid aggregate uuid {a!r}") from None
    return _change(cmd, uow, lambda p: p.set_provider_aggregates(cmd.generation, cmd.aggregates))
