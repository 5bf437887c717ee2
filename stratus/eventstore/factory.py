"""The eventsourcing infrastructure factory for the JetStream event store.

Selected with ``PERSISTENCE_MODULE=stratus.eventstore`` (it then builds its own ``NatsBridge`` from
the environment's ``Settings``), or constructed by a composition root with the process's bridge and
settings: ``Factory(bridge=bridge, settings=settings)``.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.persistence import (
    AggregateRecorder,
    InfrastructureFactory,
    ProcessRecorder,
    TrackingRecorder,
    Transcoder,
)
from eventsourcing.utils import Environment, EnvType

from stratus.config import Settings, recorder_heads
from stratus.eventstore.bridge import NatsBridge
from stratus.eventstore.errors import TrackingNotSupportedError
from stratus.eventstore.recorder import JetStreamApplicationRecorder
from stratus.eventstore.signing import Signer, Verifier
from stratus.eventstore.snapshot_stream import JetStreamSnapshotRecorder
from stratus.serialization import OrjsonTranscoder

_NO_TRACKING = (
    "JetStream has no place for tracking records: a tracking record must be written atomically with "
    "the state it tracks, and Stratus's read models live in PostgreSQL, so they record their "
    "position there (see projections/). Use the event store only as the application recorder."
)


class Factory(InfrastructureFactory[TrackingRecorder]):
    """Builds JetStream recorders; one application recorder per factory, the stream ensured once.

    ``bridge``/``settings``: injected by a composition root (the factory then does not own the
    bridge). Without them, settings are read from the environment (``STRATUS_*``, see
    ``Settings.from_env``) and the factory owns a bridge it closes in ``close()``.
    ``ensure_stream``: create/update the stream when the recorder is first built.

    With the deployment's trust registry (``Settings.trust_registry``), snapshots are signed with
    the part's key and a snapshot is used only if its signer may have written it; ``verify_loads``
    (the workers: scheduler, hypervisors, simulator; and the API) also checks every event a load
    reads before the aggregate is folded from it (docs/trust.md).
    """

    def __init__(
        self,
        env: Environment | EnvType | None = None,
        *,
        bridge: NatsBridge | None = None,
        settings: Settings | None = None,
        ensure_stream: bool = True,
        verify_loads: bool = False,
        **recorder_options: Any,
    ) -> None:
        super().__init__(env)
        self.settings = settings if settings is not None else Settings.from_env(dict(self.env))
        self._owns_bridge = bridge is None
        self.bridge = (
            bridge
            if bridge is not None
            else NatsBridge(self.settings.nats_urls, name="stratus", seed_file=self.settings.nats_seed_file)
        )
        self._ensure_stream = ensure_stream
        self._recorder_options = recorder_options
        self.verifier = Verifier.load(self.settings.trust_registry)
        self._verify_loads = verify_loads
        self._application_recorder: JetStreamApplicationRecorder | None = None
        self._snapshot_recorder: JetStreamSnapshotRecorder | None = None

    def transcoder(self) -> Transcoder:
        """orjson (one JSON policy), unless ``TRANSCODER_TOPIC`` names another."""
        if self.env.get(self.TRANSCODER_TOPIC):
            return super().transcoder()
        return OrjsonTranscoder()

    def application_recorder(self) -> JetStreamApplicationRecorder:
        if self._application_recorder is None:
            options = dict(self._recorder_options)
            if self._verify_loads:
                options.setdefault("trust", self.verifier)
            recorder = JetStreamApplicationRecorder.from_settings(self.bridge, self.settings, **options)
            if self._ensure_stream:
                recorder.ensure_stream()
            self._application_recorder = recorder
        return self._application_recorder

    def aggregate_recorder(self, purpose: str = "events") -> AggregateRecorder:
        if purpose != "snapshots":
            return self.application_recorder()
        if self._snapshot_recorder is None:
            # Snapshots live on a stream of their own: a cache beside the log, not part of it.
            s = self.settings
            options = {k: v for k, v in self._recorder_options.items() if k != "poll_interval"}
            if s.nats_seed_file is not None:
                options.setdefault("signer", Signer.from_seed_file(s.nats_seed_file))
            options["trust"] = options.get("trust", self.verifier)
            recorder = JetStreamSnapshotRecorder(
                self.bridge,
                stream=s.stream,
                source=f"/stratus/{s.cloud_name}",
                replicas=s.stream_replicas,
                **options,
            )
            if self._ensure_stream:
                recorder.ensure_stream()
            self._snapshot_recorder = recorder
        return self._snapshot_recorder

    def tracking_recorder(
        self, tracking_recorder_class: type[TrackingRecorder] | None = None
    ) -> TrackingRecorder:
        raise TrackingNotSupportedError(_NO_TRACKING)

    def process_recorder(self) -> ProcessRecorder:
        raise TrackingNotSupportedError(_NO_TRACKING)

    def close(self) -> None:
        if self._owns_bridge:
            self.bridge.close()


def part_store(bridge: NatsBridge, settings: Settings, aggregate_cache: int) -> Factory:
    """A part's event store: its loads checked as docs/trust.md says, its per-aggregate heads kept
    as its aggregate cache (``aggregate_cache``) sizes them (``stratus.config.recorder_heads``)."""
    heads = recorder_heads(aggregate_cache)
    return Factory(bridge=bridge, settings=settings, verify_loads=True, cache_size=heads)
