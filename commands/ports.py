"""The domain's port to the event log: what commands need of the recorder they decide on.

eventsourcing's ``Application`` loads aggregates through its repository and saves them through its
recorder; the repository only needs ``select_events`` and the save only ``insert_events``. Stratus's
commands need a few things more: several aggregates' heads read in one hop before a decision
(``prefetched``), the version of an aggregate last seen stored (``known_version``, a scheduler's hint
after a lost race), and the log's head (``max_notification_id``, the position a retried command
returns for read-your-writes).

``RecorderPort`` says all of that in one place. Two recorders implement it, neither importing this
module (a Protocol is structural): the JetStream recorder the processes run on
(``stratus.eventstore.JetStreamApplicationRecorder``) and an in-memory one for unit tests
(``stratus.eventstore.memory.InMemoryRecorder``). Both pass one conformance test case
(``tests/fixtures/recorder_port.py``); ``docs/eventstore.md`` describes the contract.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable
from uuid import UUID

from eventsourcing.persistence import Notification, StoredEvent

__all__ = ["RecorderPort"]


@runtime_checkable
class RecorderPort(Protocol):
    """The event log as commands use it (see the module's docstring).

    Appending is atomic and optimistic: ``insert_events`` stores all of its events or none, and raises
    ``eventsourcing.persistence.IntegrityError`` when any aggregate already has one of the versions
    (another writer got there first: load again, decide again). Positions (notification ids) start at
    1 and grow by one per event, in the order events were stored.
    """

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """Append the events of one or more aggregates atomically; their positions, in order."""
        ...

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        """One aggregate's events, by version (``gt``: those after a version a cached copy has)."""
        ...

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        """The log's events from position ``start``, in the order they were stored."""
        ...

    def max_notification_id(self) -> int | None:
        """The log's head: the position of its last event (None: the log is empty)."""
        ...

    def prefetched(self, originator_ids: Iterable[UUID | str]) -> AbstractContextManager[None]:
        """Read these aggregates' heads in one hop for the loads inside the block (in this thread);
        loads inside still see at least what was stored when the block began."""
        ...

    def known_version(self, originator_id: UUID | str) -> int | None:
        """The aggregate's version as this recorder last saw it stored: a hint, never ahead of the
        log (None: not seen)."""
        ...
