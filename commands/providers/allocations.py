"""Consumers' allocations: several consumers' replaced in one atomic append (Placement's PUT and
POST of /allocations), all or none, each consumer under its generation and each provider under its
optimistic-concurrency check (a provider several consumers touch is loaded once)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from commands.errors import NotFound
from commands.host import Host
from commands.placement import Consumer
from commands.provider import ResourceProvider
from commands.providers import CONFLICT, loaders
from commands.unit_of_work import UnitOfWork, retried


@dataclass(frozen=True)
class ConsumerChange:
    """One consumer's allocations as they should be (empty: none)."""

    consumer_uuid: str
    allocations: Mapping[str, Mapping[str, int]]
    consumer_generation: int | None
    project_id: str
    user_id: str
    consumer_type: str = "INSTANCE"
    check_generation: bool = True


@dataclass(frozen=True)
class ReplaceAllocations:
    """Replace these consumers' allocations on every provider, atomically."""

    changes: tuple[ConsumerChange, ...]


@dataclass(frozen=True)
class DeleteAllocations:
    """Remove a consumer's allocations (404 when it has none)."""

    consumer_uuid: str


@retried(conflict=CONFLICT)
def replace_allocations(cmd: ReplaceAllocations, uow: UnitOfWork) -> int:
    """The log's position after the append (its head when nothing changed)."""
    hosts: dict[str, Host | ResourceProvider] = {}
    consumers: list[Consumer] = []
    for c in cmd.changes:
        consumer = loaders.consumer(uow, c.consumer_uuid)
        if consumer is None:
            consumer = Consumer(c.consumer_uuid, c.project_id, c.user_id, c.consumer_type)  # type: ignore[call-arg]
        if c.check_generation:
            consumer.check_generation(c.consumer_generation)
        wanted = {rp: {rc: int(n) for rc, n in res.items() if n} for rp, res in c.allocations.items()}
        wanted = {rp: res for rp, res in wanted.items() if res}
        for rp in {*consumer.allocations, *wanted}:
            host = hosts.get(rp) or hosts.setdefault(rp, loaders.provider(uow, rp))
            if rp in wanted:
                host.allocate(c.consumer_uuid, wanted[rp])
            else:
                host.deallocate(c.consumer_uuid)
        if wanted != consumer.allocations or consumer.pending_events:
            consumer.replace(wanted, c.project_id, c.user_id)
            consumers.append(consumer)
    if not consumers:
        return uow.app.recorder.max_notification_id() or 0
    return uow.save(*consumers, *hosts.values())


def delete_allocations(cmd: DeleteAllocations, uow: UnitOfWork) -> int:
    consumer = loaders.consumer(uow, cmd.consumer_uuid)
    if consumer is None or not consumer.active:
        raise NotFound(f"No allocations for consumer '{cmd.consumer_uuid}'")
    change = ConsumerChange(
        cmd.consumer_uuid, {}, None, consumer.project_id, consumer.user_id, check_generation=False
    )
    return replace_allocations(ReplaceAllocations((change,)), uow)
