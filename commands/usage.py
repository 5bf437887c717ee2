"""ProjectUsage: what a project's servers hold against its quota, decided where the servers are created.

A create appends its ``Instance.Requested`` events and this aggregate's ``InstanceCharged`` events in
one atomic append, under this aggregate's optimistic-concurrency check. Two creates racing for a
project's last cores both load the same usage, but only the first append matches the aggregate's
last sequence: the second reloads, sees the new usage and is refused if it no longer fits. The usage
is therefore never read from a read model that may lag, and never exceeds a limit.

What an instance holds follows Nova's counting: the instance counts towards ``instances`` until it
is deleted; its cores and RAM are given back when it is deleted or when it fails (a faulted build
holds no resources on a host either). Releases are appended atomically with the instance event that
causes them, as the host's claims are, so usage cannot drift from the servers that exist.

Every create of a project goes through this aggregate, so its history grows with the project's
life, and loading it (every create does) would grow with it. The usage is therefore kept in
*epochs*: once an epoch holds ``EPOCH_EVENTS`` events, the next write closes it (``BooksClosed``)
and opens the next epoch's aggregate with the live holdings carried forward (``Opened``), in the
same atomic append and under the closed epoch's concurrency check. A load reads one short epoch;
``Handlers`` remembers the current epoch of each project and walks forward from there;
``newest_epoch`` finds it in O(log epochs) reads for a process that remembers none.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from commands.quota import check

_NS = uuid5(NAMESPACE_URL, "urn:stratus:project-usage")

# The resources a server counts against (Nova's instance quotas).
COUNTED = ("instances", "cores", "ram")


# Events in one epoch before the books are closed and carried forward into the next one.
EPOCH_EVENTS = 64


def usage_aggregate_id(project_id: str, epoch: int = 0) -> UUID:
    return uuid5(_NS, project_id if epoch == 0 else f"{project_id}\x00{epoch}")


def newest_epoch(start: int, exists: Callable[[int], bool]) -> int:
    """The newest epoch of a project's usage, from ``start`` (one that exists, or 0), in O(log n)
    calls of ``exists`` (one read of an epoch's last event each) instead of loading every epoch in
    between: a process that remembers no epoch (it just started) would otherwise read a project's
    whole usage history, 64 events per epoch. Epoch n+1 exists only once n is closed (the two are
    appended together), so the epochs that exist are 0..newest without a gap: gallop, then bisect."""
    lo, step = start, 1
    while exists(lo + step):
        lo, step = lo + step, step * 2
    hi = lo + step
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if exists(mid) else (lo, mid)
    return lo


class ProjectUsage(Aggregate):
    """What a project's servers hold against its quota (one epoch of it), decided where they are created."""

    @staticmethod
    def create_id(project_id: str, epoch: int = 0, holdings: object = None) -> UUID:
        return usage_aggregate_id(project_id, epoch)

    class Opened(Aggregate.Created):
        """A project's quota usage was opened: its first epoch (with its first server), or the next epoch,
        carrying the live holdings of the epoch just closed."""

        project_id: str
        epoch: int
        holdings: dict[str, dict[str, int]] | None

    @event(Opened)
    def __init__(
        self, project_id: str, epoch: int = 0, holdings: dict[str, dict[str, int]] | None = None
    ) -> None:
        self.project_id = project_id
        self.epoch = epoch
        # instance id -> {"cores": n, "ram": mb}; an instance whose resources were given back has zeros.
        self.holdings: dict[str, dict[str, int]] = dict(holdings or {})
        self.closed = False
        self._owns_holdings = True  # False while ``holdings`` is shared with a copy (``__deepcopy__``)
        self._cores = sum(h["cores"] for h in self.holdings.values())
        self._ram = sum(h["ram"] for h in self.holdings.values())

    def __deepcopy__(self, memo: dict[int, object]) -> ProjectUsage:
        """A copy that shares ``holdings``: the first change on either side copies that dict (copy on
        write), so a copy and its original never see each other's changes, and copying the usage of a
        project with thousands of servers (the aggregate cache hands every command a copy) costs what
        copying an empty one does."""
        clone = copy.copy(self)
        clone.__dict__["_pending_events"] = list(self.__dict__["_pending_events"])
        self._owns_holdings = clone._owns_holdings = False
        return clone

    @classmethod
    def open(cls, project_id: str) -> ProjectUsage:
        return cls(project_id=project_id, epoch=0, holdings={})  # type: ignore[arg-type]

    # -- epochs ---------------------------------------------------------------------------------
    @property
    def full(self) -> bool:
        return self.version >= EPOCH_EVENTS

    def carry_forward(self) -> ProjectUsage:
        """Close this epoch and open the next with the live holdings; both go in the caller's append."""
        if self.closed:
            raise ValueError(f"epoch {self.epoch} of project {self.project_id}'s usage is closed")
        self._books_closed(self.epoch + 1)
        return ProjectUsage(  # type: ignore[arg-type]
            project_id=self.project_id, epoch=self.epoch + 1, holdings=dict(self.holdings)
        )

    class BooksClosed(Aggregate.Event):
        """This epoch of the project's usage is closed; its live holdings were carried into epoch
        next_epoch, appended atomically with this event."""

        next_epoch: int

    @event(BooksClosed)
    def _books_closed(self, next_epoch: int) -> None:
        self.closed = True

    def used(self) -> dict[str, int]:
        return {"instances": len(self.holdings), "cores": self._cores, "ram": self._ram}

    def _set_holding(self, instance_id: str, held: dict[str, int] | None) -> None:
        """One server's holding changes (None: it holds nothing and no longer counts): in place when
        this copy owns ``holdings``, else on its own copy first; the totals follow. A charge of k
        servers in a project of n costs O(n + k), not O(n * k)."""
        if not self._owns_holdings:
            self.holdings = dict(self.holdings)
            self._owns_holdings = True
        old = self.holdings.pop(instance_id, None)
        if old is not None:
            self._cores -= old["cores"]
            self._ram -= old["ram"]
        if held is not None:
            self.holdings[instance_id] = held
            self._cores += held["cores"]
            self._ram += held["ram"]

    # -- commands -------------------------------------------------------------------------------
    def charge(self, instance_ids: Iterable[str], cores: int, ram: int, limits: Mapping[str, int]) -> None:
        """Count new servers of ``cores`` and ``ram`` each, all or none, within ``limits``."""
        new = [i for i in instance_ids if i not in self.holdings]
        if not new:
            return  # a repeated create: charged already
        n = len(new)
        check(limits, self.used(), {"instances": n, "cores": n * cores, "ram": n * ram})
        for instance_id in new:
            self._charged(instance_id, cores, ram)

    class InstanceCharged(Aggregate.Event):
        """A new server counts against its project's quota: one instance, its cores and RAM (MiB). Appended
        atomically with the server's Instance.Requested, after the limits were checked."""

        instance_id: str
        cores: int
        ram: int

    @event(InstanceCharged)
    def _charged(self, instance_id: str, cores: int, ram: int) -> None:
        self._set_holding(instance_id, {"cores": cores, "ram": ram})

    def hold(self, instance_id: str, cores: int, ram: int, limits: Mapping[str, int]) -> bool:
        """A resize: the instance holds ``cores`` and ``ram`` from now on; growing is checked against
        ``limits`` (Nova's quota check for an upsize), shrinking never is. False: nothing changed."""
        held = self.holdings.get(instance_id)
        if held is None or (held["cores"], held["ram"]) == (cores, ram):
            return False
        grow = {"cores": max(cores - held["cores"], 0), "ram": max(ram - held["ram"], 0)}
        if any(grow.values()):
            check(limits, self.used(), grow)
        self._held(instance_id, cores, ram)
        return True

    class HoldingChanged(Aggregate.Event):
        """A resize changed what the instance holds against the project's quota: the larger flavor while
        the resize is under way, then the kept one."""

        instance_id: str
        cores: int
        ram: int

    @event(HoldingChanged)
    def _held(self, instance_id: str, cores: int, ram: int) -> None:
        self._set_holding(instance_id, {"cores": cores, "ram": ram})

    def release_resources(self, instance_id: str) -> bool:
        """The instance failed: its cores and RAM are free, it still counts as an instance."""
        held = self.holdings.get(instance_id)
        if held is None or (held["cores"] == 0 and held["ram"] == 0):
            return False
        self._resources_released(instance_id)
        return True

    class ResourcesReleased(Aggregate.Event):
        """A server failed: its cores and RAM no longer count against the quota (it still counts as an
        instance until deleted)."""

        instance_id: str

    @event(ResourcesReleased)
    def _resources_released(self, instance_id: str) -> None:
        self._set_holding(instance_id, {"cores": 0, "ram": 0})

    def release(self, instance_id: str) -> bool:
        """The instance is deleted: nothing of it counts any more."""
        if instance_id not in self.holdings:
            return False
        self._instance_released(instance_id)
        return True

    class InstanceReleased(Aggregate.Event):
        """A server was deleted: nothing of it counts against the quota any more."""

        instance_id: str

    @event(InstanceReleased)
    def _instance_released(self, instance_id: str) -> None:
        self._set_holding(instance_id, None)
