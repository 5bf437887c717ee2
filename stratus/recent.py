"""``Recent``: a map that keeps the ``size`` keys most recently written or read, safe across threads.

For what a process remembers per token, per user or per aggregate: the oldest falls out when a new
key would make one too many, so a process's memory stays bounded however many callers it sees.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Recent(Generic[K, V]):
    """The ``size`` most recently used keys and their values; a lock around every use."""

    def __init__(self, size: int) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[K, V] = OrderedDict()
        self._size = size

    def get(self, key: K) -> V | None:
        """The value of ``key`` (kept as the most recent), None when it is not kept."""
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def get_each(self, keys: Iterable[K]) -> list[V]:
        """The values kept of ``keys`` (each kept as the most recent), those not kept left out: one
        hold of the lock for them all."""
        found = []
        with self._lock:
            items = self._items
            for key in keys:
                if key in items:
                    items.move_to_end(key)
                    found.append(items[key])
        return found

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    def put(self, key: K, value: V, merge: Callable[[V, V], V] | None = None) -> V:
        """Keep ``value`` for ``key`` (or ``merge(kept, value)`` when one is kept); the value kept."""
        with self._lock:
            if merge is not None and key in self._items:
                value = merge(self._items[key], value)
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
            return value

    def drop(self, key: K) -> None:
        with self._lock:
            self._items.pop(key, None)

    def __len__(self) -> int:
        return len(self._items)
