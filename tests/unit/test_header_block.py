"""A raw header block looked up name by name answers what the bridge's parser (nats-py's rules) makes
of the whole block: on edge cases, on stored events' blocks, on random blocks."""

from __future__ import annotations

import random

from projections.rawlog import HeaderBlock
from stratus.eventstore.bridge import Client
from tests.fixtures.header_blocks import CASES

NAMES = [
    "ce-topic",
    "ce-subject",
    "Nats-Sequence",
    "Stratus-Id-Type",
    "Dup",
    "Padded",
    "Name",
    "",
    "a b",
    "é",
    "NATS/1.0",  # the status line's text, which the parser never reads as a header
]
STORED = (
    b"Nats-Msg-Id: 6f1c:3\r\nce-specversion: 1.0\r\nce-id: 6f1c:3\r\nce-subject: 6f1c\r\n"
    b"ce-topic: commands.instance:Instance.Spawned\r\nce-originatorversion: 3\r\nStratus-Id-Type: uuid\r\n"
    b"Nats-Stream: LOG\r\nNats-Subject: stratus.ev.instance.6f1c.spawned\r\nNats-Sequence: 42\r\n\r\n"
)


def _agrees(raw: bytes, names: list[str]) -> None:
    parsed = Client._parse_header_lines(raw)
    for name in [*names, *parsed]:
        block = HeaderBlock(b"NATS/1.0\r\n" + raw)  # each lookup on a block not yet parsed
        assert block.get(name) == parsed.get(name), (raw, name)
        assert (name in block) == (name in parsed), (raw, name)
    assert dict(HeaderBlock(b"NATS/1.0\r\n" + raw)) == parsed, raw


def test_lookups_answer_what_the_parser_makes_of_edge_cases() -> None:
    for raw in [
        *CASES,
        STORED,
        STORED + b"ce-topic : padded, later\r\n",
        b" ce-topic: first\r\nce-topic: x\r\n",
    ]:
        _agrees(raw, NAMES)


def test_lookups_answer_what_the_parser_makes_of_random_blocks() -> None:
    rng = random.Random(20261126)
    names = ["ce-topic", "ce-topicx", "xce-topic", "Nats-Sequence", "a", "é", "NATS/1.0"]
    pads = ["", "", "", " ", "\t", "\x0b", "\r", "\n"]
    ends = ["\r\n", "\r\n", "\r\n", "\n", "\r", ""]
    for _ in range(3000):
        lines = []
        for _ in range(rng.randrange(0, 6)):
            name = rng.choice(pads) + rng.choice(names) + rng.choice(pads)
            value = "".join(rng.choice("ab :\t-é") for _ in range(rng.randrange(0, 6)))
            lines.append(name + rng.choice([":", ":", "", "::"]) + value + rng.choice(ends))
        raw = "".join(lines).encode()
        if rng.random() < 0.3:
            raw += b"\xff" + rng.choice([b"ce-topic: broken \xff value", b"\xffce-topic: y"])
        _agrees(raw, names)
