"""The cyclic garbage collector kept off what a process made to last: ``gc.freeze`` around a part's
long work (a rebuild's replay, the projector's loop), or for good (an API worker once composed).

A full pass of the collector walks every tracked object the process holds, and a composed part holds
~75,000 that live as long as it does (modules, classes, the composition). In a replay those passes
came every few thousand events and cost ~2.4 us an event (docs/performance.md, "Read models:
rebuild"). Frozen, they are left out of every pass; what the work allocates is collected as before.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


def freeze() -> None:
    """Objects alive now (after a collection) left out of the collector's passes from now on."""
    gc.collect()
    gc.freeze()


@contextlib.contextmanager
def frozen() -> Iterator[None]:
    """Objects alive on entry (after a collection) left out of the collector's passes until exit."""
    freeze()
    try:
        yield
    finally:
        gc.unfreeze()
