"""Host: a hypervisor, its inventory, and the resources claimed on it by instances.

Claims are events on the host's own stream, appended under the host's optimistic-concurrency
check: two schedulers can never both take its last capacity, because the second append is stale.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from commands.errors import InsufficientResources, InvalidInput

_NS = uuid5(NAMESPACE_URL, "urn:stratus:host")


def host_aggregate_id(hostname: str) -> UUID:
    return uuid5(_NS, hostname)


@dataclass(frozen=True)
class Resources:
    vcpus: int
    memory_mb: int
    disk_gb: int

    @classmethod
    def of_flavor(cls, flavor: dict[str, object]) -> Resources:
        disk = int(flavor.get("disk", 0)) + int(flavor.get("ephemeral", 0))  # type: ignore[call-overload]
        return cls(int(flavor["vcpus"]), int(flavor["ram"]), disk)  # type: ignore[call-overload]


class Host(Aggregate):
    @staticmethod
    def create_id(hostname: str) -> UUID:
        return host_aggregate_id(hostname)

    @event("Registered")
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
        """Placement's rule: int((total - reserved) * allocation_ratio); nothing reserved yet."""
        return Resources(
            int(self.vcpus * self.cpu_allocation_ratio),
            int(self.memory_mb * self.ram_allocation_ratio),
            int(self.disk_gb * self.disk_allocation_ratio),
        )

    def used(self) -> Resources:
        c = self.claims.values()
        return Resources(
            sum(x["vcpus"] for x in c), sum(x["memory_mb"] for x in c), sum(x["disk_gb"] for x in c)
        )

    def free(self) -> Resources:
        cap, used = self.capacity(), self.used()
        return Resources(
            cap.vcpus - used.vcpus, cap.memory_mb - used.memory_mb, cap.disk_gb - used.disk_gb
        )

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

    @event("InstanceClaimed")
    def _claimed(self, instance_id: str, vcpus: int, memory_mb: int, disk_gb: int) -> None:
        self.claims[instance_id] = {"vcpus": vcpus, "memory_mb": memory_mb, "disk_gb": disk_gb}

    def release(self, instance_id: str) -> None:
        if instance_id in self.claims:
            self._released(instance_id)

    @event("InstanceReleased")
    def _released(self, instance_id: str) -> None:
        self.claims.pop(instance_id, None)
