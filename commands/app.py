"""The eventsourcing Application that loads and saves Stratus's aggregates on the event log.

The infrastructure factory (the JetStream event store) is injected by each process's composition
root; this class only fixes the serialization policy.
"""

from __future__ import annotations

from typing import Any, ClassVar
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.persistence import InfrastructureFactory, Transcoder

from stratus.serialization import OrjsonTranscoder


class Stratus(Application[UUID]):
    name = "stratus"
    # Aggregates loaded before are kept and caught up with the events appended since (one direct
    # get when nothing changed) instead of being read whole from the log: a host with thousands of
    # claims costs one read per decision, not thousands. Every load still reads the log's head, so
    # a decision never starts from a stale aggregate; callers get a copy.
    env: ClassVar[dict[str, str]] = {"AGGREGATE_CACHE_MAXSIZE": "20000", "AGGREGATE_CACHE_FASTFORWARD": "y"}

    def __init__(self, factory: InfrastructureFactory[Any], env: dict[str, str] | None = None):
        self._injected_factory = factory
        super().__init__(env)

    def construct_factory(self, env: Any) -> InfrastructureFactory[Any]:
        return self._injected_factory

    def construct_transcoder(self) -> Transcoder:
        return OrjsonTranscoder()
