"""The cyclic garbage collector kept off what a process made to last: ``gc.freeze`` around a part's
long work (a rebuild's replay, the projector's loop), or for good (an API worker once composed).

A full pass of the collector walks every tracked object the process holds, and a composed part holds
~75,000 that live as long as it does (modules, classes, the composition). In a replay those passes
came every few thousand events and cost ~2.4 us an event (docs/performance.md, "Read models:
rebuild"). Frozen, they are left out of every pass; what the work allocates is collected as before.
Inside ``frozen`` the youngest generation is also collected every ``YOUNG_THRESHOLD`` allocations
instead of 700: a replay allocates a few containers an event (its entries, events, rows), and the
young passes cost it 1.8-3.6 us an event, 0.6-0.75 at 10,000 (issue 16: docs/performance.md).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

# Allocations between two passes over the youngest generation inside ``frozen`` (CPython's: 700).
YOUNG_THRESHOLD = 10_000


def freeze() -> None:
    """Objects alive now (after a collection) left out of the collector's passes from now on."""
    gc.collect()
    gc.freeze()


@contextlib.contextmanager
def frozen() -> Iterator[None]:
    """Objects alive on entry (after a collection) left out of the collector's passes until exit,
    and the youngest generation collected every ``YOUNG_THRESHOLD`` allocations meanwhile."""
    freeze()
    thresholds = gc.get_threshold()
    gc.set_threshold(max(YOUNG_THRESHOLD, thresholds[0]), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
