"""Placement's vocabulary for a provider: inventories per resource class, traits, capacity and fit.

Every compute host is one Placement resource provider (its uuid is the Host aggregate's id), so the
scheduler's claims and the Placement API's allocations are the same events on the same aggregate:
there is one source of truth for what a host has and what is used on it. Providers that are not hosts
(sharing pools, bandwidth, nested children) are ``commands.provider.ResourceProvider`` aggregates.
This module holds the rules both share (Placement's validation and arithmetic, the ``Provider`` mixin);
the aggregates record the facts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from commands.errors import Conflict, ConflictingState, DomainError, InsufficientResources, InvalidInput

VCPU, MEMORY_MB, DISK_GB = "VCPU", "MEMORY_MB", "DISK_GB"
# The Host's claim fields (Nova's names) per resource class.
CLAIM_FIELDS = {VCPU: "vcpus", MEMORY_MB: "memory_mb", DISK_GB: "disk_gb"}
# os-resource-classes' standard classes that Stratus knows; anything else must be CUSTOM_*.
STANDARD_CLASSES = (
    VCPU, MEMORY_MB, DISK_GB, "PCI_DEVICE", "SRIOV_NET_VF", "NUMA_SOCKET", "NUMA_CORE", "NUMA_THREAD",
    "NUMA_MEMORY_MB", "IPV4_ADDRESS", "VGPU", "VGPU_DISPLAY_HEAD", "NET_BW_EGR_KILOBIT_PER_SEC",
    "NET_BW_IGR_KILOBIT_PER_SEC", "PCPU", "MEM_ENCRYPTION_CONTEXT", "FPGA", "PGPU",
)  # fmt: skip
_CUSTOM_RC = re.compile(r"^CUSTOM_[A-Z0-9_]+$")
_TRAIT = re.compile(r"^[A-Z0-9_]+$")
MAX_INT = 2**31 - 1


class ProviderGenerationConflict(Conflict):
    """The caller's view of the provider is stale (Placement: 409 placement.concurrent_update)."""

    code = "placement.concurrent_update"


class InventoryInUse(DomainError):
    """An inventory with allocations against it cannot be removed (Placement: 409)."""

    code = "placement.inventory.inuse"


class CapacityExceeded(InsufficientResources):
    """An allocation does not fit the provider's inventory (Placement: 409)."""

    code = "placement.undefined_code"


@dataclass(frozen=True)
class Inventory:
    """A provider's inventory of one resource class (Placement's fields)."""

    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int = MAX_INT
    step_size: int = 1
    allocation_ratio: float = 1.0

    @property
    def capacity(self) -> int:
        """Placement's rule: int((total - reserved) * allocation_ratio)."""
        return int((self.total - self.reserved) * self.allocation_ratio)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def parse(cls, resource_class: str, fields: Mapping[str, Any]) -> Inventory:
        check_resource_class(resource_class)
        unknown = set(fields) - {"total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio"}
        if unknown or "total" not in fields:
            raise InvalidInput(
                f"Bad inventory {resource_class}: 'total' is required, unknown {sorted(unknown)}"
            )
        inv = cls(**{k: fields[k] for k in fields})
        for name in ("total", "reserved", "min_unit", "max_unit", "step_size"):
            value = getattr(inv, name)
            low = 0 if name == "reserved" else 1
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= MAX_INT:
                raise InvalidInput(f"Bad inventory {resource_class}: {name} must be an integer >= {low}")
        if not isinstance(inv.allocation_ratio, int | float) or not 0 < inv.allocation_ratio <= 3.4e38:
            raise InvalidInput(f"Bad inventory {resource_class}: allocation_ratio must be > 0")
        if inv.reserved > inv.total:
            raise InvalidInput(
                f"Unable to update inventory for resource provider: Invalid inventory for "
                f"'{resource_class}'. The reserved value is greater than total."
            )
        if inv.min_unit > inv.max_unit:
            raise InvalidInput(f"Bad inventory {resource_class}: min_unit is greater than max_unit")
        return cls(**{**asdict(inv), "allocation_ratio": float(inv.allocation_ratio)})


def check_resource_class(name: str) -> None:
    if name not in STANDARD_CLASSES and not _CUSTOM_RC.match(name):
        raise InvalidInput(f"No such resource class {name}.")


def check_traits(traits: Iterable[str]) -> list[str]:
    found = sorted(set(traits))
    for t in found:
        if not _TRAIT.match(t) or len(t) > 255:
            raise InvalidInput(f"Invalid trait name {t!r}: upper case letters, digits and '_' only")
    return found


def host_inventories(
    vcpus: int, memory_mb: int, disk_gb: int, cpu_ratio: float, ram_ratio: float, disk_ratio: float
) -> dict[str, dict[str, Any]]:
    """The inventories a hypervisor reports at registration (Nova's libvirt driver's, nothing reserved)."""
    out = {}
    for rc, total, ratio in (
        (VCPU, vcpus, cpu_ratio),
        (MEMORY_MB, memory_mb, ram_ratio),
        (DISK_GB, disk_gb, disk_ratio),
    ):
        if total > 0:
            out[rc] = Inventory(total, max_unit=total, allocation_ratio=float(ratio)).as_dict()
    return out


def check_fits(
    provider: str,
    inventories: Mapping[str, Mapping[str, Any]],
    usages: Mapping[str, int],
    wanted: Mapping[str, int],
) -> None:
    """Raise ``CapacityExceeded`` (Placement's wording) unless ``wanted`` fits on top of ``usages``."""
    for rc, amount in wanted.items():
        if amount == 0:
            continue
        raw = inventories.get(rc)
        if raw is None:
            raise CapacityExceeded(
                f"Unable to allocate inventory: Inventory for '{rc}' on resource provider "
                f"'{provider}' invalid."
            )
        inv = Inventory(**raw)
        if amount < inv.min_unit or amount > inv.max_unit or amount % inv.step_size:
            raise CapacityExceeded(
                f"Unable to allocate inventory: Unable to create allocation for '{rc}' on resource provider "
                f"'{provider}'. The requested amount would violate inventory constraints."
            )
        if usages.get(rc, 0) + amount > inv.capacity:
            raise CapacityExceeded(
                f"Unable to allocate inventory: Unable to create allocation for '{rc}' on resource provider "
                f"'{provider}'. The requested amount would exceed the capacity."
            )


class ProviderInUse(ConflictingState):
    """A provider with allocations (or a compute host's) cannot be deleted (Placement: 409)."""

    code = "placement.resource_provider.inuse"


class Provider:
    """What any resource provider is to Placement, whichever aggregate records it (``Host`` for a
    compute host, ``ResourceProvider`` for any other): inventories, traits, Placement aggregates,
    allocations and the generation, with Placement's rules for changing them.

    The facts are each aggregate's own events (``Host.InventoriesSet``, ``ResourceProvider.InventoriesSet``),
    declared in its class body from the apply functions below, so each keeps its own event topics."""

    id: Any
    inventories: dict[str, dict[str, Any]]
    traits: list[str]
    provider_aggregates: list[str]
    allocations: dict[str, dict[str, int]]
    generation: int
    parent_provider_uuid: str | None = None

    @property
    def provider_name(self) -> str:
        raise NotImplementedError

    def consumers(self) -> set[str]:
        return set(self.allocations)

    def held(self, consumer: str) -> dict[str, int] | None:
        """What ``consumer`` holds here per resource class (None: nothing)."""
        return self.allocations.get(consumer)

    def moving(self, consumer: str) -> str | None:
        """The server whose move ``consumer`` (a migration) is; None for any other consumer."""
        return None

    def usages(self) -> dict[str, int]:
        """Used amount per resource class, over every consumer."""
        used = dict.fromkeys(self.inventories, 0)
        for consumer in self.consumers():
            for rc, amount in (self.held(consumer) or {}).items():
                used[rc] = used.get(rc, 0) + amount
        return used

    def check_generation(self, generation: int | None) -> None:
        if generation is not None and generation != self.generation:
            raise ProviderGenerationConflict(
                f"resource provider generation conflict: {generation} is not the current "
                f"generation {self.generation} of {self.id}"
            )

    def set_inventories(self, generation: int | None, inventories: dict[str, dict[str, Any]]) -> None:
        """Replace every inventory (Placement's PUT); a class with allocations cannot be removed."""
        self.check_generation(generation)
        parsed = {rc: Inventory.parse(rc, fields).as_dict() for rc, fields in inventories.items()}
        used = {rc: n for rc, n in self.usages().items() if n}
        gone = sorted(rc for rc in used if rc not in parsed)
        if gone:
            raise InventoryInUse(
                f"Inventory for '{', '.join(gone)}' on resource provider '{self.id}' in use."
            )
        if parsed != self.inventories:
            self._inventories_set(parsed)

    def set_traits(self, generation: int | None, traits: list[str]) -> None:
        self.check_generation(generation)
        found = check_traits(traits)
        if found != self.traits:
            self._traits_set(found)

    def set_provider_aggregates(self, generation: int | None, aggregates: list[str]) -> None:
        self.check_generation(generation)
        found = sorted(set(aggregates))
        if found != self.provider_aggregates:
            self._provider_aggregates_set(found)

    def allocate(self, consumer_id: str, resources: dict[str, int]) -> None:
        """Set ``consumer_id``'s allocation here (Placement's PUT /allocations), within capacity."""
        wanted = {rc: n for rc, n in resources.items() if n}
        if wanted == self.allocations.get(consumer_id):
            return
        others = self.usages()
        for rc, n in self.allocations.get(consumer_id, {}).items():
            others[rc] -= n
        check_fits(str(self.id), self.inventories, others, wanted)
        if wanted:
            self._allocated(consumer_id, wanted)
        elif consumer_id in self.allocations:
            self._allocation_removed(consumer_id)

    def deallocate(self, consumer_id: str) -> None:
        if consumer_id in self.allocations:
            self._allocation_removed(consumer_id)

    # The recorded facts: each aggregate binds them to its own events, e.g.
    # ``_inventories_set = event("InventoriesSet")(inventories_set)``.
    _inventories_set: Any
    _traits_set: Any
    _provider_aggregates_set: Any
    _allocated: Any
    _allocation_removed: Any


def inventories_set(self: Provider, inventories: dict[str, dict[str, Any]]) -> None:
    self.inventories = inventories
    self.generation += 1


def traits_set(self: Provider, traits: list[str]) -> None:
    self.traits = traits
    self.generation += 1


def provider_aggregates_set(self: Provider, aggregates: list[str]) -> None:
    self.provider_aggregates = aggregates
    self.generation += 1


def allocated(self: Provider, consumer_id: str, resources: dict[str, int]) -> None:
    self.allocations = {**self.allocations, consumer_id: resources}
    self.generation += 1


def allocation_removed(self: Provider, consumer_id: str) -> None:
    self.allocations = {k: v for k, v in self.allocations.items() if k != consumer_id}
    self.generation += 1
