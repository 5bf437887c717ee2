"""The bridge's fast NATS header parser reads what nats-py's reads, on edge cases and random blocks."""

from __future__ import annotations

import random

from nats.aio.client import Client as NatsPyClient

from stratus.eventstore.bridge import Client

CASES = [
    b"",
    b"\r\n",
    b"Ce-Type: stratus.instance.requested\r\nCe-Id: 1\r\n\r\n",
    b"Name:Value\r\nName2:\tValue2 \r\n",
    b": empty name\r\n",
    b"No-Colon-Here\r\n",
    b"Bad Name: has a space\r\nGood: yes\r\n",
    b"Tab\tName: x\r\nVt\x0bName: y\r\nFs\x1cName: z\r\n",
    b"Caf\xc3\xa9: non-ascii name\r\n",
    b"Value: caf\xc3\xa9 and \xff broken\r\n",
    b"Colon: a:b:c\r\n",
    b"Dup: 1\r\nDup: 2\r\n",
    b"  Padded  :   value with spaces   \r\n",
    b"Nats-Msg-Id: abc\nLoose: newline\r\n",
]


def test_the_same_headers_as_nats_py_on_edge_cases() -> None:
    for raw in CASES:
        assert Client._parse_header_lines(raw) == NatsPyClient._parse_header_lines(raw), raw


def test_the_same_headers_as_nats_py_on_random_blocks() -> None:
    rng = random.Random(20261122)
    alphabet = b"abcXYZ-_:.\t \r\n\x0b\x1c\xc3\xa9\xff0123456789"
    for _ in range(3000):
        raw = bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 80)))
        assert Client._parse_header_lines(raw) == NatsPyClient._parse_header_lines(raw), raw
