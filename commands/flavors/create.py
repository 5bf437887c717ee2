"""Creating and deleting flavors: a flavor's id and its name are each unique (the name through the
``flavor-names`` registry, in the same atomic append)."""

from __future__ import annotations

from dataclasses import dataclass

from eventsourcing.persistence import IntegrityError

from commands import loaders
from commands.errors import AlreadyExists
from commands.flavor import Flavor, flavor_aggregate_id
from commands.registry import FLAVOR_NAMES
from commands.unit_of_work import Result, UnitOfWork, retried


@dataclass(frozen=True)
class CreateFlavor:
    """Create a flavor (Nova's POST /flavors)."""

    flavorid: str
    name: str
    vcpus: int
    ram: int
    disk: int
    ephemeral: int = 0
    swap: int = 0
    rxtx_factor: float = 1.0
    is_public: bool = True
    description: str | None = None


@dataclass(frozen=True)
class DefineFlavor(CreateFlavor):
    """Create a flavor whose id is new, without claiming its name (seeding a deployment, tests)."""


@dataclass(frozen=True)
class DeleteFlavor:
    """Delete a flavor; its name is free again."""

    flavorid: str


@retried
def create_flavor(cmd: CreateFlavor, uow: UnitOfWork) -> Result:
    """A flavor whose id and name are both new (Nova answers 409 for either)."""
    if uow.find(Flavor, flavor_aggregate_id(cmd.flavorid)) is not None:
        raise AlreadyExists(f"Flavor with ID {cmd.flavorid} already exists.")
    flavor = Flavor.create(**vars(cmd))
    names = loaders.registry(uow, FLAVOR_NAMES)
    names.take(cmd.name, cmd.flavorid, "Flavor")
    # The flavor's event last: the position returned is the flavor's creation.
    return Result(cmd.flavorid, uow.save(names, flavor))


def define_flavor(cmd: DefineFlavor, uow: UnitOfWork) -> Result:
    """A flavor whose id is new."""
    flavor = Flavor.create(**vars(cmd))
    try:
        return Result(cmd.flavorid, uow.save(flavor))
    except IntegrityError:
        raise AlreadyExists(f"Flavor with ID {cmd.flavorid} already exists.") from None


@retried
def delete_flavor(cmd: DeleteFlavor, uow: UnitOfWork) -> Result:
    """The flavor is deleted and its name released, together."""
    flavor = loaders.flavor(uow, cmd.flavorid)
    flavor.delete()
    names = loaders.registry(uow, FLAVOR_NAMES)
    names.release(flavor.name, cmd.flavorid)
    return Result(cmd.flavorid, uow.save(flavor, names))
