"""What every handler class shares: loading an aggregate, appending its new events, and deciding
again when another writer appended first (optimistic concurrency on the log)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError

from commands.app import Stratus
from commands.errors import Conflict, NotFound

A = TypeVar("A", bound=Aggregate)
T = TypeVar("T")


@dataclass(frozen=True)
class Result:
    """The id a command acted on and the log position of its last event (for read-your-writes)."""

    id: str
    position: int


class HandlerBase:
    def __init__(self, app: Stratus, *, attempts: int = 5) -> None:
        self.app = app
        self._attempts = attempts

    def _find(self, cls: type[A], aggregate_id: UUID) -> A | None:
        try:
            agg: Aggregate = self.app.repository.get(aggregate_id)
        except AggregateNotFoundError:
            return None
        return agg if isinstance(agg, cls) else None

    def _get(self, cls: type[A], aggregate_id: UUID, what: str) -> A:
        agg = self._find(cls, aggregate_id)
        if agg is None:
            raise NotFound(f"{what} could not be found.")
        return agg

    def _save(self, *aggregates: Aggregate) -> int:
        recordings = self.app.save(*aggregates)
        if recordings:
            return recordings[-1].notification.id
        # Nothing new (a retried command): the log's head is a position the read is sure to cover.
        return self.app.recorder.max_notification_id() or 0

    def _retrying(self, decide: Callable[[], T], attempts: int | None = None, backoff: float = 0.0) -> T:
        """Run load-decide-append again when a concurrent writer got there first.

        ``backoff``: the most seconds to wait (random, growing with each attempt) before deciding
        again, for aggregates many writers contend for (a project's usage).
        """
        for attempt in range((attempts or self._attempts) - 1):
            try:
                return decide()
            except IntegrityError:
                if backoff:
                    time.sleep(random.uniform(0, backoff * min(attempt + 1, 8)))
                continue
        try:
            return decide()
        except IntegrityError as e:
            raise Conflict("Another request changed this resource at the same time; retry.") from e
