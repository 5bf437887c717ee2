"""Host aggregates and availability zones (Nova's os-aggregates): a host follows its aggregate's zone
in the same atomic append that changes it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from uuid import UUID

from eventsourcing.domain import Aggregate

from commands import loaders
from commands.errors import NotFound
from commands.host import Host, host_aggregate_id
from commands.host_aggregate import AZ_KEY, HostAggregate
from commands.registry import AGGREGATE_NAMES
from commands.unit_of_work import Result, UnitOfWork, retried


@dataclass(frozen=True)
class CreateHostAggregate:
    """Create a host aggregate (and its zone, if named)."""

    name: str
    availability_zone: str | None = None


@dataclass(frozen=True)
class UpdateHostAggregate:
    """Rename a host aggregate or change its zone."""

    aggregate_id: str
    name: str | None = None
    # Only applied when ``set_zone``: None then removes the zone.
    availability_zone: str | None = None
    set_zone: bool = False


@dataclass(frozen=True)
class SetHostAggregateMetadata:
    """Set metadata of a host aggregate (a None value removes the key)."""

    aggregate_id: str
    metadata: Mapping[str, str | None]


@dataclass(frozen=True)
class AddHostToAggregate:
    """Add a compute host to a host aggregate."""

    aggregate_id: str
    hostname: str


@dataclass(frozen=True)
class RemoveHostFromAggregate:
    """Remove a compute host from a host aggregate."""

    aggregate_id: str
    hostname: str


@dataclass(frozen=True)
class DeleteHostAggregate:
    """Delete an (empty) host aggregate."""

    aggregate_id: str


def host_aggregate(uow: UnitOfWork, aggregate_id: str) -> HostAggregate:
    """The host aggregate, unless deleted."""
    what = f"Aggregate {aggregate_id}"
    try:
        uid = UUID(aggregate_id)
    except ValueError:
        raise NotFound(f"{what} could not be found.") from None
    agg = uow.get(HostAggregate, uid, what)
    agg.ensure_exists()
    return agg


def create_host_aggregate(cmd: CreateHostAggregate, uow: UnitOfWork, new_id: Callable[[], UUID]) -> Result:
    """A new aggregate with a new name (numbered by the names registry, as Nova's integer ids)."""
    return _create(cmd, uow, new_id())


@retried
def _create(cmd: CreateHostAggregate, uow: UnitOfWork, new_id: UUID) -> Result:
    names = loaders.registry(uow, AGGREGATE_NAMES)
    number = names.take(cmd.name, str(new_id), "Aggregate")
    agg = HostAggregate.create(new_id, cmd.name, number, cmd.availability_zone)
    return Result(str(new_id), uow.save(agg, names))


@retried
def update_host_aggregate(cmd: UpdateHostAggregate, uow: UnitOfWork) -> Result:
    """A new name (unique) and, with ``set_zone``, a new zone its hosts follow."""
    agg = host_aggregate(uow, cmd.aggregate_id)
    changed: list[Aggregate] = [agg]
    if cmd.name is not None and cmd.name != agg.name:
        names = loaders.registry(uow, AGGREGATE_NAMES)
        names.take(cmd.name, cmd.aggregate_id, "Aggregate")
        names.release(agg.name, cmd.aggregate_id)
        agg.rename(cmd.name)
        changed.append(names)
    if cmd.set_zone:
        changed += _set_metadata(uow, agg, {AZ_KEY: cmd.availability_zone})
    return Result(cmd.aggregate_id, uow.save(*changed))


@retried
def set_metadata(cmd: SetHostAggregateMetadata, uow: UnitOfWork) -> Result:
    """Set the metadata (the zone too, if it names one)."""
    agg = host_aggregate(uow, cmd.aggregate_id)
    return Result(cmd.aggregate_id, uow.save(agg, *_set_metadata(uow, agg, dict(cmd.metadata))))


def _set_metadata(uow: UnitOfWork, agg: HostAggregate, metadata: dict[str, str | None]) -> list[Aggregate]:
    """Set the metadata; when the zone changes, each member host follows it (same append)."""
    before = agg.availability_zone
    agg.set_metadata(metadata)
    if agg.availability_zone == before:
        return []
    hosts = [loaders.host(uow, h) for h in agg.hosts]
    for host in hosts:
        host.assign_zone(str(agg.id), agg.availability_zone)
    return list(hosts)


@retried
def add_host(cmd: AddHostToAggregate, uow: UnitOfWork) -> Result:
    """The host joins the aggregate and its zone."""
    agg = host_aggregate(uow, cmd.aggregate_id)
    host = loaders.host(uow, cmd.hostname)
    agg.add_host(cmd.hostname)
    host.assign_zone(cmd.aggregate_id, agg.availability_zone)
    return Result(cmd.aggregate_id, uow.save(agg, host))


@retried
def remove_host(cmd: RemoveHostFromAggregate, uow: UnitOfWork) -> Result:
    """The host leaves the aggregate (a host no longer registered: only the aggregate changes)."""
    agg = host_aggregate(uow, cmd.aggregate_id)
    agg.remove_host(cmd.hostname)
    changed: list[Aggregate] = [agg]
    host = uow.find(Host, host_aggregate_id(cmd.hostname))
    if host is not None:
        host.leave_aggregate(cmd.aggregate_id)
        changed.append(host)
    return Result(cmd.aggregate_id, uow.save(*changed))


@retried
def delete_host_aggregate(cmd: DeleteHostAggregate, uow: UnitOfWork) -> Result:
    """The aggregate is deleted and its name released."""
    agg = host_aggregate(uow, cmd.aggregate_id)
    agg.delete()
    names = loaders.registry(uow, AGGREGATE_NAMES)
    names.release(agg.name, cmd.aggregate_id)
    return Result(cmd.aggregate_id, uow.save(agg, names))
