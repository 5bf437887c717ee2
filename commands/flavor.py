"""Flavor: a named size (vCPUs, RAM, disk) that servers are built from."""

from __future__ import annotations

from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from commands.errors import InvalidInput, NotFound

_NS = uuid5(NAMESPACE_URL, "urn:stratus:flavor")


def flavor_aggregate_id(flavorid: str) -> UUID:
    """Flavors are addressed by Nova's string flavor id; the aggregate id is derived from it."""
    return uuid5(_NS, flavorid)


class Flavor(Aggregate):
    @staticmethod
    def create_id(flavorid: str) -> UUID:
        return flavor_aggregate_id(flavorid)

    @event("Created")
    def __init__(
        self,
        flavorid: str,
        name: str,
        vcpus: int,
        ram: int,
        disk: int,
        ephemeral: int = 0,
        swap: int = 0,
        rxtx_factor: float = 1.0,
        is_public: bool = True,
        description: str | None = None,
    ) -> None:
        self.flavorid = flavorid
        self.name = name
        self.vcpus = vcpus
        self.ram = ram
        self.disk = disk
        self.ephemeral = ephemeral
        self.swap = swap
        self.rxtx_factor = rxtx_factor
        self.is_public = is_public
        self.description = description
        self.deleted = False

    @classmethod
    def create(cls, **fields: object) -> Flavor:
        flavorid = str(fields["flavorid"])
        if not flavorid or len(flavorid) > 255 or not all(c.isalnum() or c in "._- " for c in flavorid):
            raise InvalidInput("Invalid input for field/attribute id: 1-255 of [A-Za-z0-9._- ]")
        for name in ("vcpus", "ram"):
            if int(fields[name]) < 1:  # type: ignore[call-overload]
                raise InvalidInput(f"Invalid input for field/attribute {name}: must be >= 1")
        for name in ("disk", "ephemeral", "swap"):
            if int(fields.get(name, 0)) < 0:  # type: ignore[call-overload]
                raise InvalidInput(f"Invalid input for field/attribute {name}: must be >= 0")
        return cls(**fields)  # type: ignore[arg-type]

    def ensure_usable(self) -> None:
        if self.deleted:
            raise NotFound(f"Flavor {self.flavorid} could not be found.")

    def delete(self) -> None:
        self.ensure_usable()
        self._deleted()

    @event("Deleted")
    def _deleted(self) -> None:
        self.deleted = True

    def snapshot_for_instance(self) -> dict[str, object]:
        """What a server keeps of its flavor (Nova embeds the flavor in the instance)."""
        return {
            "id": self.flavorid,
            "name": self.name,
            "vcpus": self.vcpus,
            "ram": self.ram,
            "disk": self.disk,
            "ephemeral": self.ephemeral,
            "swap": self.swap,
        }
