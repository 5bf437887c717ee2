"""Group commit: requests that contend for one aggregate are decided and appended together.

Every create in a project charges the project's quota usage, so concurrent creates in one process
would each load it, charge it, and race each other's appends (all but one re-deciding). Here the
first request of a key becomes the leader and decides alone; requests arriving meanwhile queue, and
when the leader is done the first of them leads the next group with all that queued (up to
``limit``): one load, one decision over all of them, one atomic append. Nothing waits for company:
a request arriving at an idle key is decided at once, so a lone request pays nothing for this.

Each request's outcome is its own: ``decide`` returns a result or an exception per item.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeVar

I = TypeVar("I")  # noqa: E741  (an item)
R = TypeVar("R")


class _Slot(Generic[I, R]):
    __slots__ = ("done", "event", "item", "lead", "outcome")

    def __init__(self, item: I) -> None:
        self.item = item
        self.outcome: R | BaseException | None = None
        self.done = False
        self.lead = False
        self.event = threading.Event()


class GroupCommit(Generic[I, R]):
    """Requests per key decided in groups: one leader decides all that queued while it waited."""

    def __init__(
        self,
        decide: Callable[[list[I]], Sequence[R | BaseException]],
        *,
        limit: int = 100,
        weight: Callable[[I], int] = lambda _item: 1,
        max_weight: int | None = None,
    ) -> None:
        """``limit``: items per group at most; ``weight``/``max_weight``: what a group may carry at
        most (the events of one atomic append, say); an item heavier than that is decided alone."""
        self.decide = decide  # deciding a group: also used directly for a request decided alone
        self._limit = limit
        self._weight = weight
        self._max_weight = max_weight
        self._lock = threading.Lock()
        self._queues: dict[Hashable, deque[_Slot[I, R]]] = {}  # keys being decided, and who waits
        self.groups = 0  # decisions made (for tests and benches: items / groups = the mean group)

    def submit(self, key: Hashable, item: I) -> R:
        slot: _Slot[I, R] = _Slot(item)
        with self._lock:
            queue = self._queues.get(key)
            if queue is None:
                self._queues[key] = queue = deque()
                slot.lead = True
            queue.append(slot)
        while not slot.done:
            if slot.lead:
                self._lead(key)
            else:
                slot.event.wait()
                slot.event.clear()
        if isinstance(slot.outcome, BaseException):
            raise slot.outcome
        return slot.outcome  # type: ignore[return-value]

    def _lead(self, key: Hashable) -> None:
        with self._lock:
            queue = self._queues[key]
            group = [queue.popleft()]
            carried = self._weight(group[0].item)
            while queue and len(group) < self._limit:
                more = self._weight(queue[0].item)
                if self._max_weight is not None and carried + more > self._max_weight:
                    break
                carried += more
                group.append(queue.popleft())
        try:
            outcomes: Sequence[R | BaseException] = self.decide([s.item for s in group])
            if len(outcomes) != len(group):
                raise RuntimeError(f"{len(outcomes)} outcomes for a group of {len(group)}")
        except BaseException as e:
            outcomes = [e] * len(group)
        nxt = None
        with self._lock:
            self.groups += 1
            for s, outcome in zip(group, outcomes, strict=True):
                s.outcome, s.done, s.lead = outcome, True, False
            if queue:
                nxt = queue[0]
                nxt.lead = True
            else:
                del self._queues[key]
        for s in group:
            s.event.set()
        if nxt is not None:
            nxt.event.set()
