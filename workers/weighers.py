"""The scheduler's weighers: rank the hosts that passed the filters, as Nova's do.

Each weigher scores every host on one resource (free RAM, free vCPUs, free disk), normalized to
0..1 across the candidates, times its multiplier; a host's weight is the sum. Positive multipliers
spread instances (most free first), negative ones pack them (least free first), 0 ignores the
resource. Nova's defaults: every multiplier 1.0. Ties go to the host name, for stable order.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass

from commands.host import Resources
from stratus.config import Settings


@dataclass(frozen=True)
class Multipliers:
    """Each weigher's multiplier (Nova's ``[filter_scheduler] *_weight_multiplier``): positive spreads,
    negative packs, 0 ignores the resource."""

    ram: float = 1.0
    cpu: float = 1.0
    disk: float = 1.0

    @classmethod
    def of(cls, settings: Settings) -> Multipliers:
        """``STRATUS_RAM_WEIGHT_MULTIPLIER`` etc., as ``settings`` read them."""
        return cls(
            settings.ram_weight_multiplier, settings.cpu_weight_multiplier, settings.disk_weight_multiplier
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Multipliers:
        """The multipliers an environment sets (read through ``Settings``, the one reader of settings)."""
        return cls.of(Settings.from_env(env))


_RESOURCES = ("memory_mb", "vcpus", "disk_gb")


def _scales(rooms: list[Resources], multipliers: Multipliers) -> list[tuple[str, float, float]]:
    """(resource, its lowest value across the candidates, multiplier / its range) per weigher that counts.

    When every candidate has the same amount, the range is 0..that amount instead: the weights are
    then equal, as Nova's, and stay meaningful once a ``Ranking`` takes from some of the hosts (with
    no range at all, every host would keep weight 0 and the first by name would take every server)."""
    out = []
    weights = (multipliers.ram, multipliers.cpu, multipliers.disk)
    for attr, multiplier in zip(_RESOURCES, weights, strict=True):
        if multiplier:
            values = [getattr(room, attr) for room in rooms]
            low, high = min(values), max(values)
            if high != low:
                out.append((attr, low, multiplier / (high - low)))
            elif high > 0:
                out.append((attr, 0, multiplier / high))
    return out


def weigh(free: Mapping[str, Resources], multipliers: Multipliers = Multipliers()) -> list[str]:
    """Host names, heaviest first."""
    names = list(free)
    if not names:
        return []
    rooms = list(free.values())
    weights = [0.0] * len(names)
    for attr, low, scale in _scales(rooms, multipliers):
        weights = [w + (getattr(r, attr) - low) * scale for w, r in zip(weights, rooms, strict=True)]
    order = sorted(zip([-w for w in weights], names, strict=True))  # heaviest first, ties by name
    return [name for _, name in order]


class Ranking:
    """The hosts ``weigh`` ranks, for placing many requests of one size in one pass: ``take`` gives
    the heaviest host with room and takes the room from it, which moves it down the ranking.

    Each resource is normalized once, over the candidates as they were at the start of the pass (Nova
    normalizes once per request); a host's weight then changes only when it is taken from. A pass
    costs one sort and a heap operation per server scheduled instead of filtering and weighing every host
    for every request."""

    def __init__(self, free: Mapping[str, Resources], multipliers: Multipliers = Multipliers()) -> None:
        self._free = dict(free)
        self._scales = _scales(list(self._free.values()), multipliers) if self._free else []
        self._weights = {name: self._weight(room) for name, room in self._free.items()}
        self._heap = [(-w, name) for name, w in self._weights.items()]
        heapq.heapify(self._heap)

    def _weight(self, room: Resources) -> float:
        return sum((getattr(room, attr) - low) * scale for attr, low, scale in self._scales)

    def take(self, need: Resources) -> str | None:
        """The heaviest host with room for ``need``, now ``need`` poorer (None: no host has room).
        Hosts without room leave the ranking: within one pass they only lose room."""
        while self._heap:
            negative, name = heapq.heappop(self._heap)
            room = self._free.get(name)
            if room is None or -negative != self._weights[name]:
                continue  # dropped, or an entry from before this host was taken from
            if need.vcpus > room.vcpus or need.memory_mb > room.memory_mb or need.disk_gb > room.disk_gb:
                del self._free[name]
                continue
            room = self._free[name] = Resources(
                room.vcpus - need.vcpus, room.memory_mb - need.memory_mb, room.disk_gb - need.disk_gb
            )
            weight = self._weights[name] = self._weight(room)
            heapq.heappush(self._heap, (-weight, name))
            return name
        return None

    def drop(self, name: str) -> None:
        """Take ``name`` out of the ranking (its claim found it fuller than the view had it)."""
        self._free.pop(name, None)

    def update(self, name: str, room: Resources | None) -> None:
        """``name`` has ``room`` now (None: it no longer passes the filters); the normalization stays."""
        if room is None:
            self._free.pop(name, None)
            return
        self._free[name] = room
        weight = self._weights[name] = self._weight(room)
        heapq.heappush(self._heap, (-weight, name))
