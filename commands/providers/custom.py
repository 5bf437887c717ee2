"""Custom resource classes and traits (the ``PlacementCatalog``): created once, deleted while no
provider uses them (Placement's PUT and DELETE of /resource_classes/{name} and /traits/{name})."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from commands.placement import PlacementCatalog, TraitInUse
from commands.providers import CONFLICT, loaders
from commands.resource_provider import InventoryInUse
from commands.unit_of_work import UnitOfWork, retried


@dataclass(frozen=True)
class CreateResourceClass:
    """Create a custom resource class (the handler answers True when created, False when it was)."""

    name: str


@dataclass(frozen=True)
class CreateTrait:
    """Create a custom trait (the handler answers True when created, False when it was)."""

    name: str


@dataclass(frozen=True)
class DeleteResourceClass:
    """Delete a custom resource class; ``in_use``: whether any provider has an inventory of it."""

    name: str
    in_use: Callable[[str], bool]


@dataclass(frozen=True)
class DeleteTrait:
    """Delete a custom trait; ``in_use``: whether any provider has it."""

    name: str
    in_use: Callable[[str], bool]


@retried(conflict=CONFLICT)
def _catalog_change(cmd: object, uow: UnitOfWork, change: Callable[[PlacementCatalog], bool]) -> bool:
    catalog = loaders.placement_catalog(uow)
    changed = change(catalog)
    if catalog.pending_events:
        uow.save(catalog)
    return changed


def create_resource_class(cmd: CreateResourceClass, uow: UnitOfWork) -> bool:
    return _catalog_change(cmd, uow, lambda c: c.add_resource_class(cmd.name))


def create_trait(cmd: CreateTrait, uow: UnitOfWork) -> bool:
    return _catalog_change(cmd, uow, lambda c: c.add_trait(cmd.name))


def delete_resource_class(cmd: DeleteResourceClass, uow: UnitOfWork) -> None:
    """409 while a provider has an inventory of the class, as Placement."""

    def change(c: PlacementCatalog) -> bool:
        c.remove_resource_class(cmd.name)
        if cmd.in_use(cmd.name):
            raise InventoryInUse(
                f"Unable to delete resource class {cmd.name}. The class is in use in inventory."
            )
        return True

    _catalog_change(cmd, uow, change)


def delete_trait(cmd: DeleteTrait, uow: UnitOfWork) -> None:
    def change(c: PlacementCatalog) -> bool:
        c.remove_trait(cmd.name)
        if cmd.in_use(cmd.name):
            raise TraitInUse(f"The trait {cmd.name} is in use by a resource provider.")
        return True

    _catalog_change(cmd, uow, change)
