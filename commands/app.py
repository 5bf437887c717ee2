"""The eventsourcing Application that loads and saves Stratus's aggregates on the event log.

The infrastructure factory (the JetStream event store) is injected by each process's composition
root; this class only fixes the serialization policy.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.persistence import InfrastructureFactory, Transcoder

from stratus.serialization import OrjsonTranscoder


class Stratus(Application[UUID]):
    name = "stratus"

    def __init__(self, factory: InfrastructureFactory[Any], env: dict[str, str] | None = None):
        self._injected_factory = factory
        super().__init__(env)

    def construct_factory(self, env: Any) -> InfrastructureFactory[Any]:
        return self._injected_factory

    def construct_transcoder(self) -> Transcoder:
        return OrjsonTranscoder()
