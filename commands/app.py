"""The eventsourcing Application that loads and saves Stratus's aggregates on the event log.

The infrastructure factory is injected by each process's composition root (the JetStream event
store, ``stratus.eventstore.Factory``) or by a unit test (the in-memory log,
``stratus.eventstore.memory.InMemoryFactory``); this class only fixes the serialization policy and
checks that the factory's recorder is the domain's port (``commands.ports.RecorderPort``).
"""

from __future__ import annotations

from abc import ABC
from typing import TYPE_CHECKING, Any, ClassVar
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.persistence import ApplicationRecorder, InfrastructureFactory, Transcoder

from commands.ports import RecorderPort
from stratus.serialization import OrjsonTranscoder

if TYPE_CHECKING:

    class _PortRecorder(ApplicationRecorder, RecorderPort, ABC):
        """eventsourcing's application recorder that is also the domain's port: what ``recorder``
        is (a Protocol cannot extend an ABC, so the type checker is told with a class)."""


class Stratus(Application[UUID]):
    """Stratus's aggregates on one event log: ``repository`` loads, ``save`` appends, ``recorder``
    is the log as the domain's port (``commands.ports.RecorderPort``)."""

    name = "stratus"
    # Aggregates loaded before are kept and caught up with the events appended since (one direct
    # get when nothing changed) instead of being read whole from the log: a host with thousands of
    # claims costs one read per decision, not thousands. Every load still reads the log's head, so
    # a decision never starts from a stale aggregate; callers get a copy.
    env: ClassVar[dict[str, str]] = {"AGGREGATE_CACHE_MAXSIZE": "20000", "AGGREGATE_CACHE_FASTFORWARD": "y"}

    if TYPE_CHECKING:
        recorder: _PortRecorder

    def __init__(self, factory: InfrastructureFactory[Any], env: dict[str, str] | None = None):
        self._injected_factory = factory
        super().__init__(env)
        if not isinstance(self.recorder, RecorderPort):
            raise TypeError(
                f"{type(self.recorder).__name__} is not a recorder Stratus can decide on: it lacks "
                "what commands.ports.RecorderPort asks for (prefetched, known_version...)"
            )

    def construct_factory(self, env: Any) -> InfrastructureFactory[Any]:
        return self._injected_factory

    def construct_transcoder(self) -> Transcoder:
        return OrjsonTranscoder()
