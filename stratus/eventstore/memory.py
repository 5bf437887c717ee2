"""The event log in memory: the domain's recorder port without NATS, for unit tests.

``InMemoryRecorder`` is eventsourcing's plain-Python application recorder
(``eventsourcing.popo``) with what Stratus's commands ask of a recorder beyond it
(``commands.ports.RecorderPort``: ``prefetched``, ``known_version``) and the JetStream recorder's
rules for an append: at most ``MAX_EVENTS_PER_APPEND`` events, each aggregate's versions increasing
within it, ``ConcurrentAppendError`` (an ``IntegrityError``) when a version is not above the
aggregate's last stored one, and nothing of a refused append stored. It passes the same conformance
test case as the JetStream recorder (``tests/fixtures/recorder_port.py``).

A unit test builds the application on it: ``Stratus(InMemoryFactory())``. Two applications built on
one factory share its log, as two processes share a stream. ``PERSISTENCE_MODULE=
stratus.eventstore.memory`` selects the factory too. Nothing is persisted; the log lives as long as
the factory.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import (
    AggregateRecorder,
    InfrastructureFactory,
    IntegrityError,
    ProcessRecorder,
    StoredEvent,
    TrackingRecorder,
    Transcoder,
)
from eventsourcing.popo import POPOApplicationRecorder
from eventsourcing.utils import Environment, EnvType

from stratus.eventstore.errors import (
    MAX_EVENTS_PER_APPEND,
    ConcurrentAppendError,
    TooManyEventsError,
    TrackingNotSupportedError,
)
from stratus.serialization import OrjsonTranscoder

__all__ = ["InMemoryFactory", "InMemoryRecorder", "InMemorySnapshotRecorder"]


class InMemoryRecorder(POPOApplicationRecorder):
    """One application's event log in a list, positions from 1 (see the module's docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.prefetches = 0  # how many times a command asked for heads in one hop (tests count them)

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        if len(stored_events) > MAX_EVENTS_PER_APPEND:
            raise TooManyEventsError(
                f"{len(stored_events)} events in one append; the event log takes at most "
                f"{MAX_EVENTS_PER_APPEND} at once"
            )
        last: dict[str, int] = {}
        for e in stored_events:
            key = str(e.originator_id)
            if key in last and e.originator_version <= last[key]:
                raise IntegrityError(
                    f"versions of {key} must increase within one append "
                    f"({e.originator_version} after {last[key]})"
                )
            last[key] = e.originator_version
        return super().insert_events(stored_events, **kwargs)

    def _assert_uniqueness(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        # As on JetStream: an append is checked against each aggregate's last stored version, so a
        # version at or below it is a conflict even where that exact version is missing.
        for e in stored_events:
            versions = self._stored_events_index.get(str(e.originator_id))
            if versions and e.originator_version <= max(versions):
                raise ConcurrentAppendError(
                    f"{e.originator_id} is at version {max(versions)}; "
                    f"cannot append version {e.originator_version}"
                )

    @contextlib.contextmanager
    def prefetched(self, originator_ids: Iterable[UUID | str]) -> Iterator[None]:
        """Nothing to read ahead in memory: every load sees the whole log."""
        self.prefetches += 1
        yield

    def known_version(self, originator_id: UUID | str) -> int | None:
        """The aggregate's last stored version (in memory every event is seen; None: none)."""
        with self._database_lock:
            versions = self._stored_events_index.get(str(originator_id))
            return max(versions) if versions else None

    def anchor(self, originator_id: UUID | str, version: int) -> str | None:
        """The position of the aggregate's event at ``version`` (a snapshot's anchor; None: none)."""
        with self._database_lock:
            index = self._stored_events_index.get(str(originator_id), {}).get(version)
            return None if index is None else str(index + 1)

    def select_events_after(
        self, originator_id: UUID | str, version: int, anchor: str
    ) -> Sequence[StoredEvent] | None:
        """The events after ``version``; None unless the event at the anchor's position is the
        aggregate's event at ``version`` (as ``JetStreamApplicationRecorder.select_events_after``)."""
        with self._database_lock:
            index = self._stored_events_index.get(str(originator_id), {}).get(version)
            if index is None or anchor != str(index + 1):
                return None
        return self.select_events(originator_id, gt=version)


class InMemorySnapshotRecorder(AggregateRecorder):
    """Snapshots in a dict: the newest stored per aggregate, as on JetStream (one message per
    aggregate, last write wins). ``stored`` is the dict (a test may corrupt or drop an entry)."""

    def __init__(self) -> None:
        self.stored: dict[str, StoredEvent] = {}
        self._lock = threading.Lock()

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        with self._lock:
            for s in stored_events:
                self.stored[str(s.originator_id)] = s
        return None

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        with self._lock:
            s = self.stored.get(str(originator_id))
        if s is None or limit == 0:
            return []
        if (gt is not None and s.originator_version <= gt) or (
            lte is not None and s.originator_version > lte
        ):
            return []
        return [s]


class InMemoryFactory(InfrastructureFactory[TrackingRecorder]):
    """Builds the in-memory log: one ``InMemoryRecorder`` per factory, shared by every application
    built on it. Snapshots, if enabled, go to a recorder of their own (``InMemorySnapshotRecorder``,
    as on JetStream: beside the log, not in it).

    ``recorder``: the log to use (one several factories share, or a test's subclass of it).
    """

    def __init__(
        self, env: Environment | EnvType | None = None, *, recorder: InMemoryRecorder | None = None
    ) -> None:
        super().__init__(env)
        self._recorder = recorder if recorder is not None else InMemoryRecorder()
        self._snapshots = InMemorySnapshotRecorder()

    def transcoder(self) -> Transcoder:
        """orjson (one JSON policy), unless ``TRANSCODER_TOPIC`` names another."""
        if self.env.get(self.TRANSCODER_TOPIC):
            return super().transcoder()
        return OrjsonTranscoder()

    def application_recorder(self) -> InMemoryRecorder:
        return self._recorder

    def aggregate_recorder(self, purpose: str = "events") -> AggregateRecorder:
        return self._snapshots if purpose == "snapshots" else self._recorder

    def tracking_recorder(
        self, tracking_recorder_class: type[TrackingRecorder] | None = None
    ) -> TrackingRecorder:
        raise TrackingNotSupportedError("Stratus's read models track their position in PostgreSQL")

    def process_recorder(self) -> ProcessRecorder:
        raise TrackingNotSupportedError("Stratus's read models track their position in PostgreSQL")
