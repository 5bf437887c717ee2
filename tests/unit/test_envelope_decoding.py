"""Decoding a stored message: the Notification alone (``decode_notification``, what the projector and
aggregate loads read) is the one ``decode_message`` gives with its envelope, from the same headers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

import pytest
from eventsourcing.persistence import StoredEvent

from stratus.context import CommandContext
from stratus.eventstore.envelope import (
    CE_TOPIC,
    NATS_SEQUENCE,
    NATS_SUBJECT,
    build_headers,
    decode_message,
    decode_notification,
)


@dataclass
class _Meta:
    stream: int


@dataclass
class _Sequence:
    sequence: Any


@dataclass
class _Msg:
    """The parts of a nats-py message the decoders read."""

    headers: dict[str, str]
    data: bytes
    subject: str = "stratus.ev.instance.x.requested"
    metadata: Any = field(default=None)


def _stored(originator_id: Any) -> StoredEvent:
    return StoredEvent(
        originator_id=originator_id,
        originator_version=3,
        topic="commands.instance:Instance.Requested",
        state=b'{"timestamp": "2026-11-26T10:00:00Z", "name": "vm"}',
    )


@pytest.mark.parametrize("originator_id", [uuid4(), "compute-001"])
def test_the_notification_alone_is_the_one_decode_message_gives(originator_id: Any) -> None:
    headers = build_headers(_stored(originator_id), CommandContext(), source="/test", append_id="a")
    direct = _Msg({**headers, NATS_SEQUENCE: "42", NATS_SUBJECT: "stratus.ev.x"}, b'{"a": 1}')
    consumed = _Msg(dict(headers), b'{"a": 1}', metadata=_Sequence(_Meta(43)))
    for msg, position in ((direct, 42), (consumed, 43)):
        notification, envelope = decode_message(msg)
        assert decode_notification(msg) == notification
        assert notification.id == position == envelope.position
        assert notification.originator_id == originator_id == envelope.originator_id


def test_a_message_without_the_envelope_raises_as_decode_message_does() -> None:
    headers = build_headers(_stored(uuid4()), CommandContext(), source="/test", append_id="a")
    del headers[CE_TOPIC]
    msg = _Msg({**headers, NATS_SEQUENCE: "1"}, b"{}")
    with pytest.raises(KeyError):
        decode_message(msg)
    with pytest.raises(KeyError):
        decode_notification(msg)
