"""Placement's commands: inventories, traits and aggregates of providers, and consumers' allocations.

A provider is a compute host (``commands.host.Host``): the scheduler's claims and these allocations
are events on the same aggregate, checked against the same inventories. A consumer's allocations
across providers are one atomic append (the ``Consumer`` and every ``Host`` it touches), each under
its aggregate's optimistic-concurrency check: Placement's generations, enforced by the log.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate, event
from eventsourcing.persistence import IntegrityError

from commands.app import Stratus
from commands.errors import Conflict, InvalidInput, NotFound
from commands.host import Host
from commands.resource_provider import ProviderGenerationConflict

_NS = uuid5(NAMESPACE_URL, "urn:stratus:placement-consumer")
T = TypeVar("T")


def consumer_aggregate_id(consumer_uuid: str) -> UUID:
    return uuid5(_NS, consumer_uuid)


class ConsumerGenerationConflict(ProviderGenerationConflict):
    """Placement: 409 placement.concurrent_update, for the consumer's generation."""


class Consumer(Aggregate):
    """A Placement consumer that is not an instance of this cloud (instances hold Host claims)."""

    @staticmethod
    def create_id(consumer_uuid: str, project_id: str, user_id: str, consumer_type: str) -> UUID:
        return consumer_aggregate_id(consumer_uuid)

    @event("Created")
    def __init__(self, consumer_uuid: str, project_id: str, user_id: str, consumer_type: str) -> None:
        self.consumer_uuid = consumer_uuid
        self.project_id = project_id
        self.user_id = user_id
        self.consumer_type = consumer_type
        self.allocations: dict[str, dict[str, int]] = {}  # provider uuid -> resource class -> amount
        self.generation = 0

    @property
    def active(self) -> bool:
        return bool(self.allocations)

    def check_generation(self, generation: int | None) -> None:
        expected = self.generation if self.active else None
        if generation != expected:
            raise ConsumerGenerationConflict(
                f"consumer generation conflict - expected {expected} but got {generation}"
            )

    def replace(self, allocations: dict[str, dict[str, int]], project_id: str, user_id: str) -> None:
        self._replaced(allocations, project_id, user_id)

    @event("AllocationsReplaced")
    def _replaced(self, allocations: dict[str, dict[str, int]], project_id: str, user_id: str) -> None:
        self.allocations = allocations
        self.project_id = project_id
        self.user_id = user_id
        self.generation += 1


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


class PlacementHandlers:
    def __init__(self, app: Stratus, *, attempts: int = 5) -> None:
        self.app = app
        self._attempts = attempts

    def _retrying(self, decide: Callable[[], T]) -> T:
        for _ in range(self._attempts - 1):
            try:
                return decide()
            except IntegrityError:
                continue
        try:
            return decide()
        except IntegrityError as e:
            raise Conflict("Another request changed this resource provider at the same time; retry.") from e

    def _save(self, *aggregates: Aggregate) -> int:
        recordings = self.app.save(*aggregates)
        return recordings[-1].notification.id if recordings else self.app.recorder.max_notification_id() or 0

    def provider(self, provider_uuid: str) -> Host:
        try:
            agg: Aggregate = self.app.repository.get(UUID(provider_uuid))
        except (AggregateNotFoundError, ValueError):
            raise NotFound(f"No resource provider with uuid {provider_uuid} found") from None
        if not isinstance(agg, Host):
            raise NotFound(f"No resource provider with uuid {provider_uuid} found")
        return agg

    def consumer(self, consumer_uuid: str) -> Consumer | None:
        try:
            agg: Aggregate = self.app.repository.get(consumer_aggregate_id(consumer_uuid))
        except AggregateNotFoundError:
            return None
        return agg if isinstance(agg, Consumer) else None

    # -- providers ------------------------------------------------------------------------------
    def _change(self, provider_uuid: str, change: Callable[[Host], None]) -> tuple[Host, int]:
        def decide() -> tuple[Host, int]:
            host = self.provider(provider_uuid)
            change(host)
            return host, self._save(host)

        return self._retrying(decide)

    def set_inventories(
        self, provider_uuid: str, generation: int | None, inventories: dict[str, dict[str, Any]]
    ) -> tuple[Host, int]:
        return self._change(provider_uuid, lambda h: h.set_inventories(generation, inventories))

    def set_inventory(
        self, provider_uuid: str, generation: int | None, resource_class: str, fields: dict[str, Any]
    ) -> tuple[Host, int]:
        return self._change(
            provider_uuid,
            lambda h: h.set_inventories(generation, {**h.inventories, resource_class: fields}),
        )

    def delete_inventory(
        self, provider_uuid: str, generation: int | None, resource_class: str
    ) -> tuple[Host, int]:
        def change(h: Host) -> None:
            if resource_class not in h.inventories:
                raise NotFound(
                    f"No inventory of class {resource_class} found for resource provider {provider_uuid}"
                )
            h.set_inventories(generation, {rc: i for rc, i in h.inventories.items() if rc != resource_class})

        return self._change(provider_uuid, change)

    def set_traits(self, provider_uuid: str, generation: int | None, traits: list[str]) -> tuple[Host, int]:
        return self._change(provider_uuid, lambda h: h.set_traits(generation, traits))

    def set_aggregates(
        self, provider_uuid: str, generation: int | None, aggregates: list[str]
    ) -> tuple[Host, int]:
        for a in aggregates:
            try:
                UUID(a)
            except ValueError:
                raise InvalidInput(f"Invalid aggregate uuid {a!r}") from None
        return self._change(provider_uuid, lambda h: h.set_provider_aggregates(generation, aggregates))

    # -- consumers ------------------------------------------------------------------------------
    def put_allocations(
        self,
        consumer_uuid: str,
        allocations: Mapping[str, Mapping[str, int]],
        *,
        consumer_generation: int | None,
        project_id: str,
        user_id: str,
        consumer_type: str = "INSTANCE",
        check_generation: bool = True,
    ) -> int:
        """Replace the consumer's allocations on every provider, atomically; empty: remove them all."""
        change = ConsumerChange(
            consumer_uuid,
            allocations,
            consumer_generation,
            project_id,
            user_id,
            consumer_type,
            check_generation,
        )
        return self.replace_allocations([change])

    def replace_allocations(self, changes: Sequence[ConsumerChange]) -> int:
        """Several consumers' allocations replaced in one atomic append (Placement's POST
        /allocations): all of them or none, each consumer under its generation and each provider under
        its optimistic-concurrency check (a provider several consumers touch is loaded once)."""

        def decide() -> int:
            hosts: dict[str, Host] = {}
            consumers: list[Consumer] = []
            for c in changes:
                consumer = self.consumer(c.consumer_uuid)
                if consumer is None:
                    consumer = Consumer(c.consumer_uuid, c.project_id, c.user_id, c.consumer_type)  # type: ignore[call-arg]
                if c.check_generation:
                    consumer.check_generation(c.consumer_generation)
                wanted = {rp: {rc: int(n) for rc, n in res.items() if n} for rp, res in c.allocations.items()}
                wanted = {rp: res for rp, res in wanted.items() if res}
                for rp in {*consumer.allocations, *wanted}:
                    host = hosts.get(rp) or hosts.setdefault(rp, self.provider(rp))
                    if rp in wanted:
                        host.allocate(c.consumer_uuid, wanted[rp])
                    else:
                        host.deallocate(c.consumer_uuid)
                if wanted != consumer.allocations or consumer.pending_events:
                    consumer.replace(wanted, c.project_id, c.user_id)
                    consumers.append(consumer)
            if not consumers:
                return self.app.recorder.max_notification_id() or 0
            return self._save(*consumers, *hosts.values())

        return self._retrying(decide)

    def delete_allocations(self, consumer_uuid: str) -> int:
        consumer = self.consumer(consumer_uuid)
        if consumer is None or not consumer.active:
            raise NotFound(f"No allocations for consumer '{consumer_uuid}'")
        return self.put_allocations(
            consumer_uuid, {}, consumer_generation=None, project_id=consumer.project_id,
            user_id=consumer.user_id, check_generation=False,
        )  # fmt: skip
