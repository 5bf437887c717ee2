"""Changing a flavor: its extra specs, its description, and which projects may use a private one.

Each loads the flavor, makes one domain call and appends (``_changed``, one unit of work).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from commands import loaders
from commands.flavor import Flavor
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
def _changed(flavorid: str, uow: UnitOfWork, change: Callable[[Flavor], None]) -> Result:
    """Load the flavor, make the one domain call ``change``, append."""
    flavor = loaders.flavor(uow, flavorid)
    change(flavor)
    return Result(flavorid, uow.save(flavor))


def set_extra_specs(cmd: SetFlavorExtraSpecs, uow: UnitOfWork) -> Result:
    """Record the specs on the flavor."""
    return _changed(cmd.flavorid, uow, lambda flavor: flavor.set_extra_specs(dict(cmd.specs)))


def delete_extra_spec(cmd: DeleteFlavorExtraSpec, uow: UnitOfWork) -> Result:
    """Remove the spec from the flavor."""
    return _changed(cmd.flavorid, uow, lambda flavor: flavor.delete_extra_spec(cmd.key))


def describe(cmd: DescribeFlavor, uow: UnitOfWork) -> Result:
    """Record the flavor's new description."""
    return _changed(cmd.flavorid, uow, lambda flavor: flavor.describe(cmd.description))


def add_access(cmd: AddFlavorAccess, uow: UnitOfWork) -> Result:
    """Grant the project access to the flavor."""
    return _changed(cmd.flavorid, uow, lambda flavor: flavor.add_access(cmd.project_id))


def remove_access(cmd: RemoveFlavorAccess, uow: UnitOfWork) -> Result:
    """Withdraw the project's access to the flavor."""
    return _changed(cmd.flavorid, uow, lambda flavor: flavor.remove_access(cmd.project_id))
