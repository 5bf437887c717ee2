"""eventsourcing's own recorder test suites, run against a real nats-server.

Each ``create_recorder()`` call gets a fresh stream (the suites expect notification ids to start at 1).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from eventsourcing.tests.persistence import (
    AggregateRecorderTestCase,
    ApplicationRecorderTestCase,
    NonInterleavingNotificationIDsBaseCase,
)

from stratus.config import Settings
from stratus.eventstore import JetStreamAggregateRecorder, JetStreamApplicationRecorder, NatsBridge
from tests.fixtures.nats import unique_settings


class TestJetStreamApplicationRecorder(ApplicationRecorderTestCase[JetStreamApplicationRecorder]):
    @pytest.fixture(autouse=True)
    def _inject(self, make_recorder: Callable[..., JetStreamApplicationRecorder]) -> None:
        self._make_recorder = make_recorder

    def create_recorder(self) -> JetStreamApplicationRecorder:
        return self._make_recorder()

    def test_insert_subscribe(self) -> None:
        # The suite names it optional_ so that backends without subscriptions can skip it; ours has one.
        self.optional_test_insert_subscribe()


class TestJetStreamAggregateRecorder(AggregateRecorderTestCase):
    @pytest.fixture(autouse=True)
    def _inject(self, bridge: NatsBridge, settings: Settings) -> None:
        self._bridge = bridge
        self._url = settings.nats_urls[0]

    def create_recorder(self) -> JetStreamAggregateRecorder:
        r: JetStreamAggregateRecorder = JetStreamAggregateRecorder.from_settings(
            self._bridge, unique_settings(self._url)
        )
        r.ensure_stream()
        self.addCleanup(r.delete_stream)
        return r


class TestNonInterleavingNotificationIDs(NonInterleavingNotificationIDsBaseCase):
    @pytest.fixture(autouse=True)
    def _inject(self, make_recorder: Callable[..., JetStreamApplicationRecorder]) -> None:
        self._make_recorder = make_recorder

    def create_recorder(self) -> JetStreamApplicationRecorder:
        return self._make_recorder()
