"""The eventsourcing Application that loads and saves Stratus's aggregates on the event log.

The infrastructure factory is injected by each process's composition root (the JetStream event
store, ``stratus.eventstore.Factory``) or by a unit test (the in-memory log,
``stratus.eventstore.memory.InMemoryFactory``); this class only fixes the serialization policy and
checks that the factory's recorder is the domain's port (``commands.ports.RecorderPort``).

Aggregates whose history grows with use are snapshotted every ``SNAPSHOT_INTERVAL`` events
(``snapshotted()`` names them), so that loading one reads its newest snapshot and at most that many
events, not its whole life. Snapshots are a cache beside the log (``stratus.eventstore.snapshots``):
a snapshot that cannot be used costs a replay, and failing to store one never fails a command.
"""

from __future__ import annotations

import logging
from abc import ABC
from typing import TYPE_CHECKING, Any, ClassVar, cast
from uuid import UUID

from eventsourcing.application import Application, ProcessingEvent, Repository
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import (
    ApplicationRecorder,
    InfrastructureFactory,
    IntegrityError,
    Recording,
    Transcoder,
)

from commands import idempotency
from commands.ports import RecorderPort
from stratus.eventstore.snapshots import Snapshot, SnapshottingRepository, take_snapshot
from stratus.serialization import OrjsonTranscoder

log = logging.getLogger(__name__)

# Events between two snapshots of one aggregate: a cold load reads one snapshot and fewer events than
# this, N/2 on average. Chosen by measurement (docs/performance.md, "Snapshots"): each event after the
# snapshot costs a load ~1/25 of its fixed part (three gets), and storing a snapshot ~0.7 of an
# append; at 50 the average cold load is about twice one with nothing to read after its snapshot,
# for ~1.5 % more appends.
SNAPSHOT_INTERVAL = 50
# Aggregates an application keeps in memory when its builder names no size (tests, one-shot commands);
# the long-running parts are sized by their settings (``stratus.config.Settings.*_aggregate_cache``).
CACHE_SIZE = 1000


def snapshotted() -> dict[type[Aggregate], int]:
    """The aggregates whose history grows with use (their event count has no bound), with their
    snapshot interval. Imported here, not at the top: some of their modules import this one."""
    from commands.census import GuestCensus
    from commands.host import Host
    from commands.host_aggregate import HostAggregate
    from commands.image_usage import ImageUsage
    from commands.instance import Instance
    from commands.ledger import Ledger
    from commands.network import Network
    from commands.placement import Consumer, PlacementCatalog
    from commands.provider import ResourceProvider
    from commands.registry import Registry
    from commands.server_group import ServerGroup

    # Every claim and release, every allocation, address, key pair, image, name, group member, stray
    # guest, and every action on a server over its life.
    grows = (Host, ResourceProvider, PlacementCatalog, Consumer, Ledger, ImageUsage, Network, Registry)
    return {cls: SNAPSHOT_INTERVAL for cls in (*grows, ServerGroup, GuestCensus, HostAggregate, Instance)}


if TYPE_CHECKING:

    class _PortRecorder(ApplicationRecorder, RecorderPort, ABC):
        """eventsourcing's application recorder that is also the domain's port: what ``recorder``
        is (a Protocol cannot extend an ABC, so the type checker is told with a class)."""


class Stratus(Application[UUID]):
    """Stratus's aggregates on one event log: ``repository`` loads, ``save`` appends, ``recorder``
    is the log as the domain's port (``commands.ports.RecorderPort``)."""

    name = "stratus"
    # Aggregates loaded before are kept (up to ``cache_size``, least recently used out first) and
    # caught up with the events appended since (one direct get when nothing changed) instead of being
    # read whole from the log: a host with thousands of claims costs one read per decision, not
    # thousands. Every load still reads the log's head, so a decision never starts from a stale
    # aggregate; callers get a copy.
    env: ClassVar[dict[str, str]] = {"AGGREGATE_CACHE_FASTFORWARD": "y"}

    # Snapshots: stored beside the log by the factory's "snapshots" recorder (IS_SNAPSHOTTING_ENABLED=n
    # in the environment turns them off: no snapshot is taken or read).
    is_snapshotting_enabled = True
    snapshot_class = Snapshot

    if TYPE_CHECKING:
        recorder: _PortRecorder

    def __init__(
        self,
        factory: InfrastructureFactory[Any],
        env: dict[str, str] | None = None,
        *,
        cache_size: int = CACHE_SIZE,
    ):
        """``cache_size``: the most aggregates kept in memory (0: none); each process's composition
        root passes its part's setting (``stratus.config.Settings.*_aggregate_cache``)."""
        self._injected_factory = factory
        if not type(self).snapshotting_intervals:
            type(self).snapshotting_intervals = snapshotted()  # type: ignore[misc, assignment]
        if cache_size < 0:
            raise ValueError(f"an aggregate cache of {cache_size} aggregates")
        # eventsourcing's variable, given here so that the process environment's cannot override it
        # ("": no cache; eventsourcing reads 0 as a cache without bound).
        sized = {self.AGGREGATE_CACHE_MAXSIZE: str(cache_size) if cache_size else ""}
        super().__init__({**sized, **(env or {})})
        if not isinstance(self.recorder, RecorderPort):
            raise TypeError(
                f"{type(self.recorder).__name__} is not a recorder Stratus can decide on: it lacks "
                "what commands.ports.RecorderPort asks for (prefetched, known_version...)"
            )

    def save(self, *objs: Any, **kwargs: Any) -> list[Recording[UUID]]:
        """Append the aggregates' new events atomically; under an idempotency key, the key's claim
        goes first in the request's first append (``commands.idempotency``), so the positions the
        caller reads (the last recording's) are its own events'."""
        claim = idempotency.claim()
        if claim is None:
            return super().save(*objs, **kwargs)
        try:
            recordings = super().save(claim, *objs, **kwargs)
        except IntegrityError:
            if claim.id in self.repository:  # another request with the key appended first
                raise idempotency.KeyInUse(
                    "Another request with this Idempotency-Key is in progress or was just made; "
                    "retry to get its answer."
                ) from None
            raise  # a race on the command's own aggregates: the command decides again
        idempotency.claimed()
        return recordings

    def construct_factory(self, env: Any) -> InfrastructureFactory[Any]:
        # The factory was built before this application's environment: it learns from it whether
        # snapshots are on (unless its own environment says).
        factory = self._injected_factory
        key = factory.IS_SNAPSHOTTING_ENABLED
        if factory.env.get(key) is None and env.get(key) is not None:
            factory.env[key] = env.get(key)
        return factory

    def construct_transcoder(self) -> Transcoder:
        return OrjsonTranscoder()

    @property
    def repository(self) -> SnapshottingRepository:
        """eventsourcing's repository, whose cold loads start from a usable snapshot."""
        return cast(SnapshottingRepository, self._repository)

    def construct_repository(self) -> Repository[UUID]:
        """eventsourcing's repository, whose cold loads start from a usable snapshot."""
        plain = super().construct_repository()
        repository = SnapshottingRepository(
            event_store=plain.event_store,
            snapshot_store=plain.snapshot_store,
            fastforward=plain.fastforward,
            fastforward_skipping=plain.fastforward_skipping,
            deepcopy_from_cache=plain.deepcopy_from_cache,
        )
        repository.cache = plain.cache
        return repository

    def _take_snapshots(self, processing_event: ProcessingEvent[UUID]) -> None:
        """After a save: snapshot each saved aggregate whose new events reached a multiple of its
        interval, from the saved aggregate itself (it is the stored version: reading it back would
        cost what snapshots save). Never raises: the events are stored, and a snapshot is a cache."""
        if self.snapshots is None or not self.snapshotting_intervals:
            return
        crossed: dict[UUID, tuple[int, int]] = {}
        for e in processing_event.events:
            first, last = crossed.get(e.originator_id, (e.originator_version, e.originator_version))
            crossed[e.originator_id] = (min(first, e.originator_version), max(last, e.originator_version))
        for aggregate_id, (first, last) in crossed.items():
            aggregate = processing_event.aggregates.get(aggregate_id)
            interval = self.snapshotting_intervals.get(type(aggregate)) if aggregate is not None else None
            if interval is None or last // interval == (first - 1) // interval:
                continue
            self._store_snapshot(aggregate)

    def take_snapshot(
        self, aggregate_id: UUID, version: int | None = None, projector_func: Any = None
    ) -> None:
        """Snapshot the aggregate as the log has it now (``version``: only if that is its version)."""
        aggregate: Any = self.repository.get(aggregate_id)
        if version is None or version == aggregate.version:
            self._store_snapshot(aggregate)

    def _store_snapshot(self, aggregate: Any) -> None:
        assert self.snapshots is not None
        try:
            snapshot = take_snapshot(aggregate, self.recorder)
            if snapshot is not None:
                self.snapshots.put([snapshot])
        # The command's events are stored whatever happens here; a snapshot not taken (a state the
        # encoding does not know, the snapshot store unreachable) only costs a longer load later.
        except Exception:
            log.warning("no snapshot of %s at version %s", aggregate.id, aggregate.version, exc_info=True)
