"""Placement's commands: inventories, traits and aggregates of providers, and consumers' allocations.

A provider is a compute host (``commands.host.Host``) or any other provider operators created
(``commands.provider.ResourceProvider``); on a host, the scheduler's claims and these allocations
are events on the same aggregate, checked against the same inventories. A consumer's allocations
across providers are one atomic append (the ``Consumer`` and every provider it touches), each under
its aggregate's optimistic-concurrency check: Placement's generations, enforced by the log. The
aggregates of Placement's own (``Consumer``, ``PlacementCatalog``) are in ``commands.placement``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import EllipsisType
from typing import Any, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate

from commands.errors import InvalidInput, NotFound
from commands.host import Host, host_aggregate_id
from commands.placement import (
    _CATALOG_ID,
    _CUSTOM,
    Consumer,
    PlacementCatalog,
    TraitInUse,
    consumer_aggregate_id,
)
from commands.provider import CannotDeleteParent, DuplicateProvider, ResourceProvider
from commands.registry import PROVIDER_NAMES, Registry, registry_id
from commands.resource_provider import STANDARD_CLASSES, InventoryInUse, Provider, ProviderInUse
from commands.unit_of_work import UnitOfWork, exists

T = TypeVar("T")
CONFLICT = "Another request changed this resource provider at the same time; retry."


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


class PlacementHandlers(UnitOfWork):
    """Placement's commands; each decides in the one unit of work (``UnitOfWork.retrying``)."""

    def _retrying(self, decide: Callable[[], T]) -> T:
        return self.retrying(decide, conflict=CONFLICT)

    def provider(self, provider_uuid: str) -> Host | ResourceProvider:
        try:
            agg: Aggregate = self.app.repository.get(UUID(provider_uuid))
        except (AggregateNotFoundError, ValueError):
            raise NotFound(f"No resource provider with uuid {provider_uuid} found") from None
        if isinstance(agg, Host) or (isinstance(agg, ResourceProvider) and not agg.deleted):
            return agg
        raise NotFound(f"No resource provider with uuid {provider_uuid} found")

    def _names(self) -> Registry:
        try:
            agg: Aggregate = self.app.repository.get(registry_id(PROVIDER_NAMES))
        except AggregateNotFoundError:
            return Registry(PROVIDER_NAMES)  # type: ignore[call-arg]
        assert isinstance(agg, Registry)
        return agg

    def _take_name(self, names: Registry, name: str, owner: str) -> None:
        """A provider's name is unique among providers, compute hosts' included."""
        if names.names.get(name, owner) != owner or exists(self.app, host_aggregate_id(name)):
            raise DuplicateProvider(f"Conflicting resource provider name: {name} already exists.")
        names.take(name, owner, "Resource provider")

    def _check_parent(self, provider_uuid: str, parent_uuid: str, action: str) -> None:
        """The parent exists and is not ``provider_uuid`` nor one of its descendants (a loop)."""
        seen: str | None = parent_uuid
        while seen is not None:
            if seen == provider_uuid:
                raise InvalidInput(
                    f"Unable to save resource provider {provider_uuid}: creating loop in the provider "
                    "tree is not allowed."
                )
            try:
                seen = self.provider(seen).parent_provider_uuid
            except NotFound:
                raise InvalidInput(
                    f"Unable to {action} resource provider {provider_uuid}: parent provider UUID does not "
                    "exist."
                ) from None

    # -- providers that are not compute hosts -----------------------------------------------------
    def create_provider(self, provider_uuid: UUID, name: str, parent_uuid: str | None) -> ResourceProvider:
        """Placement's POST /resource_providers: one atomic append of the provider and its name."""

        def decide() -> ResourceProvider:
            if exists(self.app, provider_uuid):
                raise DuplicateProvider(
                    f"Conflicting resource provider uuid: {provider_uuid} already exists."
                )
            rp = ResourceProvider.create(provider_uuid, name, parent_uuid)
            if parent_uuid is not None:
                self._check_parent(str(provider_uuid), parent_uuid, "create")
            names = self._names()
            self._take_name(names, name, str(provider_uuid))
            self.save(rp, names)
            return rp

        return self._retrying(decide)

    def update_provider(
        self, provider_uuid: str, name: str, parent_uuid: str | EllipsisType | None, *, reparenting: bool
    ) -> Provider:
        """Placement's PUT /resource_providers/{uuid} (``parent_uuid`` ``...``: not given, kept). A
        compute host's provider is named by its host and is a root: only its own name and no parent are
        accepted (nothing changes)."""

        def decide() -> Provider:
            p = self.provider(provider_uuid)
            parent = p.parent_provider_uuid if parent_uuid is ... else parent_uuid
            if isinstance(p, Host):
                if (name, parent) != (p.hostname, None):
                    raise InvalidInput(
                        f"Unable to save resource provider {provider_uuid}: it is compute host "
                        f"{p.hostname}'s provider, named by its host and a root."
                    )
                return p
            names = self._names()
            if name != p.name:
                self._take_name(names, name, provider_uuid)
                names.release(p.name, provider_uuid)
            if parent is not None and parent != p.parent_provider_uuid:
                self._check_parent(provider_uuid, parent, "save")
            p.update(name, parent, reparenting=reparenting)
            self.save(p, names)
            return p

        return self._retrying(decide)

    def delete_provider(self, provider_uuid: str, has_children: Callable[[str], bool]) -> None:
        """Placement's DELETE: refused while it has allocations or children. A compute host's provider
        is deleted with its host, never here (answered as a provider in use)."""

        def decide() -> None:
            p = self.provider(provider_uuid)
            if isinstance(p, Host):
                raise ProviderInUse(
                    f"Unable to delete resource provider {provider_uuid}: it is compute host {p.hostname}'s "
                    "provider."
                )
            if has_children(provider_uuid):
                raise CannotDeleteParent(
                    f"Unable to delete parent resource provider {provider_uuid}: It has child resource "
                    "providers."
                )
            p.delete()
            names = self._names()
            names.release(p.name, provider_uuid)
            self.save(p, names)

        self._retrying(decide)

    def consumer(self, consumer_uuid: str) -> Consumer | None:
        try:
            agg: Aggregate = self.app.repository.get(consumer_aggregate_id(consumer_uuid))
        except AggregateNotFoundError:
            return None
        return agg if isinstance(agg, Consumer) else None

    # -- providers ------------------------------------------------------------------------------
    def _change(self, provider_uuid: str, change: Callable[[Provider], None]) -> tuple[Provider, int]:
        def decide() -> tuple[Provider, int]:
            host = self.provider(provider_uuid)
            change(host)
            return host, self.save(host)

        return self._retrying(decide)

    def _known_classes(self, provider_uuid: str, classes: Iterable[str]) -> None:
        """Placement refuses an inventory of a custom class nobody created (400)."""
        unknown = [
            c for c in classes
            if c not in STANDARD_CLASSES and _CUSTOM.match(c) and c not in self.catalog().resource_classes
        ]  # fmt: skip
        if unknown:
            raise InvalidInput(
                f"Unknown resource class in inventory for resource provider {provider_uuid}: {unknown[0]}"
            )

    def set_inventories(
        self, provider_uuid: str, generation: int | None, inventories: dict[str, dict[str, Any]]
    ) -> tuple[Provider, int]:
        self._known_classes(provider_uuid, inventories)
        return self._change(provider_uuid, lambda h: h.set_inventories(generation, inventories))

    def set_inventory(
        self, provider_uuid: str, generation: int | None, resource_class: str, fields: dict[str, Any]
    ) -> tuple[Provider, int]:
        self._known_classes(provider_uuid, [resource_class])
        return self._change(
            provider_uuid,
            lambda h: h.set_inventories(generation, {**h.inventories, resource_class: fields}),
        )

    def delete_inventory(
        self, provider_uuid: str, generation: int | None, resource_class: str
    ) -> tuple[Provider, int]:
        def change(h: Provider) -> None:
            if resource_class not in h.inventories:
                raise NotFound(
                    f"No inventory of class {resource_class} found for resource provider {provider_uuid}"
                )
            h.set_inventories(generation, {rc: i for rc, i in h.inventories.items() if rc != resource_class})

        return self._change(provider_uuid, change)

    def set_traits(
        self, provider_uuid: str, generation: int | None, traits: list[str]
    ) -> tuple[Provider, int]:
        """A custom trait must have been created first (``PUT /traits/{name}``), as in Placement."""
        created = self.catalog().traits
        unknown = sorted({t for t in traits if t.startswith("CUSTOM_") and t not in created})
        if unknown:
            raise InvalidInput(f"No such trait(s): {', '.join(unknown)}")
        return self._change(provider_uuid, lambda h: h.set_traits(generation, traits))

    def set_aggregates(
        self, provider_uuid: str, generation: int | None, aggregates: list[str]
    ) -> tuple[Provider, int]:
        for a in aggregates:
            try:
                UUID(a)
            except ValueError:
                raise InvalidInput(f"Invalid aggregate uuid {a!r}") from None
        return self._change(provider_uuid, lambda h: h.set_provider_aggregates(generation, aggregates))

    # -- the catalogue of custom resource classes and traits --------------------------------------
    def catalog(self) -> PlacementCatalog:
        try:
            agg: Aggregate = self.app.repository.get(_CATALOG_ID)
        except AggregateNotFoundError:
            return PlacementCatalog()
        assert isinstance(agg, PlacementCatalog)
        return agg

    def create_resource_class(self, name: str) -> bool:
        """True when created, False when it existed."""
        return self._catalog_change(lambda c: c.add_resource_class(name))

    def create_trait(self, name: str) -> bool:
        return self._catalog_change(lambda c: c.add_trait(name))

    def delete_resource_class(self, name: str, in_use: Callable[[str], bool]) -> None:
        """``in_use``: whether any provider has an inventory of the class (then 409, as Placement)."""

        def change(c: PlacementCatalog) -> bool:
            c.remove_resource_class(name)
            if in_use(name):
                raise InventoryInUse(
                    f"Unable to delete resource class {name}. The class is in use in inventory."
                )
            return True

        self._catalog_change(change)

    def delete_trait(self, name: str, in_use: Callable[[str], bool]) -> None:
        def change(c: PlacementCatalog) -> bool:
            c.remove_trait(name)
            if in_use(name):
                raise TraitInUse(f"The trait {name} is in use by a resource provider.")
            return True

        self._catalog_change(change)

    def _catalog_change(self, change: Callable[[PlacementCatalog], bool]) -> bool:
        def decide() -> bool:
            catalog = self.catalog()
            changed = change(catalog)
            if catalog.pending_events:
                self.save(catalog)
            return changed

        return self._retrying(decide)

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
            hosts: dict[str, Host | ResourceProvider] = {}
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
            return self.save(*consumers, *hosts.values())

        return self._retrying(decide)

    def delete_allocations(self, consumer_uuid: str) -> int:
        consumer = self.consumer(consumer_uuid)
        if consumer is None or not consumer.active:
            raise NotFound(f"No allocations for consumer '{consumer_uuid}'")
        return self.put_allocations(
            consumer_uuid, {}, consumer_generation=None, project_id=consumer.project_id,
            user_id=consumer.user_id, check_generation=False,
        )  # fmt: skip
