"""Providers that are not compute hosts (``commands.provider.ResourceProvider``): Placement's POST,
PUT and DELETE of /resource_providers. A provider's name is unique among providers, compute hosts'
included; its parent exists and is not itself nor one of its descendants."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import EllipsisType
from uuid import UUID

from commands.errors import InvalidInput, NotFound
from commands.host import Host, host_aggregate_id
from commands.provider import CannotDeleteParent, DuplicateProvider, ResourceProvider
from commands.providers import CONFLICT, loaders
from commands.registry import Registry
from commands.resource_provider import Provider, ProviderInUse
from commands.unit_of_work import UnitOfWork, exists, retried


@dataclass(frozen=True)
class CreateProvider:
    """Create a provider (POST /resource_providers), under ``parent_uuid`` if given."""

    provider_uuid: UUID
    name: str
    parent_uuid: str | None = None


@dataclass(frozen=True)
class UpdateProvider:
    """Rename or reparent a provider (``parent_uuid`` ``...``: not given, kept)."""

    provider_uuid: str
    name: str
    parent_uuid: str | EllipsisType | None
    reparenting: bool


@dataclass(frozen=True)
class DeleteProvider:
    """Delete a provider; ``has_children``: the read model's answer whether a provider has any."""

    provider_uuid: str
    has_children: Callable[[str], bool]


def _take_name(uow: UnitOfWork, names: Registry, name: str, owner: str) -> None:
    if names.names.get(name, owner) != owner or exists(uow.app, host_aggregate_id(name)):
        raise DuplicateProvider(f"Conflicting resource provider name: {name} already exists.")
    names.take(name, owner, "Resource provider")


def _check_parent(uow: UnitOfWork, provider_uuid: str, parent_uuid: str, action: str) -> None:
    """The parent exists and is not ``provider_uuid`` nor one of its descendants (a loop)."""
    seen: str | None = parent_uuid
    while seen is not None:
        if seen == provider_uuid:
            raise InvalidInput(
                f"Unable to save resource provider {provider_uuid}: creating loop in the provider "
                "tree is not allowed."
            )
        try:
            seen = loaders.provider(uow, seen).parent_provider_uuid
        except NotFound:
            raise InvalidInput(
                f"Unable to {action} resource provider {provider_uuid}: parent provider UUID does not exist."
            ) from None


@retried(conflict=CONFLICT)
def create_provider(cmd: CreateProvider, uow: UnitOfWork) -> ResourceProvider:
    """One atomic append of the provider and its name."""
    if exists(uow.app, cmd.provider_uuid):
        raise DuplicateProvider(f"Conflicting resource provider uuid: {cmd.provider_uuid} already exists.")
    rp = ResourceProvider.create(cmd.provider_uuid, cmd.name, cmd.parent_uuid)
    if cmd.parent_uuid is not None:
        _check_parent(uow, str(cmd.provider_uuid), cmd.parent_uuid, "create")
    names = loaders.provider_names(uow)
    _take_name(uow, names, cmd.name, str(cmd.provider_uuid))
    uow.save(rp, names)
    return rp


@retried(conflict=CONFLICT)
def update_provider(cmd: UpdateProvider, uow: UnitOfWork) -> Provider:
    """A compute host's provider is named by its host and is a root: only its own name and no
    parent are accepted (nothing changes)."""
    p = loaders.provider(uow, cmd.provider_uuid)
    parent = p.parent_provider_uuid if cmd.parent_uuid is ... else cmd.parent_uuid
    if isinstance(p, Host):
        if (cmd.name, parent) != (p.hostname, None):
            raise InvalidInput(
                f"Unable to save resource provider {cmd.provider_uuid}: it is compute host "
                f"{p.hostname}'s provider, named by its host and a root."
            )
        return p
    names = loaders.provider_names(uow)
    if cmd.name != p.name:
        _take_name(uow, names, cmd.name, cmd.provider_uuid)
        names.release(p.name, cmd.provider_uuid)
    if parent is not None and parent != p.parent_provider_uuid:
        _check_parent(uow, cmd.provider_uuid, parent, "save")
    p.update(cmd.name, parent, reparenting=cmd.reparenting)
    uow.save(p, names)
    return p


@retried(conflict=CONFLICT)
def delete_provider(cmd: DeleteProvider, uow: UnitOfWork) -> None:
    """Refused while it has allocations or children. A compute host's provider is deleted with its
    host, never here (answered as a provider in use)."""
    p = loaders.provider(uow, cmd.provider_uuid)
    if isinstance(p, Host):
        raise ProviderInUse(
            f"Unable to delete resource provider {cmd.provider_uuid}: it is compute host {p.hostname}'s "
            "provider."
        )
    if cmd.has_children(cmd.provider_uuid):
        raise CannotDeleteParent(
            f"Unable to delete parent resource provider {cmd.provider_uuid}: It has child resource providers."
        )
    p.delete()
    names = loaders.provider_names(uow)
    names.release(p.name, cmd.provider_uuid)
    uow.save(p, names)
