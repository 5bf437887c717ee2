"""The scheduler's advisory view of every host's free resources, folded from the hosts' events.

The view replays ``Host`` events into ``Host`` aggregates with the domain's own code, so that
"free" means here exactly what it means when the claim is checked. It is advisory: it may lag the
log, and a host it suggests is checked again by the Host aggregate under optimistic
concurrency when the claim is appended.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from uuid import UUID

from eventsourcing.domain import Aggregate, CanMutateAggregate, OriginatorVersionError

from commands.host import Host, Resources
from commands.host_aggregate import DEFAULT_ZONE

log = logging.getLogger(__name__)


class HostView:
    """Every host's aggregate and free resources, as far as the log was folded in; advisory."""

    def __init__(self, reload: Callable[[UUID], Host | None] = lambda _id: None) -> None:
        """``reload`` reads one host from the log, to repair the view after a gap in its feed."""
        self._reload = reload
        self._hosts: dict[UUID, Host] = {}
        self._free: dict[UUID, tuple[int, Resources]] = {}  # host -> (its version, its free resources)
        self._by_name: dict[str, UUID] = {}
        # The log position of the last event applied (the stream sequence).
        self.position = 0
        # The names of the hosts that changed, in order, for those who keep something per host up to
        # date (the scheduler's standing rankings): ``changed_since(cursor)``. ``_changes_base`` is
        # the cursor of its first entry (the list is restarted when it grows long).
        self._changes: list[str] = []
        self._changes_base = 0

    def apply(self, event: CanMutateAggregate[UUID], position: int) -> None:
        """Fold one host event (in log order) into the view."""
        if position <= self.position:
            return  # seen already
        current = self._hosts.get(event.originator_id)
        if current is not None and event.originator_version <= current.version:
            self.position = position  # in the host already: it was loaded past this event (``start``)
            return
        if (current is None) != isinstance(event, Aggregate.Created):
            # An event for a host we do not know, or a second creation: a gap in what we were fed.
            self._gap(event, position)
            return
        try:
            host = event.mutate(current)  # type: ignore[arg-type]
        except OriginatorVersionError:
            self._gap(event, position)
            return
        else:
            if isinstance(host, Host):
                self._put(host)
        self.position = position

    def start(self, hosts: Iterable[Host], position: int) -> None:
        """Begin from ``hosts`` as loaded (each at least as new as log position ``position``), to be fed
        the Host events after ``position``: those a host already holds are skipped by its version."""
        self.clear()
        for host in hosts:
            self._put(host)
        self.position = position

    def skip_held(self, host_id: UUID, version: int, position: int) -> bool:
        """Pass over the event at ``position`` if the view's host holds its ``version`` already (True);
        False: the event must be applied."""
        if position <= self.position:
            return True
        current = self._hosts.get(host_id)
        if current is None or version > current.version:
            return False
        self.position = position
        return True

    def _put(self, host: Host) -> None:
        self._hosts[host.id] = host
        self._by_name[host.hostname] = host.id
        self._changed(host.hostname)

    def _changed(self, hostname: str) -> None:
        if len(self._changes) >= 100_000:
            self._changes_base += len(self._changes)
            self._changes = []
        self._changes.append(hostname)

    @property
    def cursor(self) -> int:
        """Where the list of changed hosts ends now."""
        return self._changes_base + len(self._changes)

    def changed_since(self, cursor: int) -> list[str] | None:
        """The hosts changed since ``cursor`` (each once); None when that is too long ago to tell."""
        if cursor < self._changes_base:
            return None
        return list(dict.fromkeys(self._changes[cursor - self._changes_base :]))

    def named(self, hostname: str) -> Host | None:
        host_id = self._by_name.get(hostname)
        return self._hosts.get(host_id) if host_id is not None else None

    def clear(self) -> None:
        """Forget everything, to be fed again from the beginning of the log."""
        self._hosts.clear()
        self._free.clear()
        self._by_name.clear()
        self._changes_base += len(self._changes) + 1  # every cursor handed out is now too old
        self._changes = []
        self.position = 0

    def _gap(self, event: CanMutateAggregate[UUID], position: int) -> None:
        """Read the host afresh rather than guess (or forget it, if it cannot be read)."""
        log.warning("host view: gap in the events of host %s at position %d", event.originator_id, position)
        self.reload(event.originator_id)
        self.position = position

    def reload(self, host_id: UUID) -> bool:
        """Read one host afresh from the log (or forget it, if it cannot be read); whether the view
        has it now."""
        host = self._reload(host_id)
        if host is None:
            gone = self._hosts.pop(host_id, None)
            if gone is not None:
                self._by_name.pop(gone.hostname, None)
                self._changed(gone.hostname)
            return False
        self._put(host)
        return True

    def free(self, zone: str | None = None) -> dict[str, Resources]:
        """Free resources of the hosts the scheduler may use: enabled, not forced down, and in
        availability zone ``zone`` when one is asked for (hosts in no zone are in ``nova``)."""
        return {
            h.hostname: h.free()
            for h in self._hosts.values()
            if h.schedulable and (zone is None or h.availability_zone(DEFAULT_ZONE) == zone)
        }

    def hosts(self) -> list[Host]:
        """Every host as the view has it (the scheduler's filters decide which it may use)."""
        return list(self._hosts.values())

    def free_of(self, host: Host) -> Resources:
        """``host.free()``, computed again only when the host changed (every decision asks all hosts)."""
        cached = self._free.get(host.id)
        if cached is None or cached[0] != host.version:
            cached = self._free[host.id] = (host.version, host.free())
        return cached[1]

    def __len__(self) -> int:
        return len(self._hosts)
