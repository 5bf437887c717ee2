"""The scheduler's decision, as a pure function: which hosts to try for an instance, in which order.

The input is an advisory view (free resources per host, possibly stale); the Host aggregate checks
capacity again when the claim is appended, so this only has to rank plausible candidates.
Like Nova's default weigher, it spreads: the host with the most free RAM comes first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from commands.host import Resources
from commands.server_group import ServerGroup

NO_VALID_HOST = "No valid host was found. There are not enough hosts available."

_RESOURCES = ("vcpus", "memory_mb", "disk_gb")


@dataclass(frozen=True)
class Selection:
    """Hosts to try, best first; when empty, ``details`` says why none fits."""

    hosts: tuple[str, ...]
    details: str = ""


def select_hosts(free: Mapping[str, Resources], need: Resources) -> Selection:
    fitting = [
        name for name, room in free.items() if all(getattr(need, r) <= getattr(room, r) for r in _RESOURCES)
    ]
    if fitting:
        fitting.sort(key=lambda name: (-free[name].memory_mb, -free[name].vcpus, name))
        return Selection(tuple(fitting))
    return Selection((), _shortage(free, need))


def _shortage(free: Mapping[str, Resources], need: Resources) -> str:
    wanted = f"Requested vcpus={need.vcpus}, memory_mb={need.memory_mb}, disk_gb={need.disk_gb}"
    if not free:
        return f"{wanted}; no compute hosts are registered."
    short: dict[str, int] = dict.fromkeys(_RESOURCES, 0)
    for room in free.values():
        for r in _RESOURCES:
            if getattr(need, r) > getattr(room, r):
                short[r] += 1
    parts = [
        f"{count} short of {r} (most free: {max(getattr(room, r) for room in free.values())})"
        for r, count in short.items()
        if count
    ]
    return f"{wanted}; of {len(free)} hosts, " + ", ".join(parts) + "."


def ranked_for_group(selection: Selection, group: ServerGroup, instance_id: str) -> Selection:
    """The soft policies' preference: hosts with members first (soft-affinity) or last (soft-anti-affinity).

    The hard policies filter hosts before selection (``ServerGroup.allows``) and are checked again
    when the claim is appended.
    """
    with_members = group.member_hosts(excluding=instance_id)
    if group.policy == "soft-affinity":
        hosts = sorted(selection.hosts, key=lambda h: h not in with_members)
    elif group.policy == "soft-anti-affinity":
        hosts = sorted(selection.hosts, key=lambda h: h in with_members)
    else:
        return selection
    return Selection(tuple(hosts), selection.details)
