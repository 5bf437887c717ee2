"""The scheduler's weighers: rank the hosts that passed the filters, as Nova's do.

Each weigher scores every host on one resource (free RAM, free vCPUs, free disk), normalized to
0..1 across the candidates, times its multiplier; a host's weight is the sum. Positive multipliers
spread instances (most free first), negative ones pack them (least free first), 0 ignores the
resource. Nova's defaults: every multiplier 1.0. Ties go to the host name, for stable order.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from commands.host import Resources


@dataclass(frozen=True)
class Multipliers:
    ram: float = 1.0
    cpu: float = 1.0
    disk: float = 1.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Multipliers:
        """``STRATUS_RAM_WEIGHT_MULTIPLIER`` etc. (Nova's ``[filter_scheduler] *_weight_multiplier``)."""
        return cls(
            float(env.get("STRATUS_RAM_WEIGHT_MULTIPLIER", cls.ram)),
            float(env.get("STRATUS_CPU_WEIGHT_MULTIPLIER", cls.cpu)),
            float(env.get("STRATUS_DISK_WEIGHT_MULTIPLIER", cls.disk)),
        )


def weigh(free: Mapping[str, Resources], multipliers: Multipliers = Multipliers()) -> list[str]:
    """Host names, heaviest first."""
    names = list(free)
    if not names:
        return []
    rooms = list(free.values())
    weights = [0.0] * len(names)
    for attr, multiplier in (
        ("memory_mb", multipliers.ram),
        ("vcpus", multipliers.cpu),
        ("disk_gb", multipliers.disk),
    ):
        if multiplier:
            values = [getattr(room, attr) for room in rooms]
            low, high = min(values), max(values)
            if high != low:
                scale = multiplier / (high - low)
                weights = [w + (v - low) * scale for w, v in zip(weights, values, strict=True)]
    order = sorted(zip([-w for w in weights], names, strict=True))  # heaviest first, ties by name
    return [name for _, name in order]
