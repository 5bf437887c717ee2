"""The scheduler's weighers: rank the hosts that passed the filters, as Nova's do.

Each weigher scores every host on one resource (free RAM, free vCPUs, free disk), normalized to
0..1 across the candidates, times its multiplier; a host's weight is the sum. Positive multipliers
spread instances (most free first), negative ones pack them (least free first), 0 ignores the
resource. Nova's defaults: every multiplier 1.0. Ties go to the host name, for stable order.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
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


def _normalized(values: Sequence[float]) -> list[float]:
    low, high = min(values), max(values)
    if high == low:
        return [0.0] * len(values)
    return [(v - low) / (high - low) for v in values]


def weigh(free: Mapping[str, Resources], multipliers: Multipliers = Multipliers()) -> list[str]:
    """Host names, heaviest first."""
    names = list(free)
    if not names:
        return []
    weights = [0.0] * len(names)
    for attr, multiplier in (
        ("memory_mb", multipliers.ram),
        ("vcpus", multipliers.cpu),
        ("disk_gb", multipliers.disk),
    ):
        if multiplier:
            for i, score in enumerate(_normalized([getattr(free[n], attr) for n in names])):
                weights[i] += multiplier * score
    order = sorted(range(len(names)), key=lambda i: (-weights[i], names[i]))
    return [names[i] for i in order]
