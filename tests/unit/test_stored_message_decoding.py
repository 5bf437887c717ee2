"""A message read below nats-py (``projections.rawlog.StoredMessage``) finds its Notification in its raw
header block as ``decode_notification`` finds it in the headers the bridge's parser makes of the block:
the same fields, or the same error, on a stored event's block and on blocks bent every way."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from projections.rawlog import StoredMessage
from stratus.eventstore.bridge import Client
from stratus.eventstore.envelope import decode_notification

ID = b"6f1c2a3b-0000-4000-8000-00000000002a"
LINES = [
    b"Nats-Msg-Id: " + ID + b":3",
    b"ce-specversion: 1.0",
    b"ce-subject: " + ID,
    b"ce-originatorversion: 3",
    b"ce-topic: commands.instance:Instance.Spawned",
    b"Stratus-Id-Type: uuid",
    b"Nats-Expected-Last-Subject-Sequence-Subject: stratus.ev.*." + ID + b".*",
    b"Nats-Stream: LOG",
    b"Nats-Subject: stratus.ev.instance." + ID + b".spawned",
    b"Nats-Sequence: 42",
]
BODY = b'{"timestamp": "2026-11-27T02:00:00Z"}'


@dataclass
class _Parsed:
    """The same message as the plain path holds it: the parser's dict of the block."""

    headers: dict[str, str]
    data: bytes


def _block(lines: list[bytes]) -> bytes:
    return b"NATS/1.0\r\n" + b"".join(line + b"\r\n" for line in lines) + b"\r\n"


def _decoded(msg: Any) -> tuple[str, Any]:
    try:
        notification = decode_notification(msg) if isinstance(msg, _Parsed) else msg.notification()
    except Exception as e:  # the error is part of the answer compared (without the message's class)
        return "error", (type(e), str(e).replace(type(msg).__name__, "message"))
    return "notification", (type(notification), vars(notification))


def _agrees(lines: list[bytes]) -> None:
    block = _block(lines)
    reference = _Parsed(Client._parse_header_lines(block[len(b"NATS/1.0\r\n") :]), BODY)
    assert _decoded(StoredMessage(block, BODY)) == _decoded(reference), block


def test_a_stored_event_decodes_as_the_parsed_headers_do() -> None:
    _agrees(LINES)
    found = StoredMessage(_block(LINES), BODY).notification()
    assert (found.id, found.originator_version, str(found.originator_id)) == (42, 3, ID.decode())


def test_bent_blocks_decode_as_the_parsed_headers_do() -> None:
    bent = [
        [*LINES, b" ce-topic : padded, later"],  # a later line names it with padding
        [*LINES, b"ce-subject:x"],  # a later line, unpadded
        [*LINES, b"X-Note: ce-topic in a value"],
        [line.replace(b"Stratus-Id-Type: uuid", b"Stratus-Id-Type: str") for line in LINES],
        [line for line in LINES if not line.startswith(b"Stratus-Id-Type")],
        [line for line in LINES if not line.startswith(b"ce-topic")],
        [line for line in LINES if not line.startswith(b"Nats-Sequence")],
        [line.replace(b"ce-originatorversion: 3", b"ce-originatorversion:  3 ") for line in LINES],
        [line.replace(b"ce-originatorversion: 3", b"ce-originatorversion: 3_0") for line in LINES],
        [line.replace(b"ce-originatorversion: 3", b"ce-originatorversion: three") for line in LINES],
        [line.replace(b"Nats-Sequence: 42", b"Nats-Sequence: \xd9\xa4\xd9\xa2") for line in LINES],
        [line.replace(b"ce-subject: " + ID, b"ce-subject: not-a-uuid") for line in LINES],
        [line.replace(b"ce-topic: commands", b"ce-topic: caf\xc3\xa9 \xff commands") for line in LINES],
        [b"ce-topic: first", *LINES[1:]],  # the first line: right after the status line
    ]
    for lines in bent:
        _agrees(lines)


def test_random_lines_among_a_stored_events_decode_as_the_parsed_headers_do() -> None:
    rng = random.Random(20261127)
    names = ["ce-topic", "ce-subject", "Nats-Sequence", "Stratus-Id-Type", "ce-originatorversion", "x"]
    pads = ["", "", "", " ", "\t", "\x0b"]
    values = ["", " 7", "uuid", " str ", "4_2", "\u0664", "a:b", ID.decode()]
    for _ in range(2000):
        lines = list(LINES)
        for _ in range(rng.randrange(1, 4)):
            line = rng.choice(pads) + rng.choice(names) + rng.choice(pads) + rng.choice([":", ": ", ""])
            lines.insert(rng.randrange(0, len(lines) + 1), (line + rng.choice(values)).encode())
        _agrees(lines)
