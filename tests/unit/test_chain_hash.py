"""``chain.event_hash`` hashes exactly the canonical bytes of docs/audit.md, whatever the headers: its
fast path gives what the definition (written out here as it stood before, and as the verifier's
``event_hash_of_pairs`` computes it from a stored header block) gives, so old logs verify the same."""

from __future__ import annotations

import hashlib
import random
import string

import pytest

from stratus.eventstore import chain


def reference(headers: dict[str, str], body: bytes) -> str:
    """The definition, as ``event_hash`` computed it before it had a fast path."""
    hashed = []
    for k, v in headers.items():
        name = k.strip().lower().encode()
        value = v.strip().replace("\r", " ").replace("\n", " ").encode()
        if (
            name.startswith((b"ce-", b"stratus-")) or name == b"content-type"
        ) and name != b"stratus-chain-hash":
            hashed.append((name, value))
    parts = [b"stratus-chain-v1\n"]
    for name, value in sorted(hashed):
        parts.append(b"%s=%d:%s\n" % (name, len(value), value))
    parts.append(b"body=%d:%s" % (len(body), body))
    return hashlib.sha256(b"".join(parts)).hexdigest()


WRITTEN = {  # headers as the recorder writes them
    "Nats-Msg-Id": "3f0c2a",
    "ce-specversion": "1.0",
    "ce-id": "8c1d0e5e-3b9a-4a63-9d1e-2b7f0f8c9a11:1",
    "ce-source": "/stratus/stratus",
    "ce-type": "commands.instance:Instance.Requested",
    "ce-subject": "8c1d0e5e-3b9a-4a63-9d1e-2b7f0f8c9a11",
    "ce-time": "2026-11-26T11:00:00.123456Z",
    "content-type": "application/json",
    "ce-actoruser": "u1",
    "ce-actorroles": "member,reader",
    "ce-originatorversion": "1",
    "Stratus-Id-Type": "uuid",
    "Stratus-Append-Id": "a" * 32,
    "Nats-Expected-Last-Subject-Sequence": "0",
    chain.CHAIN_PREV: chain.GENESIS,
}

CASES = {
    "as written": WRITTEN,
    "with its own hash (not hashed)": {**WRITTEN, chain.CHAIN_HASH: "f" * 64},
    "names in other cases and with spaces": {
        " CE-Id ": "x",
        "Content-Type": "text/plain",
        "STRATUS-Chain-Prev": chain.GENESIS,
    },
    "a name twice, in two cases": {"ce-actoruser": "b", "CE-ACTORUSER": "a", "Ce-ActorUser": "a "},
    "values with spaces around": {"ce-id": "  padded\t", "ce-source": " "},
    "values with CR and LF": {"ce-id": "two\r\nlines", "ce-source": "a\nb", "ce-type": "c\rd"},
    "non-ASCII values": {"ce-actoruser": "Zoë", "ce-subject": "名前", "ce-id": "x"},
    "non-ASCII names": {"ce-ﬁle": "v", "Stratus-İd": "w", "ce-id": "x"},
    "nothing hashed but the body": {"Nats-Msg-Id": "m", "x-other": "y"},
    "no headers": {},
    "empty values": {"ce-id": "", "ce-type": ""},
}
BODIES = [b"", b'{"a":1}', "é\r\n".encode() * 100, bytes(range(256))]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("body", BODIES, ids=["empty", "json", "non-ascii", "binary"])
def test_event_hash_is_the_definition(case: str, body: bytes) -> None:
    headers = CASES[case]
    assert chain.event_hash(headers, body) == reference(headers, body)
    stored = b"NATS/1.0\r\n" + b"".join(
        b"%s: %s\r\n" % (k.encode(), chain.header_value(v).encode()) for k, v in headers.items()
    )
    storable = all(k.isascii() for k in headers) and all(
        "\r" not in v and "\n" not in v for v in headers.values()
    )
    if storable:  # what NATS would store, read back as the verifier reads it
        assert chain.event_hash_of_pairs(chain.parse_header_block(stored), body) == reference(headers, body)


def test_event_hash_is_the_definition_on_random_headers() -> None:
    rng = random.Random(16)
    alphabet = string.ascii_letters + string.digits + " -_:/.\t\r\né名"
    prefixes = ["ce-", "CE-", "stratus-", "Stratus-", "content-type", "nats-", "x-", " ce-"]
    for _ in range(500):
        headers = {
            rng.choice(prefixes)
            + "".join(rng.choices(string.ascii_lowercase + "-", k=rng.randint(0, 6))): "".join(
                rng.choices(alphabet, k=rng.randint(0, 40))
            )
            for _ in range(rng.randint(0, 30))
        }
        body = rng.randbytes(rng.randint(0, 300))
        assert chain.event_hash(headers, body) == reference(headers, body)


def test_event_hash_of_many_names_is_still_the_definition() -> None:
    """More distinct names than the process remembers: the general path, the same hash."""
    for i in range(3):
        headers = {f"ce-name-{i}-{j}": str(j) for j in range(700)}
        assert chain.event_hash(headers, b"body") == reference(headers, b"body")


def test_a_shape_seen_before_is_still_the_definition_whatever_its_values() -> None:
    """The hashed names' order is kept per shape of headers; the values of each event still decide
    the path (CR, LF, non-ASCII or surrounding spaces in a value the shape had clean before)."""
    for values in (("a", "b", "c"), ("two\r\nlines", "b", "c"), ("Zoë", " b ", ""), ("a", "b\n", "c")):
        headers = dict(zip(("ce-shape-id", "Nats-Shape", "ce-shape-type"), values, strict=True))
        assert chain.event_hash(headers, b"{}") == reference(headers, b"{}")
    for order in (("ce-b", "ce-a"), ("ce-a", "ce-b")):  # the same names in another order: another shape
        headers = {name: name for name in order}
        assert chain.event_hash(headers, b"") == reference(headers, b"")
