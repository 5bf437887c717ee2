"""``stratus.collector.frozen``: what lives on entry is left out of the collector's passes, what the
block makes is still collected, and the process is as before on exit."""

from __future__ import annotations

import gc
import weakref

from stratus.collector import YOUNG_THRESHOLD, frozen


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector frees it


def test_the_objects_alive_on_entry_are_frozen_until_exit_and_new_cycles_still_collected() -> None:
    before, thresholds = gc.get_freeze_count(), gc.get_threshold()
    with frozen():
        assert gc.get_freeze_count() > before + 1000  # the modules and everything else alive on entry
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *thresholds[1:])  # young passes further apart
        cycle = Node()
        gone = weakref.ref(cycle)
        del cycle
        gc.collect()
        assert gone() is None  # made inside the block: collected as ever
    assert gc.get_freeze_count() == 0  # unfrozen, all of it
    assert gc.get_threshold() == thresholds
