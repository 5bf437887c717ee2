"""Tamper evidence: every event's hash, chained to the previous event of the same aggregate.

Each append already knows its aggregate's previous event (the optimistic-concurrency head it sends as
``Nats-Expected-Last-Subject-Sequence``), so the recorder stamps every message with the hash of that
previous event (``Stratus-Chain-Prev``) and its own hash (``Stratus-Chain-Hash``) at no extra round
trip, and writers of different aggregates never wait for one another. If the server accepts the
append, the expected-sequence check has proved that the previous hash is the aggregate's real last
event. The order of the whole log is covered by a second, global chain that the verifier computes
over positions (``global_step``); auditors keep its value at a position as an anchor.

What is hashed (docs/audit.md, "Canonical bytes"): the body, and every header whose lowercased name
starts with ``ce-`` or ``stratus-`` or is ``content-type``, except ``Stratus-Chain-Hash`` itself, in
the form NATS stores them (names lowercased and sorted, values stripped, CR/LF as spaces). The
previous hash is one of those headers. The subject and the position are not hashed: an exported log
imported under another prefix or stream verifies the same.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

CHAIN_PREV = "Stratus-Chain-Prev"
CHAIN_HASH = "Stratus-Chain-Hash"
GENESIS = "0" * 64  # the previous hash of an aggregate's first event
GLOBAL_GENESIS = "0" * 64  # the global chain's value before position 1

_MAGIC = b"stratus-chain-v1\n"
_HASH_LOWER = CHAIN_HASH.lower().encode()
_NEWLINES = str.maketrans({"\r": " ", "\n": " "})


def header_value(value: str) -> str:
    """A header value as NATS carries it (nats-py strips it and turns CR/LF into spaces)."""
    return value.strip().translate(_NEWLINES)


def _hashed_name(lower: bytes) -> bool:
    return (lower.startswith((b"ce-", b"stratus-")) or lower == b"content-type") and lower != _HASH_LOWER


def canonical(pairs: Iterable[tuple[bytes, bytes]], body: bytes) -> bytes:
    """The canonical bytes of one event from its (lowercased name, value) header pairs and body.

    Each hashed header is ``<name>=<len(value)>:<value>\\n`` in name order, then
    ``body=<len(body)>:<body>``; lengths are decimal byte counts, so no value can forge a boundary.
    """
    parts = [_MAGIC]
    for name, value in sorted(p for p in pairs if _hashed_name(p[0])):
        parts.append(b"%s=%d:%s\n" % (name, len(value), value))
    parts.append(b"body=%d:" % len(body))
    parts.append(body)
    return b"".join(parts)


def event_hash_of_pairs(pairs: Iterable[tuple[bytes, bytes]], body: bytes) -> str:
    return hashlib.sha256(canonical(pairs, body)).hexdigest()


def event_hash(headers: Mapping[str, str], body: bytes) -> str:
    """The hash of an event from the headers as the writer sends them (``Stratus-Chain-Prev`` set).

    The same bytes as ``canonical`` hashes, built faster (every append hashes each of its events):
    which names are hashed, and in which order, is settled once per shape of headers (their names
    in order: the recorder writes a few), and when every hashed name and value is ASCII with no CR
    or LF (always, for the headers Stratus writes) the canonical text is formatted as one string (an
    ASCII string's length is its byte count, and sorts as its bytes). Anything else takes the
    general path, ``_exact_event_hash``: tests/unit/test_chain_hash.py compares the two."""
    shape = tuple(headers)
    order = _ORDERS.get(shape)
    if order is None:
        order = _order(shape)
        if order is None:
            return _exact_event_hash(headers, body)
    values = [headers[k].strip() for k, _ in order]
    text = "".join([f"{n}={len(v)}:{v}\n" for (_, n), v in zip(order, values, strict=True)])
    if not text.isascii() or "\r" in text or text.count("\n") != len(order):
        return _exact_event_hash(headers, body)
    digest = hashlib.sha256(_MAGIC)
    digest.update(text.encode())
    digest.update(b"body=%d:" % len(body))
    digest.update(body)
    return digest.hexdigest()


# The names of a shape of headers (as sent, in order) -> (name as sent, canonical name) of the hashed
# ones, sorted by canonical name; a shape where two names have the same canonical name is not kept
# (its values would decide their order) and takes the general path.
_ORDERS: dict[tuple[str, ...], tuple[tuple[str, str], ...]] = {}
_ORDERS_MAX = 256  # Stratus writes a few shapes; others' are not remembered past this


def _order(shape: tuple[str, ...]) -> tuple[tuple[str, str], ...] | None:
    canonical = [(name, name.strip().lower()) for name in shape]
    hashed = sorted(((k, n) for k, n in canonical if _hashed_name(n.encode())), key=lambda p: p[1])
    if len({n for _, n in hashed}) != len(hashed):
        return None
    order = tuple(hashed)
    if len(_ORDERS) < _ORDERS_MAX:
        _ORDERS[shape] = order
    return order


def _exact_event_hash(headers: Mapping[str, str], body: bytes) -> str:
    """``event_hash`` for any headers: the canonical bytes built as the definition says."""
    pairs = [(k.strip().lower().encode(), header_value(v).encode()) for k, v in headers.items()]
    return event_hash_of_pairs(pairs, body)


def parse_header_block(block: bytes) -> list[tuple[bytes, bytes]]:
    """(lowercased name, stripped value) pairs of a raw NATS header block (``NATS/1.0\\r\\n...``)."""
    pairs = []
    for line in block.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            pairs.append((name.strip().lower(), value.strip()))
    return pairs


def global_step(previous: str, position: int, event_hash_hex: str) -> str:
    """The global chain after the event at ``position``: sha256(previous ‖ position ‖ event hash)."""
    return hashlib.sha256(b"%s:%d:%s" % (previous.encode(), position, event_hash_hex.encode())).hexdigest()
