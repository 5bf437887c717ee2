"""What a quota counts outside a project's usage: a project's server groups, a user's key pairs.

Each count is one small aggregate (a ledger) whose members are added and removed in the same atomic
append as the server group or key pair they stand for, under the ledger's own concurrency check. A
limit is therefore checked at decision time against the count the log holds, and two concurrent
creates cannot both take the last place (the loser decides again and is refused).
"""

from __future__ import annotations

from collections.abc import Mapping
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from commands.quota import check

_NS = uuid5(NAMESPACE_URL, "urn:stratus:quota-ledger")
SERVER_GROUPS = "server_groups"  # per project
KEY_PAIRS = "key_pairs"  # per user


def ledger_id(resource: str, owner: str) -> UUID:
    return uuid5(_NS, f"{resource}\x00{owner}")


class Ledger(Aggregate):
    """What one quota counts for one owner outside a project's usage (server groups, key pairs)."""

    @staticmethod
    def create_id(resource: str, owner: str) -> UUID:
        return ledger_id(resource, owner)

    class Opened(Aggregate.Created):
        """A quota ledger was opened: what a quota counts outside a project's usage (a project's server
        groups, a user's key pairs), appended to with the thing it counts."""

        resource: str
        owner: str

    @event(Opened)
    def __init__(self, resource: str, owner: str) -> None:
        self.resource = resource
        self.owner = owner
        self.members: frozenset[str] = frozenset()

    def admit(self, member: str, limits: Mapping[str, int]) -> None:
        """Count ``member``, within ``limits`` of this ledger's resource (Nova's 403 wording)."""
        if member in self.members:
            return
        check(limits, {self.resource: len(self.members)}, {self.resource: 1})
        self._added(member)

    class MemberAdded(Aggregate.Event):
        """A member was counted: a server group created (its id) or a key pair created (its name), in the
        same atomic append."""

        member: str

    @event(MemberAdded)
    def _added(self, member: str) -> None:
        self.members = self.members | {member}

    def release(self, member: str) -> None:
        if member in self.members:
            self._removed(member)

    class MemberRemoved(Aggregate.Event):
        """A member was no longer counted: its server group or key pair was deleted, in the same atomic
        append."""

        member: str

    @event(MemberRemoved)
    def _removed(self, member: str) -> None:
        self.members = self.members - {member}
