"""Snapshots: a cache of aggregates' state beside the event log, never part of it.

An aggregate whose history grows with use (a host: every claim and release) would otherwise be
loaded by reading its whole life. eventsourcing's snapshotting bounds that: every so many events the
application stores the aggregate's state, and a load starts from the newest snapshot and reads only
the events after it. Here:

- ``Snapshot`` is eventsourcing's snapshot class with a state encoding that gives back exactly the
  types it was given (sets, tuples, UUIDs, datetimes, dicts with non-string keys, dataclasses; the
  log's transcoder would turn them into lists and strings), a fingerprint of the aggregate's code,
  and the *anchor* of the event it was taken at.
- The **anchor** names the stored event at the snapshot's version as the log holds it (its position
  and, on JetStream, its chain hash). A load reads the events after the anchor and checks the anchor
  is still that event; if it is not (the log was restored from an older backup, replaced by an
  import, or the snapshot belongs to another log), the snapshot is ignored.
- ``SnapshottingRepository`` is eventsourcing's repository whose cold loads use a snapshot when one
  is usable and replay the events otherwise: a missing, corrupt, stale (code changed without a
  ``class_version``), undecodable or diverged snapshot costs a full replay, never a wrong aggregate.

Where snapshots are stored is the recorders' business: a stream of their own on JetStream
(``stratus.eventstore.snapshot_stream``: one message per aggregate, outside the log's subjects, its
hash chain and everything that reads the log) and a dict in memory (``stratus.eventstore.memory``).
This module imports no NATS: the domain's application uses it on either. See docs/eventstore.md,
"Snapshots".
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import logging
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from functools import cache
from typing import Any, Protocol, cast, runtime_checkable
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, ProjectorFunction, Repository
from eventsourcing.domain import BaseAggregate
from eventsourcing.domain import Snapshot as _LibrarySnapshot
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import get_topic, resolve_topic

__all__ = [
    "AnchoredRecorder",
    "Snapshot",
    "SnapshotUnusable",
    "SnapshottingRepository",
    "code_fingerprint",
]

log = logging.getLogger(__name__)

# An aggregate's own bookkeeping, restored from the snapshot's envelope (id, version), never stored.
_NOT_STATE = ("_id", "_version", "_pending_events")
_TAG = "__t"


class SnapshotUnusable(Exception):
    """A snapshot that must not be used (its code changed, it cannot be decoded): replay instead."""


# -- a state encoding that gives back the types it was given ---------------------------------------


def encode_value(value: Any) -> Any:
    """``value`` as JSON types, tagged where JSON would lose its type (``decode_value`` inverts it).

    Raises ``TypeError`` for a type it does not know: such an aggregate is not snapshotted."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return (
            value
            if value == value and value not in (float("inf"), float("-inf"))
            else {_TAG: "float", "v": repr(value)}
        )
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    if isinstance(value, dict):
        if all(type(k) is str for k in value) and _TAG not in value:
            return {k: encode_value(v) for k, v in value.items()}
        return {_TAG: "map", "v": [[encode_value(k), encode_value(v)] for k, v in value.items()]}
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return {_TAG: "tuple", "v": [encode_value(v) for v in value]}
    if isinstance(value, frozenset):
        return {_TAG: "frozenset", "v": [encode_value(v) for v in value]}
    if isinstance(value, set):
        return {_TAG: "set", "v": [encode_value(v) for v in value]}
    if isinstance(value, UUID):
        return {_TAG: "uuid", "v": str(value)}
    if isinstance(value, datetime):
        return {_TAG: "datetime", "v": value.isoformat()}
    if isinstance(value, date):
        return {_TAG: "date", "v": value.isoformat()}
    if isinstance(value, Decimal):
        return {_TAG: "decimal", "v": str(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: encode_value(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
        return {_TAG: "dataclass", "c": get_topic(type(value)), "v": fields}
    raise TypeError(f"a snapshot cannot hold a {type(value).__name__}")


_DECODERS: dict[str, Callable[[Any], Any]] = {
    "float": float,
    "tuple": lambda v: tuple(decode_value(x) for x in v),
    "frozenset": lambda v: frozenset(decode_value(x) for x in v),
    "set": lambda v: {decode_value(x) for x in v},
    "map": lambda v: {decode_value(k): decode_value(x) for k, x in v},
    "uuid": UUID,
    "datetime": datetime.fromisoformat,
    "date": date.fromisoformat,
    "decimal": Decimal,
}


def decode_value(value: Any) -> Any:
    """What ``encode_value`` was given."""
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    if isinstance(value, dict):
        tag = value.get(_TAG)
        if tag is None:
            return {k: decode_value(v) for k, v in value.items()}
        if tag == "dataclass":
            cls = resolve_topic(value["c"])
            return cls(**{k: decode_value(v) for k, v in value["v"].items()})
        return _DECODERS[tag](value["v"])
    return value


@cache
def code_fingerprint(cls: type) -> str:
    """A digest of the source of the modules that define ``cls`` and its bases (eventsourcing's
    and Python's own excepted): a snapshot taken by other code than this is not trusted, unless
    the aggregate's ``class_version`` says its state changed and its upcasters say how.

    A whole module rather than the class: the functions an event applies may live beside it."""
    digest = hashlib.sha256()
    modules = sorted({c.__module__ for c in cls.__mro__} - {"builtins", "abc", "typing"})
    for name in modules:
        if name.startswith("eventsourcing"):
            continue
        module = sys.modules.get(name)
        try:
            source = inspect.getsource(module) if module is not None else name
        except (OSError, TypeError):
            source = name  # no source to read (frozen, compiled): the class version alone decides
        digest.update(name.encode())
        digest.update(source.encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class Snapshot(_LibrarySnapshot):
    """eventsourcing's ``Snapshot`` that keeps its state's types and knows where it was taken.

    ``state``: the aggregate's attributes, encoded by ``encode_value``, plus ``class_version`` when the
    aggregate declares one above 1 (eventsourcing's convention: older snapshots are upcast on load
    by the aggregate class's ``upcast_v<N>_v<N+1>(state)`` static methods). ``code``: the aggregate's
    ``code_fingerprint`` when it was taken. ``anchor``: the stored event at the snapshot's version, as
    the recorder names it (``AnchoredRecorder.anchor``).
    """

    anchor: str
    code: str

    @classmethod
    def take(cls, aggregate: Any, anchor: str = "") -> Snapshot:  # type: ignore[override]
        """A snapshot of ``aggregate`` as it is (it must be the stored version ``anchor`` names).
        Raises ``TypeError`` when an attribute is of a type the encoding does not know."""
        agg_cls = type(aggregate)
        state = {k: encode_value(v) for k, v in vars(aggregate).items() if k not in _NOT_STATE}
        class_version = getattr(agg_cls, "class_version", 1)
        if class_version > 1:
            state["class_version"] = class_version
        return cls(
            originator_id=aggregate.id,
            originator_version=aggregate.version,
            timestamp=cls.create_timestamp(),
            topic=get_topic(agg_cls),
            state=state,
            anchor=anchor,
            code=code_fingerprint(agg_cls),  # type: ignore[arg-type]
        )

    def mutate(self, _: None) -> BaseAggregate[UUID]:
        """The aggregate as it was taken; ``SnapshotUnusable`` when its code changed since without a
        new ``class_version``."""
        cls = cast("type[BaseAggregate[UUID]]", resolve_topic(self.topic))
        state = dict(self.state)
        from_version = state.pop("class_version", 1)
        class_version = getattr(cls, "class_version", 1)
        if from_version > class_version:
            raise SnapshotUnusable(f"taken by a newer {cls.__name__} (class version {from_version})")
        if from_version == class_version and self.code != code_fingerprint(cls):
            raise SnapshotUnusable(f"taken by other code of {cls.__name__} (same class version)")
        attrs = {k: decode_value(v) for k, v in state.items()}
        while from_version < class_version:
            getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(attrs)
            from_version += 1
        attrs["_id"] = self.originator_id
        attrs["_version"] = self.originator_version
        attrs["_pending_events"] = []
        aggregate = object.__new__(cls)
        object.__setattr__(aggregate, "__dict__", attrs)
        return aggregate


# -- the log side: anchors ---------------------------------------------------------------------


@runtime_checkable
class AnchoredRecorder(Protocol):
    """What a snapshot needs of the event log: a name for a stored event, and the events after it."""

    def anchor(self, originator_id: UUID | str, version: int) -> str | None:
        """The stored event at ``version`` as this recorder knows it without reading (None: unknown)."""
        ...

    def select_events_after(
        self, originator_id: UUID | str, version: int, anchor: str
    ) -> Sequence[StoredEvent] | None:
        """The aggregate's events after ``version``, in order; None when the log's event at ``version``
        is not the one ``anchor`` names (the snapshot is then not of this log)."""
        ...


class SnapshottingRepository(Repository[UUID]):
    """eventsourcing's repository whose cold loads start from a usable snapshot, else replay.

    ``snapshot_stats`` counts loads by what their snapshot was: ``used``, ``none`` (no snapshot),
    ``unusable`` (undecodable, corrupt or taken by other code), ``diverged`` (its anchor is not this
    log's event), ``historical`` (a load of an older version: always a replay)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.snapshot_stats: Counter[str] = Counter()

    def _reconstruct_aggregate(
        self, aggregate_id: UUID, version: int | None, projector_func: ProjectorFunction[Any, Any]
    ) -> Any:
        if self.snapshot_store is None:
            return super()._reconstruct_aggregate(aggregate_id, version, projector_func)
        if version is not None:
            self.snapshot_stats["historical"] += 1
            return self._replay(aggregate_id, version, projector_func)
        started = self._from_snapshot(aggregate_id)
        if started is None:
            return self._replay(aggregate_id, None, projector_func)
        aggregate, events = started
        aggregate = projector_func(aggregate, events)
        if aggregate is None:
            raise AggregateNotFoundError(f"Aggregate {aggregate_id!r} not found.")
        return aggregate

    def _replay(
        self, aggregate_id: UUID, version: int | None, projector_func: ProjectorFunction[Any, Any]
    ) -> Any:
        events = self.event_store.get(originator_id=aggregate_id, lte=version)
        aggregate = projector_func(None, events)
        if aggregate is None:
            raise AggregateNotFoundError(f"Aggregate {aggregate_id!r} version {version!r} not found.")
        return aggregate

    def usable_snapshot(self, aggregate_id: UUID) -> tuple[Any, Snapshot] | None:
        """The aggregate as its newest snapshot has it, and the snapshot (whose ``anchor`` the caller
        checks against the log before trusting it); None when there is none or it cannot be used."""
        assert self.snapshot_store is not None
        try:
            found = list(self.snapshot_store.get(originator_id=aggregate_id, desc=True, limit=1))
            if not found:
                self.snapshot_stats["none"] += 1
                return None
            snapshot = found[0]
            if not isinstance(snapshot, Snapshot) or not snapshot.anchor:
                raise SnapshotUnusable(
                    f"not a snapshot this repository can anchor: {type(snapshot).__name__}"
                )
            aggregate = snapshot.mutate(None)
        # A snapshot is a cache: whatever is wrong with it (bytes that do not decode, a topic that no
        # longer resolves, an upcaster that fails, code that changed), the log still has the truth.
        except Exception as e:
            self.snapshot_stats["unusable"] += 1
            log.warning("snapshot of %s not used, replaying its events: %s", aggregate_id, e, exc_info=True)
            return None
        return aggregate, snapshot

    def _from_snapshot(self, aggregate_id: UUID) -> tuple[Any, list[Any]] | None:
        """The snapshot's aggregate and the events after it, or None: replay."""
        recorder = self.event_store.recorder
        started = self.usable_snapshot(aggregate_id)
        if started is None:
            return None
        aggregate, snapshot = started
        if not isinstance(recorder, AnchoredRecorder):
            self.snapshot_stats["unusable"] += 1
            return None
        stored = recorder.select_events_after(aggregate_id, snapshot.originator_version, snapshot.anchor)
        if stored is None:
            self.snapshot_stats["diverged"] += 1
            log.warning(
                "snapshot of %s at version %d is not of this log (its event differs): replaying",
                aggregate_id,
                snapshot.originator_version,
            )
            return None
        self.snapshot_stats["used"] += 1
        mapper = self.event_store.mapper
        return aggregate, [mapper.to_domain_event(s) for s in stored]


def take_snapshot(aggregate: Any, recorder: object) -> Snapshot | None:
    """A snapshot of a just-stored ``aggregate`` anchored on ``recorder``'s log (None: the recorder
    cannot name its stored event, so no snapshot)."""
    if not isinstance(recorder, AnchoredRecorder):
        return None
    anchor = recorder.anchor(aggregate.id, aggregate.version)
    if anchor is None:
        return None
    return Snapshot.take(aggregate, anchor)
