"""Changing a flavor: its extra specs, its description, and which projects may use a private one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from commands import loaders
from commands.unit_of_work import Result, UnitOfWork, retried


@dataclass(frozen=True)
class SetFlavorExtraSpecs:
    """Set (add or replace) extra specs of a flavor."""

    flavorid: str
    specs: Mapping[str, str]


@dataclass(frozen=True)
class DeleteFlavorExtraSpec:
    """Remove one extra spec of a flavor."""

    flavorid: str
    key: str


@dataclass(frozen=True)
class DescribeFlavor:
    """Change a flavor's description (None: none)."""

    flavorid: str
    description: str | None


@dataclass(frozen=True)
class AddFlavorAccess:
    """Let a project use a private flavor."""

    flavorid: str
    project_id: str


@dataclass(frozen=True)
class RemoveFlavorAccess:
    """Stop a project using a private flavor."""

    flavorid: str
    project_id: str


@retried
def set_extra_specs(cmd: SetFlavorExtraSpecs, uow: UnitOfWork) -> Result:
    """Record the specs on the flavor."""
    flavor = loaders.flavor(uow, cmd.flavorid)
    flavor.set_extra_specs(dict(cmd.specs))
    return Result(cmd.flavorid, uow.save(flavor))


@retried
def delete_extra_spec(cmd: DeleteFlavorExtraSpec, uow: UnitOfWork) -> Result:
    """Remove the spec from the flavor."""
    flavor = loaders.flavor(uow, cmd.flavorid)
    flavor.delete_extra_spec(cmd.key)
    return Result(cmd.flavorid, uow.save(flavor))


@retried
def describe(cmd: DescribeFlavor, uow: UnitOfWork) -> Result:
    """Record the flavor's new description."""
    flavor = loaders.flavor(uow, cmd.flavorid)
    flavor.describe(cmd.description)
    return Result(cmd.flavorid, uow.save(flavor))


@retried
def add_access(cmd: AddFlavorAccess, uow: UnitOfWork) -> Result:
    """Grant the project access to the flavor."""
    flavor = loaders.flavor(uow, cmd.flavorid)
    flavor.add_access(cmd.project_id)
    return Result(cmd.flavorid, uow.save(flavor))


@retried
def remove_access(cmd: RemoveFlavorAccess, uow: UnitOfWork) -> Result:
    """Withdraw the project's access to the flavor."""
    flavor = loaders.flavor(uow, cmd.flavorid)
    flavor.remove_access(cmd.project_id)
    return Result(cmd.flavorid, uow.save(flavor))
