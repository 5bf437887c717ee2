"""Reconciliation: what a host found of its guests, against what the log says of its servers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate

from commands import loaders
from commands.census import GuestCensus, census_id
from commands.instance import Instance
from commands.unit_of_work import UnitOfWork, retried


@dataclass(frozen=True)
class SyncPowerState:
    """What the host saw of a server's guest. ``observe``, when given, looks again once the server
    has been loaded, so that what is compared is never older than the log state it is compared
    with (a spawn or action finishing in between then makes the append conflict and re-decide)."""

    server_id: str
    observed: int
    missing: bool = False
    observe: Callable[[], tuple[int, bool]] | None = None


@dataclass(frozen=True)
class RecordStrayGuests:
    """The strays a host runs now (uuid -> (name, power state, action)); others are forgotten."""

    hostname: str
    strays: dict[str, tuple[str, int, str]]


@retried
def sync_power_state(cmd: SyncPowerState, uow: UnitOfWork) -> bool:
    """True when the host's report changed the server (an event was recorded)."""
    inst = loaders.instance(uow, cmd.server_id)
    observed, missing = cmd.observe() if cmd.observe is not None else (cmd.observed, cmd.missing)
    if not inst.sync_power_state(observed, missing=missing):
        return False
    uow.save(inst)
    return True


def deleted_instance(uow: UnitOfWork, server_id: str) -> bool:
    """The log holds this instance, deleted (its guest, if any, is an orphan)."""
    try:
        agg: Aggregate = uow.app.repository.get(UUID(server_id))
    except (AggregateNotFoundError, ValueError):
        return False
    return isinstance(agg, Instance) and agg.deleted


@retried
def record_strays(cmd: RecordStrayGuests, uow: UnitOfWork) -> bool:
    """True when the host's census of stray guests changed."""
    try:
        census: Aggregate = uow.app.repository.get(census_id(cmd.hostname))
    except AggregateNotFoundError:
        census = GuestCensus.open(cmd.hostname)
    assert isinstance(census, GuestCensus)
    changed = census.forget_gone(set(cmd.strays))
    for uuid, (name, power_state, action) in sorted(cmd.strays.items()):
        changed = census.found_stray(uuid, name, power_state, action) or changed
    if changed:
        uow.save(census)
    return changed
