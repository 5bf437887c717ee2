"""The recorder port's conformance case on the JetStream recorder, with a real nats-server.

Each ``create_recorder()`` gets a stream of its own; ``other_writer`` is a second recorder on that
stream, as another process has one (its own heads, its own hints)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from commands.ports import RecorderPort
from stratus.config import Settings
from stratus.eventstore import JetStreamApplicationRecorder
from tests.fixtures.nats import unique_settings
from tests.fixtures.recorder_port import RecorderPortCase


class TestJetStreamRecorderPort(RecorderPortCase):
    @pytest.fixture(autouse=True)
    def _inject(self, make_recorder: Callable[..., JetStreamApplicationRecorder], settings: Settings) -> None:
        self._make_recorder = make_recorder
        self._url = settings.nats_urls[0]
        self._settings: dict[int, Settings] = {}

    def create_recorder(self) -> JetStreamApplicationRecorder:
        s = unique_settings(self._url)
        recorder = self._make_recorder(s)
        self._settings[id(recorder)] = s
        return recorder

    def other_writer(self, recorder: RecorderPort) -> RecorderPort:
        return self._make_recorder(self._settings[id(recorder)])
