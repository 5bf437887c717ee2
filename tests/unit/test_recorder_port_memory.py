"""The recorder port's conformance case on the in-memory log (no servers)."""

from __future__ import annotations

from commands.ports import RecorderPort
from stratus.eventstore.memory import InMemoryFactory, InMemoryRecorder
from tests.fixtures.recorder_port import RecorderPortCase


class TestInMemoryRecorderPort(RecorderPortCase):
    def create_recorder(self) -> InMemoryRecorder:
        return InMemoryFactory().application_recorder()

    def other_writer(self, recorder: RecorderPort) -> RecorderPort:
        return recorder  # one log in one process: every writer appends to the same recorder
