"""Export the log as JSON Lines (whole, or one aggregate) and import it into an empty stream.

One line per event, in position order::

    {"position": 7, "subject": "instance.<id>.spawned", "headers": {...}, "body": "<the JSON payload>"}

``subject`` is relative to the subject prefix (so an export imports under any prefix); ``headers``
are every header the event was stored with except those the server adds (``Nats-Sequence``, ...)
and the expected-sequence/batch headers of the append, chain hashes included; ``body`` is the
payload byte for byte as UTF-8 text (``body_base64`` when it is not UTF-8).

Importing a whole-log export checks every event's hash and its aggregate chain before publishing it
(a broken export is refused, naming the first bad line), and publishes each event with
``Nats-Expected-Last-Sequence: <position - 1>``: the target stream must be empty, and every event
lands at the position it had, so read models rebuilt from the import match the original's row for
row, positions included.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import nats.js.errors
import orjson

from stratus.audit.rawreader import RawReader
from stratus.eventstore import chain
from stratus.eventstore.bridge import NatsBridge
from stratus.eventstore.subjects import SubjectLayout

# Headers the server or the append mechanics add: not part of the event.
_DROPPED_PREFIXES = ("nats-expected-", "nats-batch-")
_DROPPED = frozenset(
    {
        "nats-sequence",
        "nats-subject",
        "nats-time-stamp",
        "nats-stream",
        "nats-last-sequence",
        "nats-num-pending",
    }
)


class ImportRefused(Exception):
    """The export cannot be imported as it is (broken chain, wrong order, target not empty)."""


def _headers(block: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in chain.parse_header_block(block):
        n = name.decode()
        if n in _DROPPED or n.startswith(_DROPPED_PREFIXES):
            continue
        out[_original_case(block, name)] = value.decode()
    return out


def _original_case(block: bytes, lower: bytes) -> str:
    i = block.lower().find(b"\r\n" + lower + b":")
    return block[i + 2 : i + 2 + len(lower)].decode() if i >= 0 else lower.decode()


def export_lines(
    urls: tuple[str, ...] | list[str],
    stream: str,
    subject_prefix: str,
    *,
    aggregate_id: str | None = None,
    seed_file: Path | None = None,
) -> Iterator[bytes]:
    """The log (or one aggregate's events) as JSON Lines, each ending in a newline."""
    layout = SubjectLayout(subject_prefix)
    filt = layout.aggregate_filter(aggregate_id) if aggregate_id is not None else layout.all
    cut = len(subject_prefix) + 1
    with RawReader(urls, stream, seed_file=seed_file) as reader:
        last = reader.last_position(layout.all)
        for m in reader.messages(filt, 1, last):
            line: dict[str, Any] = {
                "position": m.position,
                "subject": m.subject[cut:],
                "headers": _headers(m.header_block),
            }
            try:
                line["body"] = m.body.decode()
            except UnicodeDecodeError:
                line["body_base64"] = base64.b64encode(m.body).decode()
            yield orjson.dumps(line) + b"\n"


@dataclass(frozen=True)
class ExportedEvent:
    """One line of an export: the event's log position, subject, NATS headers and body."""

    position: int
    subject: str
    headers: dict[str, str]
    body: bytes


def read_lines(lines: Iterable[bytes | str]) -> Iterator[ExportedEvent]:
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            d = orjson.loads(raw)
            body = base64.b64decode(d["body_base64"]) if "body_base64" in d else d["body"].encode()
            yield ExportedEvent(int(d["position"]), str(d["subject"]), dict(d["headers"]), body)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise ImportRefused(f"line {n} is not an exported event: {e}") from e


def check_chain(events: Iterable[ExportedEvent]) -> Iterator[ExportedEvent]:
    """Pass the events through, raising ``ImportRefused`` at the first one that breaks the chain."""
    heads: dict[str, str] = {}
    expected = 1
    for e in events:
        if e.position != expected:
            raise ImportRefused(
                f"position {e.position} where {expected} was expected: not a whole-log export"
            )
        lower = {k.lower(): v for k, v in e.headers.items()}
        stored = lower.get(chain.CHAIN_HASH.lower(), "")
        unhashed = {k: v for k, v in e.headers.items() if k.lower() != chain.CHAIN_HASH.lower()}
        if not stored or chain.event_hash(unhashed, e.body) != stored:
            raise ImportRefused(f"the event at position {e.position} does not match its chain hash")
        aggregate = lower.get("ce-subject", "")
        if lower.get(chain.CHAIN_PREV.lower(), "") != heads.get(aggregate, chain.GENESIS):
            raise ImportRefused(f"the chain of {aggregate} breaks at position {e.position}")
        heads[aggregate] = stored
        expected += 1
        yield e


def import_events(
    bridge: NatsBridge,
    stream: str,
    subject_prefix: str,
    events: Iterable[ExportedEvent],
    *,
    timeout: float = 30.0,
) -> int:
    """Publish checked events into ``stream`` (empty, under ``subject_prefix``); the count imported."""
    count = 0
    chunk: list[ExportedEvent] = []

    async def publish(batch: list[ExportedEvent]) -> None:
        js = bridge.js
        for e in batch:
            headers = {**e.headers, "Nats-Expected-Last-Sequence": str(e.position - 1)}
            try:
                await js.publish(f"{subject_prefix}.{e.subject}", e.body, stream=stream, headers=headers)
            except nats.js.errors.BadRequestError as err:
                raise ImportRefused(
                    f"the target stream refused position {e.position} ({err.description}): it must be empty"
                ) from err

    for e in check_chain(events):
        chunk.append(e)
        if len(chunk) >= 500:
            bridge.run(lambda b=chunk: publish(b), timeout)  # type: ignore[misc]
            count += len(chunk)
            chunk = []
    if chunk:
        bridge.run(lambda b=chunk: publish(b), timeout)  # type: ignore[misc]
        count += len(chunk)
    return count


def write_export(out: IO[bytes], lines: Iterable[bytes]) -> int:
    n = 0
    for line in lines:
        out.write(line)
        n += 1
    return n
