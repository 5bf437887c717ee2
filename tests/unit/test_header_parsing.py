"""The bridge's fast NATS header parser reads what nats-py's reads, on edge cases and random blocks."""

from __future__ import annotations

import random

from nats.aio.client import Client as NatsPyClient

from stratus.eventstore.bridge import Client
from tests.fixtures.header_blocks import CASES


def test_the_same_headers_as_nats_py_on_edge_cases() -> None:
    for raw in CASES:
        assert Client._parse_header_lines(raw) == NatsPyClient._parse_header_lines(raw), raw


def test_the_same_headers_as_nats_py_on_random_blocks() -> None:
    rng = random.Random(20261122)
    alphabet = b"abcXYZ-_:.\t \r\n\x0b\x1c\xc3\xa9\xff0123456789"
    for _ in range(3000):
        raw = bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 80)))
        assert Client._parse_header_lines(raw) == NatsPyClient._parse_header_lines(raw), raw
