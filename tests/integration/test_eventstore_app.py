"""An eventsourcing Application on the JetStream event store, selected by environment or injected."""

from __future__ import annotations

import dataclasses
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from eventsourcing.persistence import InfrastructureFactory, IntegrityError

from stratus.config import Settings
from stratus.eventstore import Factory, JetStreamApplicationRecorder, NatsBridge, TrackingNotSupportedError
from tests.fixtures.nats import unique_settings


class Thing(Aggregate):
    @event("Created")
    def __init__(self, name: str) -> None:
        self.name = name

    @event("Renamed")
    def rename(self, name: str) -> None:
        self.name = name


class Things(Application[UUID]):
    def create(self, name: str) -> UUID:
        thing = Thing(name)
        self.save(thing)
        return thing.id

    def rename(self, thing_id: UUID, name: str) -> None:
        thing: Thing = self.repository.get(thing_id)
        thing.rename(name)
        self.save(thing)


def test_application_selected_by_persistence_module(settings: Settings, bridge: NatsBridge) -> None:
    env = {"PERSISTENCE_MODULE": "stratus.eventstore", "IS_SNAPSHOTTING_ENABLED": "y", **settings.to_env()}
    app = Things(env=env)
    try:
        assert isinstance(app.factory, Factory)
        assert isinstance(app.recorder, JetStreamApplicationRecorder)
        thing_id = app.create("one")
        app.rename(thing_id, "two")
        thing: Thing = app.repository.get(thing_id)
        assert (thing.name, thing.version) == ("two", 2)

        app.take_snapshot(thing_id)
        assert app.repository.get(thing_id).name == "two"

        notifications = app.notification_log.select(start=1, limit=10)
        assert [n.id for n in notifications] == [1, 2]
        assert isinstance(app.recorder, JetStreamApplicationRecorder)
        envelopes = app.recorder.read_envelopes(1, 10)
        assert [e.type for e in envelopes] == ["stratus.thing.created", "stratus.thing.renamed"]
        assert envelopes[0].subject == str(thing_id)
        assert envelopes[0].time.endswith("Z")
        assert envelopes[1].to_dict()["data"]["name"] == "two"
        assert envelopes[0].nats_subject == f"{settings.subject_prefix}.thing.{thing_id}.created"

        with pytest.raises(TrackingNotSupportedError, match="PostgreSQL"):
            app.factory.tracking_recorder()
    finally:
        app.close()
        assert isinstance(app.factory, Factory) and app.factory.bridge.closed
        JetStreamApplicationRecorder.from_settings(bridge, settings).delete_stream()
        snapshots = dataclasses.replace(settings, stream=f"{settings.stream}_SNAPSHOTS")
        JetStreamApplicationRecorder.from_settings(bridge, snapshots).delete_stream()


class InjectedThings(Things):
    def __init__(self, factory: InfrastructureFactory[Any]) -> None:
        self._injected = factory
        super().__init__()

    def construct_factory(self, env: Any) -> InfrastructureFactory[Any]:
        return self._injected


def test_application_with_an_injected_bridge(bridge: NatsBridge, settings: Settings) -> None:
    factory = Factory(bridge=bridge, settings=settings)
    first = InjectedThings(factory)
    thing_id = first.create("one")
    # A second process on the same stream sees it, and a stale save from it is refused.
    other = InjectedThings(Factory(bridge=NatsBridge(settings.nats_urls).start(), settings=settings))
    try:
        stale: Thing = other.repository.get(thing_id)
        first.rename(thing_id, "two")
        stale.rename("three")
        with pytest.raises(IntegrityError, match="version"):
            other.save(stale)
        assert first.repository.get(thing_id).name == "two"
    finally:
        other.close()
        first.close()
    assert not bridge.closed  # an injected bridge belongs to the composition root
    JetStreamApplicationRecorder.from_settings(bridge, settings).delete_stream()


def test_factory_reads_settings_from_the_environment(nats_server: Any) -> None:
    settings = unique_settings(nats_server.url, cloud_name="east")
    factory = Factory(env=settings.to_env(), ensure_stream=False)
    try:
        assert factory.settings.stream == settings.stream
        recorder = factory.application_recorder()
        assert recorder.source == "/stratus/east"
        assert recorder.layout.prefix == settings.subject_prefix
    finally:
        factory.close()
