"""The full history of one aggregate, read from the log (not from a read model).

Every event of an aggregate lives on ``<prefix>.*.<id>.*``, so one filtered scan gives it in
position order with who acted (user, project, roles), the request, correlation and causation ids,
and the chain hashes. Any event type is handled the same way: new kinds of events need no change.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import UUID

from nats.aio.msg import Msg

from stratus.eventstore import chain
from stratus.eventstore import envelope as env
from stratus.eventstore.subjects import SubjectLayout

MAX_PAGE = 1000


class LogReader(Protocol):
    """What the audit tools need of a log: its subject layout and pages of messages by position."""

    layout: SubjectLayout

    def read_messages(
        self, start: int, limit: int, *, stop: int | None = None, subject_filter: str | None = None
    ) -> list[Msg]: ...


@dataclass(frozen=True)
class Entry:
    """One event of a history: its CloudEvents envelope and its chain hashes."""

    envelope: env.Envelope
    chain_prev: str
    chain_hash: str

    @property
    def position(self) -> int:
        return self.envelope.position

    def to_dict(self) -> dict[str, Any]:
        """The structured CloudEvent (``schemas/envelope.v1.json``) with ``chainprev``/``chainhash``."""
        d = self.envelope.to_dict()
        d["chainprev"] = self.chain_prev
        d["chainhash"] = self.chain_hash
        return d


def entry_of(msg: Msg) -> Entry:
    """A stored message as a history entry (a placeholder of ``UNDECODABLE_TOPIC`` for one that is not
    the store's: the history and the stream show the log and go on past it)."""
    _, envelope = env.decode_message_leniently(msg)
    headers = msg.headers or {}
    return Entry(envelope, headers.get(chain.CHAIN_PREV, ""), headers.get(chain.CHAIN_HASH, ""))


def page(
    reader: LogReader, aggregate_id: UUID | str, *, limit: int = 100, marker: int | None = None
) -> tuple[list[Entry], int | None]:
    """Up to ``limit`` events of the aggregate after position ``marker``; and the next marker (None at
    the end)."""
    limit = max(1, min(limit, MAX_PAGE))
    start = (marker or 0) + 1
    msgs = reader.read_messages(start, limit + 1, subject_filter=reader.layout.aggregate_filter(aggregate_id))
    entries = [entry_of(m) for m in msgs[:limit]]
    more = len(msgs) > limit
    return entries, (entries[-1].position if more and entries else None)


def all_entries(reader: LogReader, aggregate_id: UUID | str, *, stop: int | None = None) -> list[Entry]:
    """Every event of the aggregate, up to position ``stop`` (inclusive) if given."""
    out: list[Entry] = []
    marker: int | None = None
    while True:
        entries, marker = page(reader, aggregate_id, limit=MAX_PAGE, marker=marker)
        for e in entries:
            if stop is not None and e.position > stop:
                return out
            out.append(e)
        if marker is None:
            return out


def parse_time(value: str) -> datetime:
    """An RFC 3339 / ISO 8601 timestamp (``Z`` or an offset; naive means UTC)."""
    t = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def event_time(entry: Entry) -> datetime:
    return parse_time(entry.envelope.time)
