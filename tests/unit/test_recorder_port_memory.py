"""The recorder port's conformance case on the in-memory log (no servers)."""

from __future__ import annotations

import pytest
from eventsourcing.popo import POPOFactory

from commands.app import Stratus
from commands.ports import RecorderPort
from stratus.eventstore.memory import InMemoryFactory, InMemoryRecorder
from tests.fixtures.recorder_port import RecorderPortCase


class TestInMemoryRecorderPort(RecorderPortCase):
    def create_recorder(self) -> InMemoryRecorder:
        return InMemoryFactory().application_recorder()

    def other_writer(self, recorder: RecorderPort) -> RecorderPort:
        return recorder  # one log in one process: every writer appends to the same recorder


def test_stratus_runs_on_the_in_memory_log_and_refuses_a_recorder_without_the_port() -> None:
    assert isinstance(Stratus(InMemoryFactory()).recorder, InMemoryRecorder)
    with pytest.raises(TypeError, match="RecorderPort"):
        Stratus(POPOFactory({}))  # eventsourcing's plain recorder: no prefetched, no known_version
