"""ServerGroup: servers that should share a host, or never share one (os-server-groups).

A server created with the ``group`` scheduler hint becomes a member (``MemberAdded``, appended with
the server's ``Instance.Requested``). When the scheduler places a member, the placement appends
``MemberPlaced`` with the host's claim and the instance's ``Scheduled``, in one atomic append under
the group's optimistic-concurrency check, so two members placed at once cannot both break a hard
``affinity``/``anti-affinity`` policy. The soft policies only rank hosts.
"""

from __future__ import annotations

from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from commands.errors import GroupPolicyViolated, InvalidInput, NotFound

POLICIES = ("affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity")


class ServerGroup(Aggregate):
    """Servers that should share a host, or never share one, by the group's policy and rules."""

    class Created(Aggregate.Created):
        """A server group was created with its policy."""

        name: str
        project_id: str
        user_id: str
        policy: str
        rules: dict[str, Any]

        class_version = 2

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            """Version 2: the policy's rules (2.64's ``max_server_per_host``); version 1 had none."""
            state["rules"] = {}

    @event(Created)
    def __init__(self, name: str, project_id: str, user_id: str, policy: str, rules: dict[str, Any]) -> None:
        self.name = name
        self.project_id = project_id
        self.user_id = user_id
        self.policy = policy
        # {"max_server_per_host": n} for anti-affinity (Nova 2.64); {} otherwise
        self.rules = dict(rules)
        # member instance id -> the host it was placed on (None until placed)
        self.members: dict[str, str | None] = {}
        self.deleted = False

    @classmethod
    def create(
        cls, name: str, project_id: str, user_id: str, policy: str, rules: dict[str, Any] | None = None
    ) -> ServerGroup:
        if not name.strip() or len(name) > 255:
            raise InvalidInput("Invalid input for field/attribute name: 1-255 characters")
        if policy not in POLICIES:
            raise InvalidInput(
                f"Invalid input for field/attribute policies: {policy[:64]!r} is not one of {POLICIES}"
            )
        rules = dict(rules or {})
        if rules and policy != "anti-affinity":
            raise InvalidInput(f"Only anti-affinity policy supports rules, not {policy}.")
        limit = rules.get("max_server_per_host")
        if set(rules) - {"max_server_per_host"} or (
            limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1)
        ):
            raise InvalidInput(
                "Invalid input for field/attribute rules: max_server_per_host, a positive integer"
            )
        return cls(name=name, project_id=project_id, user_id=user_id, policy=policy, rules=rules)

    def ensure_visible(self, project_id: str | None) -> None:
        if self.deleted or (project_id is not None and project_id != self.project_id):
            raise NotFound(f"Instance group {self.id} could not be found.")

    def member_hosts(self, excluding: str | None = None) -> set[str]:
        return {h for m, h in self.members.items() if h and m != excluding}

    def allows(self, instance_id: str, host: str) -> bool:
        """Whether the hard policy lets ``instance_id`` run on ``host`` (soft policies always do)."""
        hosts = self.member_hosts(excluding=instance_id)
        if self.policy == "affinity":
            return not hosts or hosts == {host}
        if self.policy == "anti-affinity":
            others = [h for m, h in self.members.items() if h == host and m != instance_id]
            return len(others) < int(self.rules.get("max_server_per_host", 1))
        return True

    def add_member(self, instance_id: str) -> None:
        self.ensure_visible(None)
        if instance_id not in self.members:
            self._member_added(instance_id)

    class MemberAdded(Aggregate.Event):
        """A server was created as a member of the group."""

        instance_id: str

    @event(MemberAdded)
    def _member_added(self, instance_id: str) -> None:
        self.members = {**self.members, instance_id: None}

    def record_placement(self, instance_id: str, host: str) -> None:
        if instance_id not in self.members or self.members[instance_id] == host:
            return
        if not self.allows(instance_id, host):
            raise GroupPolicyViolated(
                f"Host {host} would break the {self.policy} policy of server group {self.id}"
            )
        self._member_placed(instance_id, host)

    class MemberPlaced(Aggregate.Event):
        """A member was placed on a host (the group's policy allowed it)."""

        instance_id: str
        host: str

    @event(MemberPlaced)
    def _member_placed(self, instance_id: str, host: str) -> None:
        self.members = {**self.members, instance_id: host}

    def return_member(self, instance_id: str, host: str) -> None:
        """A member's move was reverted or failed: it is on ``host`` again. Recorded without the policy
        check: the server is already there, and refusing would strand it mid-move."""
        if instance_id in self.members and self.members[instance_id] != host:
            self._member_placed(instance_id, host)

    def remove_member(self, instance_id: str) -> None:
        if instance_id in self.members:
            self._member_removed(instance_id)

    class MemberRemoved(Aggregate.Event):
        """A member left the group (it was deleted)."""

        instance_id: str

    @event(MemberRemoved)
    def _member_removed(self, instance_id: str) -> None:
        self.members = {m: h for m, h in self.members.items() if m != instance_id}

    def delete(self) -> None:
        self.ensure_visible(None)
        self._deleted()

    class Deleted(Aggregate.Event):
        """A server group was deleted."""

    @event(Deleted)
    def _deleted(self) -> None:
        self.deleted = True


_MEMBERSHIP_NS = uuid5(NAMESPACE_URL, "urn:stratus:server-group-membership")


def membership_id(instance_id: str) -> UUID:
    return uuid5(_MEMBERSHIP_NS, instance_id)


class GroupMembership(Aggregate):
    """Which server group an instance joined at creation: how the scheduler and the delete find it."""

    @staticmethod
    def create_id(instance_id: str) -> UUID:
        return membership_id(instance_id)

    class Recorded(Aggregate.Created):
        """An instance joined a server group when it was created (the index the scheduler looks it up by)."""

        instance_id: str
        group_id: str

    @event(Recorded)
    def __init__(self, instance_id: str, group_id: str) -> None:
        self.instance_id = instance_id
        self.group_id = group_id
