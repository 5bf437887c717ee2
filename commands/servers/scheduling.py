"""Scheduling: the scheduler's choice of a host for a server, recorded with the host's claim of the
server's resources in one atomic append (so no host is ever promised more than it has)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from eventsourcing.domain import Aggregate

from commands import loaders
from commands.host import Host, Resources
from commands.instance import Instance
from commands.unit_of_work import Result, UnitOfWork, retried
from stratus.context import CommandContext, acting_per_event


@dataclass(frozen=True)
class PlaceInstance:
    """Run the server on ``hostname``."""

    server_id: str
    hostname: str


@dataclass(frozen=True)
class PlaceInstances:
    """Run several servers (a multi-create) where each says: all of them, or none."""

    placements: tuple[PlaceInstance, ...]


@dataclass(frozen=True)
class RecordPlacements:
    """Append the claims and placements a scheduler decided in one pass over many requests: each
    event stamped with the context of the request it answers (by originator id and version)."""

    aggregates: Sequence[Aggregate]
    contexts: Mapping[tuple[str, int], CommandContext]


@retried
def place_instance(cmd: PlaceInstance, uow: UnitOfWork) -> Result:
    """Claim the instance's resources on a host and record the placement, atomically."""
    inst = loaders.instance(uow, cmd.server_id)
    host = loaders.host(uow, cmd.hostname)
    host.claim(inst.server_id, Resources.of_flavor(inst.flavor))
    inst.schedule(host.hostname)
    group = loaders.server_group_of(uow, inst.server_id)
    if group is not None:  # a hard (anti-)affinity refuses the host here, under its own check
        group.record_placement(inst.server_id, host.hostname)
    return Result(cmd.server_id, uow.save(host, inst, *([group] if group else [])))


@retried
def place_instances(cmd: PlaceInstances, uow: UnitOfWork) -> Result:
    """Place several instances in one atomic append."""
    hosts: dict[str, Host] = {}
    instances: list[Instance] = []
    for placement in cmd.placements:
        inst = loaders.instance(uow, placement.server_id)
        host = hosts.get(placement.hostname) or loaders.host(uow, placement.hostname)
        hosts[placement.hostname] = host
        host.claim(inst.server_id, Resources.of_flavor(inst.flavor))
        inst.schedule(host.hostname)
        instances.append(inst)
    return Result(cmd.placements[-1].server_id, uow.save(*hosts.values(), *instances))


def record_placements(cmd: RecordPlacements, uow: UnitOfWork) -> int:
    """The log position of the append. Raises ``IntegrityError`` if any aggregate moved on meanwhile
    (the scheduler decides again: not retried here)."""
    with acting_per_event(cmd.contexts):
        return uow.save(*cmd.aggregates)


def known_version(uow: UnitOfWork, aggregate_id: UUID) -> int | None:
    """The version of the aggregate the event store last saw stored (a hint; None: not known)."""
    return uow.app.recorder.known_version(aggregate_id)
