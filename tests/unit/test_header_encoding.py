"""The bridge's header encoder sends what nats-py's sends, on edge cases and random headers."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import nats.errors
import pytest
from nats.aio.client import Client as NatsPyClient

from stratus.eventstore.bridge import Client

CASES: list[dict[str, Any]] = [
    {},
    {"Ce-Type": "stratus.instance.requested", "Ce-Id": "1"},
    {"  Padded  ": "   value with spaces   "},
    {"": "empty name skipped", "Kept": "yes"},
    {"   ": "blank name skipped"},
    {"Multi-Line": "a\r\nb\nc\rd"},
    {"Unicode": "café ☃"},
    {"Empty-Value": ""},
    {"Colon": "a:b:c", "Tab": "\tx\t"},
]
BAD: list[dict[str, Any]] = [{"Bad Name": "space"}, {"Café": "non-ascii name"}, {"Good": "1", "Bad:": "2"}]


class _Sent:
    """A client that keeps what it would write instead of writing it (never connected)."""

    sent: list[bytes]

    async def _send_command(self, cmd: bytes, priority: bool = False) -> None:
        self.sent.append(cmd)


class Ours(_Sent, Client):
    """Stratus's client, recording."""


class Theirs(_Sent, NatsPyClient):
    """nats-py's client, recording."""


def sent(cls: type[_Sent], headers: dict[str, Any] | None) -> bytes | type[BaseException]:
    client = cls()
    client.sent = []
    payload = b'{"x": 1}'
    try:
        asyncio.run(client._send_publish("s.a", "_INBOX.r", payload, len(payload), headers))  # type: ignore[attr-defined]
    except nats.errors.Error as e:
        return type(e)
    [command] = client.sent
    return command


def test_the_same_bytes_as_nats_py_on_edge_cases() -> None:
    for headers in [*CASES, None]:
        assert sent(Ours, headers) == sent(Theirs, headers), headers


def test_the_same_refusals_as_nats_py() -> None:
    for headers in BAD:
        assert sent(Ours, headers) is sent(Theirs, headers) is nats.errors.BadHeaderError


@pytest.mark.parametrize("seed", range(3))
def test_the_same_bytes_as_nats_py_on_random_headers(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = "abcXYZ-_.:\t \r\né☃0123456789"
    for _ in range(500):
        headers = {
            "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 8))): "".join(
                rng.choice(alphabet) for _ in range(rng.randrange(0, 12))
            )
            for _ in range(rng.randrange(0, 5))
        }
        assert sent(Ours, headers) == sent(Theirs, headers), headers


def test_the_same_bytes_as_nats_py_for_a_shape_seen_before() -> None:
    """Names are checked once per shape of headers; each message's values still decide its bytes."""
    for values in (("1", "2"), ("x\r\ny", " 2 "), ("1", "é"), ("", "\n")):
        headers = dict(zip(("Shape-A", " Shape-B "), values, strict=True))
        assert sent(Ours, headers) == sent(Theirs, headers), headers
