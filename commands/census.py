"""GuestCensus: what a host's hypervisor runs that Stratus did not put there, as the host found it.

One aggregate per compute host (its id derived from the host name). The hypervisor worker's
reconciliation records each stray guest once: a domain named like an instance
(``instance-<uuid>``) with no live instance of that id on the host. A stray whose instance the log
shows deleted is an orphan (a teardown that never happened) and the worker destroys it; any other
is left alone for an operator, because it may not be ours. The record changes only when what is
found changes, so a periodic check does not grow the log.
"""

from __future__ import annotations

from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

DESTROYED = "destroyed"
LEFT_ALONE = "left alone"


def census_id(hostname: str) -> UUID:
    return uuid5(NAMESPACE_URL, f"urn:stratus:guest-census:{hostname}")


class GuestCensus(Aggregate):
    """What a host's hypervisor runs that Stratus did not put there, as the host last found it."""

    class Opened(Aggregate.Created):
        """The census of one compute host's stray guests was opened (once per host)."""

        hostname: str

    @event(Opened)
    def __init__(self, hostname: str) -> None:
        self.hostname = hostname
        self.strays: dict[str, str] = {}  # domain uuid -> what was done

    @classmethod
    def open(cls, hostname: str) -> GuestCensus:
        return cls._create(cls.Opened, id=census_id(hostname), hostname=hostname)

    def found_stray(self, uuid: str, name: str, power_state: int, action: str) -> bool:
        """Record a stray guest; False when it was recorded already with the same outcome."""
        if self.strays.get(uuid) == action:
            return False
        self._stray_guest_found(uuid, name, power_state, action)
        return True

    class StrayGuestFound(Aggregate.Event):
        """The host runs a guest named like an instance that no live instance on this host accounts for:
        its domain uuid and name, power state, and what the worker did (destroyed: its instance is
        deleted, an orphan; left alone: not known to be ours)."""

        uuid: str
        name: str
        power_state: int
        action: str

    @event(StrayGuestFound)
    def _stray_guest_found(self, uuid: str, name: str, power_state: int, action: str) -> None:
        self.strays[uuid] = action

    def forget_gone(self, present: set[str]) -> bool:
        """Strays no longer on the host are forgotten, so a new one with the same id is reported."""
        gone = sorted(u for u in self.strays if u not in present)
        if not gone:
            return False
        self._strays_gone(gone)
        return True

    class StraysGone(Aggregate.Event):
        """Stray guests recorded earlier are no longer on the host."""

        uuids: list[str]

    @event(StraysGone)
    def _strays_gone(self, uuids: list[str]) -> None:
        for u in uuids:
            self.strays.pop(u, None)
