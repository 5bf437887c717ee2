"""Host: a hypervisor, its inventory, and the resources claimed on it by instances.

Claims are events on the host's own stream, appended under the host's optimistic-concurrency
check: two schedulers can never both take its last capacity, because the second append is stale.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from commands.errors import ConflictingState, InsufficientResources, InvalidInput
from commands.resource_provider import (
    CLAIM_FIELDS,
    DISK_GB,
    MEMORY_MB,
    VCPU,
    Provider,
    allocated,
    allocation_removed,
    host_inventories,
    inventories_set,
    provider_aggregates_set,
    traits_set,
)

_NS = uuid5(NAMESPACE_URL, "urn:stratus:host")


def host_aggregate_id(hostname: str) -> UUID:
    return uuid5(_NS, hostname)


@dataclass(frozen=True)
class Resources:
    """The vCPUs, RAM (MB) and disk (GB) a claim takes on a host."""

    vcpus: int
    memory_mb: int
    disk_gb: int

    @classmethod
    def of_flavor(cls, flavor: dict[str, object]) -> Resources:
        disk = int(flavor.get("disk", 0)) + int(flavor.get("ephemeral", 0))  # type: ignore[call-overload]
        return cls(int(flavor["vcpus"]), int(flavor["ram"]), disk)  # type: ignore[call-overload]


class Host(Provider, Aggregate):
    """A hypervisor: its inventories, its service state, and every claim and allocation on it."""

    @staticmethod
    def create_id(hostname: str) -> UUID:
        return host_aggregate_id(hostname)

    class Registered(Aggregate.Created):
        """A hypervisor host registered itself with its inventory."""

        hostname: str
        vcpus: int
        memory_mb: int
        disk_gb: int
        hypervisor_type: str
        cpu_allocation_ratio: float
        ram_allocation_ratio: float
        disk_allocation_ratio: float

    @event(Registered)
    def __init__(
        self,
        hostname: str,
        vcpus: int,
        memory_mb: int,
        disk_gb: int,
        hypervisor_type: str = "QEMU",
        cpu_allocation_ratio: float = 4.0,
        ram_allocation_ratio: float = 1.0,
        disk_allocation_ratio: float = 1.0,
    ) -> None:
        self.hostname = hostname
        self.vcpus = vcpus
        self.memory_mb = memory_mb
        self.disk_gb = disk_gb
        self.hypervisor_type = hypervisor_type
        self.cpu_allocation_ratio = cpu_allocation_ratio
        self.ram_allocation_ratio = ram_allocation_ratio
        self.disk_allocation_ratio = disk_allocation_ratio
        self.claims: dict[str, dict[str, int]] = {}
        # The claims a migration holds here while its instance moves away (migration id -> instance
        # id): Nova's migration consumer, keeping the source's resources until confirm or revert.
        self.migrations: dict[str, str] = {}
        # The nova-compute service's state, as os-services sets it.
        self.disabled = False
        self.disabled_reason: str | None = None
        self.forced_down = False
        # The host aggregates this host is in, and the availability zone each gives it (None: none).
        self.aggregate_zones: dict[str, str | None] = {}
        # As a Placement resource provider (its uuid is this aggregate's id): inventories per resource
        # class, traits, Placement aggregates, allocations of consumers other than this host's
        # instances (whose claims are ``claims``), and the provider generation.
        self.inventories = host_inventories(
            vcpus, memory_mb, disk_gb, cpu_allocation_ratio, ram_allocation_ratio, disk_allocation_ratio
        )
        self.traits: list[str] = []
        self.provider_aggregates: list[str] = []
        self.allocations: dict[str, dict[str, int]] = {}
        self.generation = 0

    @classmethod
    def register(cls, hostname: str, vcpus: int, memory_mb: int, disk_gb: int, **kw: Any) -> Host:
        if not hostname or len(hostname) > 255:
            raise InvalidInput("Invalid input for field/attribute hostname: 1 to 255 characters")
        for name, value in (("vcpus", vcpus), ("memory_mb", memory_mb), ("disk_gb", disk_gb)):
            if value < 0:
                raise InvalidInput(f"Invalid input for field/attribute {name}: must be >= 0")
        return cls(  # type: ignore[arg-type]
            hostname=hostname,
            vcpus=vcpus,
            memory_mb=memory_mb,
            disk_gb=disk_gb,
            **kw,
        )

    # -- capacity -------------------------------------------------------------------------------
    def capacity(self) -> Resources:
        """Placement's rule per inventory: int((total - reserved) * allocation_ratio).

        Written out (not through ``Inventory``): the scheduler asks every host for it per decision."""
        inv = self.inventories

        def cap(rc: str) -> int:
            i = inv.get(rc)
            return int((i["total"] - i["reserved"]) * i["allocation_ratio"]) if i else 0

        return Resources(cap(VCPU), cap(MEMORY_MB), cap(DISK_GB))

    def used(self) -> Resources:
        vcpus = memory_mb = disk_gb = 0
        for claim in self.claims.values():
            vcpus += claim["vcpus"]
            memory_mb += claim["memory_mb"]
            disk_gb += claim["disk_gb"]
        for allocation in self.allocations.values():
            vcpus += allocation.get(VCPU, 0)
            memory_mb += allocation.get(MEMORY_MB, 0)
            disk_gb += allocation.get(DISK_GB, 0)
        return Resources(vcpus, memory_mb, disk_gb)

    def free(self) -> Resources:
        cap, used = self.capacity(), self.used()
        return Resources(cap.vcpus - used.vcpus, cap.memory_mb - used.memory_mb, cap.disk_gb - used.disk_gb)

    def fits(self, need: Resources) -> str | None:
        """None when ``need`` fits, else the name of the first resource that does not."""
        free = self.free()
        for name in ("vcpus", "memory_mb", "disk_gb"):
            if getattr(need, name) > getattr(free, name):
                return name
        return None

    # -- commands -------------------------------------------------------------------------------
    def claim(self, instance_id: str, need: Resources) -> None:
        if instance_id in self.claims:
            return  # already claimed by this instance: a retried placement changes nothing
        short = self.fits(need)
        if short is not None:
            raise InsufficientResources(
                f"Host {self.hostname} has not enough {short} for instance {instance_id}"
            )
        self._claimed(instance_id, need.vcpus, need.memory_mb, need.disk_gb)

    class InstanceClaimed(Aggregate.Event):
        """Resources on the host were claimed for an instance (a placement)."""

        instance_id: str
        vcpus: int
        memory_mb: int
        disk_gb: int

    @event(InstanceClaimed)
    def _claimed(self, instance_id: str, vcpus: int, memory_mb: int, disk_gb: int) -> None:
        self.claims[instance_id] = {"vcpus": vcpus, "memory_mb": memory_mb, "disk_gb": disk_gb}
        self.generation += 1

    def release(self, instance_id: str) -> None:
        if instance_id in self.claims:
            self._released(instance_id)

    class InstanceReleased(Aggregate.Event):
        """An instance's claim on the host was released."""

        instance_id: str

    @event(InstanceReleased)
    def _released(self, instance_id: str) -> None:
        self.claims.pop(instance_id, None)
        self.generation += 1

    # -- moves (resize and cold migration) --------------------------------------------------------
    def hand_to_migration(self, instance_id: str, migration_id: str) -> None:
        """The instance is leaving: its claim here is held by the migration until confirm or revert."""
        if migration_id in self.claims:
            return  # handed over already: a retried placement
        if instance_id not in self.claims:
            raise ConflictingState(f"Host {self.hostname} holds no claim of instance {instance_id}")
        self._claim_handed_to_migration(instance_id, migration_id)

    class ClaimHandedToMigration(Aggregate.Event):
        """An instance is moving away: its claim on this host is held by the migration (Nova's migration
        consumer) until the move is confirmed, reverted or fails."""

        instance_id: str
        migration_id: str

    @event(ClaimHandedToMigration)
    def _claim_handed_to_migration(self, instance_id: str, migration_id: str) -> None:
        claims = dict(self.claims)
        claims[migration_id] = claims.pop(instance_id)
        self.claims = claims
        self.migrations = {**self.migrations, migration_id: instance_id}
        self.generation += 1

    def take_back_from_migration(self, migration_id: str) -> None:
        """The move was reverted or failed: the claim is the instance's again."""
        if migration_id in self.migrations:
            self._claim_taken_back(migration_id, self.migrations[migration_id])

    class ClaimTakenBack(Aggregate.Event):
        """The move was reverted or failed: the migration's claim on this host is the instance's again."""

        migration_id: str
        instance_id: str

    @event(ClaimTakenBack)
    def _claim_taken_back(self, migration_id: str, instance_id: str) -> None:
        claims = dict(self.claims)
        claims[instance_id] = claims.pop(migration_id)
        self.claims = claims
        self.migrations = {k: v for k, v in self.migrations.items() if k != migration_id}
        self.generation += 1

    def release_migration(self, migration_id: str) -> None:
        """The move was confirmed (or its instance deleted): the source's old resources are free."""
        if migration_id in self.migrations:
            self._migration_released(migration_id)

    class MigrationReleased(Aggregate.Event):
        """The move was confirmed (or its server deleted): the migration's claim on this host is released."""

        migration_id: str

    @event(MigrationReleased)
    def _migration_released(self, migration_id: str) -> None:
        self.claims = {k: v for k, v in self.claims.items() if k != migration_id}
        self.migrations = {k: v for k, v in self.migrations.items() if k != migration_id}
        self.generation += 1

    # -- the resource provider (Placement): ``Provider``'s rules, recorded as Host events ------------
    @property
    def provider_name(self) -> str:
        return self.hostname

    def consumers(self) -> set[str]:
        return {*self.claims, *self.allocations}

    def held(self, consumer: str) -> dict[str, int] | None:
        claim = self.claims.get(consumer)
        if claim is not None:
            return {rc: claim[name] for rc, name in CLAIM_FIELDS.items() if claim[name]}
        return self.allocations.get(consumer)

    def moving(self, consumer: str) -> str | None:
        return self.migrations.get(consumer)

    def allocate(self, consumer_id: str, resources: dict[str, int]) -> None:
        if consumer_id in self.claims:
            raise ConflictingState(f"Consumer {consumer_id} is an instance placed by the scheduler")
        super().allocate(consumer_id, resources)

    class InventoriesSet(Aggregate.Event):
        """The host's inventories as a Placement resource provider were replaced: per resource class,
        total, reserved, min_unit, max_unit, step_size and allocation_ratio (capacity = int((total -
        reserved) * allocation_ratio)). Bumps the provider generation."""

        inventories: dict[str, dict[str, Any]]

    _inventories_set = event(InventoriesSet)(inventories_set)

    class TraitsSet(Aggregate.Event):
        """The host's traits (as a resource provider) were replaced. Bumps the provider generation."""

        traits: list[str]

    _traits_set = event(TraitsSet)(traits_set)

    class ProviderAggregatesSet(Aggregate.Event):
        """The Placement aggregates (uuids) the host's resource provider is a member of were replaced.
        Bumps the provider generation."""

        aggregates: list[str]

    _provider_aggregates_set = event(ProviderAggregatesSet)(provider_aggregates_set)

    class ResourcesAllocated(Aggregate.Event):
        """A Placement consumer (not one of the host's instances, whose claims are InstanceClaimed) holds
        these amounts per resource class on the host, replacing what it held. Appended atomically with
        the consumer's own event. Bumps the provider generation."""

        consumer_id: str
        resources: dict[str, int]

    _allocated = event(ResourcesAllocated)(allocated)

    class AllocationRemoved(Aggregate.Event):
        """A Placement consumer no longer holds anything on the host. Bumps the provider generation."""

        consumer_id: str

    _allocation_removed = event(AllocationRemoved)(allocation_removed)

    # -- the compute service (os-services) ------------------------------------------------------
    @property
    def schedulable(self) -> bool:
        """The scheduler places nothing on a disabled or forced-down host."""
        return not self.disabled and not self.forced_down

    def disable(self, reason: str | None) -> None:
        if reason is not None and len(reason) > 255:
            raise InvalidInput("Invalid input for field/attribute disabled_reason: at most 255 characters")
        if not self.disabled or self.disabled_reason != reason:
            self._service_disabled(reason)

    class ServiceDisabled(Aggregate.Event):
        """The host's compute service was disabled: the scheduler places nothing new on it."""

        reason: str | None

    @event(ServiceDisabled)
    def _service_disabled(self, reason: str | None) -> None:
        self.disabled = True
        self.disabled_reason = reason

    def enable(self) -> None:
        if self.disabled:
            self._service_enabled()

    class ServiceEnabled(Aggregate.Event):
        """The host's compute service was enabled again."""

    @event(ServiceEnabled)
    def _service_enabled(self) -> None:
        self.disabled = False
        self.disabled_reason = None

    def force_down(self, forced_down: bool) -> None:
        if self.forced_down != forced_down:
            self._forced_down_set(forced_down)

    class ForcedDownSet(Aggregate.Event):
        """An operator marked the host's compute service as down (or no longer)."""

        forced_down: bool

    @event(ForcedDownSet)
    def _forced_down_set(self, forced_down: bool) -> None:
        self.forced_down = forced_down

    # -- availability zones (from host aggregates) ----------------------------------------------
    def availability_zone(self, default: str) -> str:
        zones = sorted({z for z in self.aggregate_zones.values() if z})
        return zones[0] if zones else default

    def assign_zone(self, aggregate_id: str, zone: str | None) -> None:
        """Join host aggregate ``aggregate_id`` (or follow its new zone); a host has one zone at most."""
        others = {z for a, z in self.aggregate_zones.items() if a != aggregate_id and z}
        if zone is not None and others and others != {zone}:
            raise ConflictingState(
                f"Cannot add host {self.hostname} to availability zone {zone}: "
                f"it is already in availability zone(s) {sorted(others)}."
            )
        if aggregate_id not in self.aggregate_zones or self.aggregate_zones[aggregate_id] != zone:
            self._zone_assigned(aggregate_id, zone)

    class ZoneAssigned(Aggregate.Event):
        """The host joined a host aggregate, or its aggregate's availability zone changed (null: none)."""

        aggregate_id: str
        zone: str | None

    @event(ZoneAssigned)
    def _zone_assigned(self, aggregate_id: str, zone: str | None) -> None:
        self.aggregate_zones = {**self.aggregate_zones, aggregate_id: zone}

    def leave_aggregate(self, aggregate_id: str) -> None:
        if aggregate_id in self.aggregate_zones:
            self._aggregate_left(aggregate_id)

    class AggregateLeft(Aggregate.Event):
        """The host left a host aggregate (and the zone it gave)."""

        aggregate_id: str

    @event(AggregateLeft)
    def _aggregate_left(self, aggregate_id: str) -> None:
        self.aggregate_zones = {a: z for a, z in self.aggregate_zones.items() if a != aggregate_id}
