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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from commands.quota import check

_NS = uuid5(NAMESPACE_URL, "urn:stratus:project-usage")

# The resources a server counts against (Nova's instance quotas).
COUNTED = ("instances", "cores", "ram")


def usage_aggregate_id(project_id: str) -> UUID:
    return uuid5(_NS, project_id)


class ProjectUsage(Aggregate):
    @staticmethod
    def create_id(project_id: str) -> UUID:
        return usage_aggregate_id(project_id)

    @event("Opened")
    def __init__(self, project_id: str) -> None:
        self.project_id = project_id
        # instance id -> {"cores": n, "ram": mb}; an instance whose resources were given back has zeros.
        self.holdings: dict[str, dict[str, int]] = {}

    @classmethod
    def open(cls, project_id: str) -> ProjectUsage:
        return cls(project_id=project_id)  # type: ignore[arg-type]

    def used(self) -> dict[str, int]:
        h = self.holdings.values()
        return {
            "instances": len(self.holdings),
            "cores": sum(x["cores"] for x in h),
            "ram": sum(x["ram"] for x in h),
        }

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

    @event("InstanceCharged")
    def _charged(self, instance_id: str, cores: int, ram: int) -> None:
        self.holdings = {**self.holdings, instance_id: {"cores": cores, "ram": ram}}

    def release_resources(self, instance_id: str) -> bool:
        """The instance failed: its cores and RAM are free, it still counts as an instance."""
        held = self.holdings.get(instance_id)
        if held is None or (held["cores"] == 0 and held["ram"] == 0):
            return False
        self._resources_released(instance_id)
        return True

    @event("ResourcesReleased")
    def _resources_released(self, instance_id: str) -> None:
        self.holdings = {**self.holdings, instance_id: {"cores": 0, "ram": 0}}

    def release(self, instance_id: str) -> bool:
        """The instance is deleted: nothing of it counts any more."""
        if instance_id not in self.holdings:
            return False
        self._instance_released(instance_id)
        return True

    @event("InstanceReleased")
    def _instance_released(self, instance_id: str) -> None:
        self.holdings = {k: v for k, v in self.holdings.items() if k != instance_id}
