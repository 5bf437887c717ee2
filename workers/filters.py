"""The scheduler's filters, as pure functions over the hosts' current state: which hosts may take an
instance, and (when none may) which filter removed them, in Nova's words.

Each filter keeps the hosts it passes; the results list how many hosts each one started with and
kept, as Nova logs them ("Filter results: ['ComputeFilter: (start: 4, end: 3)', ...]"). The fault
of an instance nobody can take carries that list, so an operator sees at once whether it was the
zone, a trait, the server group or plain lack of room.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from commands.host import Host, Resources
from commands.host_aggregate import DEFAULT_ZONE
from commands.server_group import ServerGroup

_RESOURCES = ("vcpus", "memory_mb", "disk_gb")
TRAIT_PREFIX = "trait:"


@dataclass(frozen=True)
class Request:
    """What one instance asks of a host."""

    instance_id: str
    need: Resources
    zone: str | None = None
    group: ServerGroup | None = None
    required_traits: frozenset[str] = frozenset()
    forbidden_traits: frozenset[str] = frozenset()


def traits_of(extra_specs: dict[str, str]) -> tuple[frozenset[str], frozenset[str]]:
    """Flavor extra specs ``trait:CUSTOM_X=required|forbidden`` -> (required, forbidden)."""
    required, forbidden = set(), set()
    for key, value in extra_specs.items():
        if key.startswith(TRAIT_PREFIX):
            name = key.removeprefix(TRAIT_PREFIX)
            if value == "required":
                required.add(name)
            elif value == "forbidden":
                forbidden.add(name)
    return frozenset(required), frozenset(forbidden)


@dataclass
class Filtered:
    """What the filters left of the hosts for one request, and which filter removed the last of them."""

    hosts: list[Host]
    free: dict[str, Resources] = field(default_factory=dict)  # of the hosts the resources were checked on
    results: list[str] = field(default_factory=list)
    removed_by: str | None = None  # the filter that left no host
    last_hosts: list[Host] = field(default_factory=list)  # what that filter was given

    def summary(self) -> str:
        return "Filter results: [" + ", ".join(f"'{r}'" for r in self.results) + "]"


def _fits(room: Resources, need: Resources) -> bool:
    return need.vcpus <= room.vcpus and need.memory_mb <= room.memory_mb and need.disk_gb <= room.disk_gb


FILTERS: Sequence[tuple[str, Callable[[Host, Request], bool]]] = (
    ("ComputeFilter", lambda h, r: h.schedulable),
    ("AvailabilityZoneFilter", lambda h, r: r.zone is None or h.availability_zone(DEFAULT_ZONE) == r.zone),
    ("ServerGroupFilter", lambda h, r: r.group is None or r.group.allows(r.instance_id, h.hostname)),
    (
        "TraitsFilter",
        lambda h, r: r.required_traits <= set(h.traits) and not r.forbidden_traits & set(h.traits),
    ),
)
# Filters that keep every host when the request asks nothing of them: not run over the hosts then
# (the decision's cost at thousands of hosts), their results still reported.
_ASKS: dict[str, Callable[[Request], bool]] = {
    "AvailabilityZoneFilter": lambda r: r.zone is not None,
    "ServerGroupFilter": lambda r: r.group is not None,
    "TraitsFilter": lambda r: bool(r.required_traits or r.forbidden_traits),
}


def _ALWAYS(_request: Request) -> bool:
    return True


def run_filters(
    hosts: Sequence[Host], request: Request, free_of: Callable[[Host], Resources] = Host.free
) -> Filtered:
    """Run every filter, then the resources check (``free_of``: a host's free resources, e.g. cached)."""
    out = Filtered(list(hosts))
    resources = ("ResourcesFilter", lambda h, r: _fits(out.free.setdefault(h.hostname, free_of(h)), r.need))
    for name, passes in (*FILTERS, resources):
        start = len(out.hosts)
        out.last_hosts = out.hosts
        if _ASKS.get(name, _ALWAYS)(request):
            out.hosts = [h for h in out.hosts if passes(h, request)]
        out.results.append(f"{name}: (start: {start}, end: {len(out.hosts)})")
        if not out.hosts:
            out.removed_by = name
            break
    return out
