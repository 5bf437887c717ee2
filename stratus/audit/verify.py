"""Prove the log unaltered, or name the first event where it is not (``stratus audit verify``).

Reads the stream in position order with the raw reader and checks, for every event:

1. positions are dense from 1 (JetStream never reuses or skips a sequence, and the stream denies
   deletes and purges: a missing position is a removed event);
2. the event's ``Stratus-Chain-Hash`` is the hash of its canonical bytes (its content is unchanged);
3. its ``Stratus-Chain-Prev`` is the hash of the previous event of the same aggregate (nothing of
   that aggregate was removed, inserted or reordered);
4. the global chain over positions matches every anchor the auditor recorded earlier (nothing up to
   that position was rewritten, even consistently, and no aggregate lost its last events).

See docs/audit.md for the exact canonical bytes.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from stratus.audit.rawreader import RawReader
from stratus.eventstore import chain

# The hashed headers only (ce-*, stratus-*, content-type); values are stripped below only when needed.
_HEADER_RE = re.compile(rb"\r\n((?i:ce-|stratus-|content-type)[^:\r\n]*):[ \t]*([^\r\n]*)")
_PREV = chain.CHAIN_PREV.lower().encode()
_HASH = chain.CHAIN_HASH.lower().encode()
_SUBJECT = b"ce-subject"
_ID = b"ce-id"
_MAGIC = b"stratus-chain-v1\n"


@dataclass(frozen=True)
class Break:
    """The first place the log is not what was written."""

    position: int
    event_id: str
    reason: str


@dataclass
class Report:
    ok: bool
    checked: int  # events checked
    last_position: int
    global_hash: str  # the global chain's value at last_position: record it as an anchor
    seconds: float
    first_break: Break | None = None
    anchors_checked: list[int] = field(default_factory=list)

    @property
    def events_per_second(self) -> float:
        return self.checked / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "checked": self.checked,
            "last_position": self.last_position,
            "global_hash": self.global_hash,
            "anchors_checked": self.anchors_checked,
            "seconds": round(self.seconds, 3),
            "events_per_second": round(self.events_per_second),
            "first_break": None if self.first_break is None else vars(self.first_break),
        }


def _event_hash(pairs: list[tuple[bytes, bytes]], body: bytes) -> str:
    # chain.canonical, inlined for speed (the verifier's inner loop); tests hold the two equal.
    parts = [_MAGIC]
    for name, value in sorted(pairs):
        parts.append(b"%s=%d:%s\n" % (name, len(value), value))
    parts.append(b"body=%d:" % len(body))
    parts.append(body)
    return hashlib.sha256(b"".join(parts)).hexdigest()


def verify(
    urls: tuple[str, ...] | list[str],
    stream: str,
    subject_prefix: str,
    *,
    upto: int | None = None,
    anchors: Mapping[int, str] | None = None,
) -> Report:
    """Check the stream from position 1 to ``upto`` (default: its last position when the check starts).

    ``anchors``: ``{position: global hash}`` values of earlier reports; each must still hold.
    """
    anchors = dict(anchors or {})
    started = time.perf_counter()
    heads: dict[bytes, str] = {}
    global_hash = chain.GLOBAL_GENESIS
    expected = 1
    checked = 0
    anchors_checked: list[int] = []
    first_break: Break | None = None
    with RawReader(urls, stream) as reader:
        last = reader.last_position(f"{subject_prefix}.>") if upto is None else upto
        for m in reader.messages(f"{subject_prefix}.>", 1, last):
            pairs = [(n.lower(), v.rstrip(b" \t")) for n, v in _HEADER_RE.findall(m.header_block)]
            named = dict(pairs)
            stored = named.pop(_HASH, b"")
            if stored:
                pairs.remove((_HASH, stored))
            prev = named.get(_PREV, b"")
            aggregate = named.get(_SUBJECT, b"")
            event_id = named.get(_ID, b"")
            eid = event_id.decode(errors="replace")
            if m.position != expected:
                first_break = Break(
                    expected, "", f"positions {expected}..{m.position - 1} are missing: events were removed"
                )
                break
            if not stored:
                first_break = Break(m.position, eid, "the event carries no chain hash")
                break
            stored_hex = stored.decode()
            if _event_hash(pairs, m.body) != stored_hex:
                first_break = Break(m.position, eid, "the event's content does not match its hash: altered")
                break
            want_prev = heads.get(aggregate, chain.GENESIS)
            if prev.decode() != want_prev:
                first_break = Break(
                    m.position,
                    eid,
                    "the chain of its aggregate is broken: the previous event of "
                    f"{aggregate.decode(errors='replace')} was removed, inserted or altered",
                )
                break
            heads[aggregate] = stored_hex
            global_hash = chain.global_step(global_hash, m.position, stored_hex)
            anchor = anchors.get(m.position)
            if anchor is not None:
                if anchor != global_hash:
                    first_break = Break(
                        m.position,
                        eid,
                        f"the global chain at position {m.position} differs from the anchor recorded "
                        "earlier: events up to here were rewritten",
                    )
                    break
                anchors_checked.append(m.position)
            checked += 1
            expected += 1
        else:
            if expected <= last:
                first_break = Break(expected, "", f"positions {expected}..{last} are missing")
    if first_break is None:
        for position in sorted(anchors):
            if position > last:
                first_break = Break(
                    last + 1,
                    "",
                    f"an anchor names position {position}, beyond the log's end {last}: "
                    "events were removed from the end",
                )
                break
    return Report(
        ok=first_break is None,
        checked=checked,
        last_position=expected - 1,
        global_hash=global_hash,
        seconds=time.perf_counter() - started,
        first_break=first_break,
        anchors_checked=anchors_checked,
    )
