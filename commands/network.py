"""Network: a fixed IPv4 network whose addresses are handed to servers, one each, never twice.

The role nova-network's fixed IPs had, minimal: one configured network (``STRATUS_FIXED_NETWORK``).
An allocation is an event on the network's aggregate, appended atomically with the server's
``Instance.Requested`` under the network's optimistic-concurrency check, so two creates that pick
the same free address cannot both be recorded: the second is refused, reloads and picks another.
A release is appended with the ``Instance.Deleted`` that frees the address.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from commands.errors import InvalidInput, NoMoreFixedIps

_NS = uuid5(NAMESPACE_URL, "urn:stratus:network")
# OpenStack's MAC prefix for the ports it creates.
MAC_PREFIX = "fa:16:3e"


def network_aggregate_id(name: str) -> UUID:
    """A network is addressed by its name; its id (the ``uuid`` clients name in ``networks``) is derived."""
    return uuid5(_NS, name)


@dataclass(frozen=True)
class FixedNetwork:
    """The configured network: ``name`` and ``cidr`` (``STRATUS_FIXED_NETWORK_NAME``/``..._NETWORK``)."""

    name: str
    cidr: str

    @property
    def id(self) -> UUID:
        return network_aggregate_id(self.name)


class Network(Aggregate):
    """A fixed IPv4 network whose addresses are handed to servers, one each, never twice."""

    class Defined(Aggregate.Created):
        """A fixed network came into use (its first allocation)."""

        name: str
        cidr: str
        gateway: str

    @event(Defined)
    def __init__(self, name: str, cidr: str, gateway: str) -> None:
        self.name = name
        self.cidr = cidr
        self.gateway = gateway
        self.allocations: dict[str, str] = {}  # address -> instance id
        self.macs: dict[str, str] = {}  # instance id -> mac

    @classmethod
    def define(cls, config: FixedNetwork) -> Network:
        try:
            net = ipaddress.IPv4Network(config.cidr, strict=True)
        except ValueError as e:
            raise InvalidInput(f"Invalid fixed network {config.cidr!r}: {e}") from e
        if net.num_addresses < 4:
            raise InvalidInput(f"Fixed network {config.cidr} is too small (a /30 at least)")
        gateway = str(next(net.hosts()))
        return cls._create(
            cls.Defined,
            id=network_aggregate_id(config.name),
            name=config.name,
            cidr=str(net),
            gateway=gateway,
        )

    @property
    def network_id(self) -> str:
        return str(self.id)

    def address_of(self, instance_id: str) -> str | None:
        return next((a for a, i in self.allocations.items() if i == instance_id), None)

    def allocate(self, instance_id: str) -> dict[str, str]:
        """Give ``instance_id`` the lowest free address (the one it has, if it has one); its port."""
        address = self.address_of(instance_id)
        if address is None:
            address = self._free_address()
            self._address_allocated(instance_id, address, self._new_mac(instance_id))
        return self.port(instance_id)

    def port(self, instance_id: str) -> dict[str, str]:
        address = self.address_of(instance_id)
        if address is None:
            raise InvalidInput(f"Instance {instance_id} has no address on network {self.name}")
        return {
            "network_id": self.network_id,
            "network_name": self.name,
            "address": address,
            "mac": self.macs[instance_id],
        }

    def _free_address(self) -> str:
        net = ipaddress.IPv4Network(self.cidr)
        for host in net.hosts():
            address = str(host)
            if address != self.gateway and address not in self.allocations:
                return address
        raise NoMoreFixedIps(f"Zero fixed IPs available on network {self.name} ({self.cidr}).")

    def _new_mac(self, instance_id: str) -> str:
        used = set(self.macs.values())
        for salt in range(1 << 16):
            digest = hashlib.sha256(f"{self.id}:{instance_id}:{salt}".encode()).digest()
            mac = MAC_PREFIX + "".join(f":{b:02x}" for b in digest[:3])
            if mac not in used:
                return mac
        raise NoMoreFixedIps(f"No free MAC address on network {self.name}.")

    class AddressAllocated(Aggregate.Event):
        """An address (and MAC) of the network was given to an instance."""

        instance_id: str
        address: str
        mac: str

    @event(AddressAllocated)
    def _address_allocated(self, instance_id: str, address: str, mac: str) -> None:
        self.allocations[address] = instance_id
        self.macs[instance_id] = mac

    def release(self, instance_id: str) -> bool:
        """Free the instance's address; False when it holds none (released already)."""
        address = self.address_of(instance_id)
        if address is None:
            return False
        self._address_released(instance_id, address)
        return True

    class AddressReleased(Aggregate.Event):
        """An instance's address returned to the network (the instance was deleted)."""

        instance_id: str
        address: str

    @event(AddressReleased)
    def _address_released(self, instance_id: str, address: str) -> None:
        self.allocations.pop(address, None)
        self.macs.pop(instance_id, None)
