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
import itertools
import multiprocessing
import os
import re
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from stratus.audit import filestore
from stratus.audit.rawreader import RawReader
from stratus.eventstore import chain

# The hashed headers only (ce-*, stratus-*, content-type); values are stripped below only when needed.
_HEADER_RE = re.compile(rb"\r\n((?i:ce-|stratus-|content-type)[^:\r\n]*):[ \t]*([^\r\n]*)")
_PREV = chain.CHAIN_PREV.lower().encode()
_HASH = chain.CHAIN_HASH.lower().encode()
_SUBJECT = b"ce-subject"
_ID = b"ce-id"
_MAGIC = b"stratus-chain-v1\n"
_PREFIXES = (b"ce-", b"stratus-", b"content-type")
_GENESIS = chain.GENESIS.encode()
_GLOBAL_GENESIS = chain.GLOBAL_GENESIS.encode()
# How often ``verify`` tells its caller how far it is (a progress bar's redraw is cheap, not free).
PROGRESS_EVERY = 1000
_sha256 = hashlib.sha256


@dataclass(frozen=True)
class Break:
    """The first place the log is not what was written."""

    position: int
    event_id: str
    reason: str


@dataclass
class Report:
    """What a verification of the hash chain found: how far it checked, the chain's value, the first break."""

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
    pairs.sort()
    canonical = b"".join([b"%s=%d:%s\n" % (name, len(value), value) for name, value in pairs])
    return hashlib.sha256(_MAGIC + canonical + b"body=%d:" % len(body) + body).hexdigest()


def _fast_pairs(block: bytes) -> tuple[list[tuple[bytes, bytes]], bytes] | None:
    """(hashed pairs without the chain hash, the stored chain hash) when every header line is
    ``Name: value`` (what NATS clients write); None when one is not (the exact parser decides).

    Faster than the exact parser (no regex); where the two could differ (extra whitespace, a name
    with a colon) the hash cannot match, and a mismatch is re-checked with the exact parser before
    it is reported: so a match here is a match there, and nothing is reported that is not broken."""
    pairs = []
    stored = b""
    for line in block.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b": ")
        if not sep:
            if line:
                return None
            continue
        name = name.lower()
        if name.startswith(_PREFIXES):
            if name == _HASH:
                stored = value
            else:
                pairs.append((name, value))
    return pairs, stored


def _exact_pairs(block: bytes) -> tuple[list[tuple[bytes, bytes]], bytes]:
    pairs = [(n.lower(), v.rstrip(b" \t")) for n, v in _HEADER_RE.findall(block)]
    stored = next((v for n, v in pairs if n == _HASH), b"")
    return [p for p in pairs if p[0] != _HASH], stored


Digest = tuple[int, bytes, bytes, bytes, bytes, bool]  # position, event id, aggregate, prev, hash, content ok


def digest(position: int, block: bytes, body: bytes) -> Digest:
    """What the chain checks need of one event: its id, aggregate, previous hash, stored hash, and
    whether its content matches that hash."""
    fast = _fast_pairs(block)
    pairs, stored = fast if fast is not None else _exact_pairs(block)
    named = dict(pairs)
    prev, aggregate, event_id = named.get(_PREV, b""), named.get(_SUBJECT, b""), named.get(_ID, b"")
    stored_hex = stored.decode(errors="replace")
    ok = bool(stored) and _event_hash(pairs, body) == stored_hex
    if not ok and stored and fast is not None:
        pairs, stored = _exact_pairs(block)
        ok = _event_hash(pairs, body) == stored_hex
    return position, event_id, aggregate, prev, stored, ok


_NO_HASH = "the event carries no chain hash"
_ALTERED = "the event's content does not match its hash: altered"
_ANCHOR_BROKEN = (
    "the global chain at position {position} differs from the anchor recorded earlier: "
    "events up to here were rewritten"
)


def _chain_broken(aggregate: bytes) -> str:
    return (
        "the chain of its aggregate is broken: the previous event of "
        f"{aggregate.decode(errors='replace')} was removed, inserted or altered"
    )


@dataclass
class BlockCheck:
    """A block checked on its own (in a worker): what the parent still has to check across blocks."""

    first: int | None  # the block's first position (None: no message of the stream in it)
    hashes: list[bytes]  # the stored hashes from ``first`` on, up to the block's own first break
    firsts: dict[
        bytes, tuple[int, bytes, bytes]
    ]  # aggregate -> (position, event id, prev) of its first event
    lasts: dict[bytes, bytes]  # aggregate -> the hash of its last event here
    broken: tuple[int, bytes, str] | None  # the block's own first break (gap, no hash, altered, chain)


def _check_block(path: str, prefix: bytes, upto: int) -> BlockCheck:
    """Hash one block and check what needs no other block: dense positions, content, and the links
    between events of the same aggregate within it (run in a worker process)."""
    digests = _digest_block(path, prefix, upto)
    if not digests:
        return BlockCheck(None, [], {}, {}, None)
    first = expected = digests[0][0]
    hashes: list[bytes] = []
    firsts: dict[bytes, tuple[int, bytes, bytes]] = {}
    lasts: dict[bytes, bytes] = {}
    broken: tuple[int, bytes, str] | None = None
    for position, event_id, aggregate, prev, stored, ok in digests:
        if position != expected:
            broken = (expected, b"", f"positions {expected}..{position - 1} are missing: events were removed")
        elif not stored:
            broken = (position, event_id, _NO_HASH)
        elif not ok:
            broken = (position, event_id, _ALTERED)
        elif aggregate in lasts and prev != lasts[aggregate]:
            broken = (position, event_id, _chain_broken(aggregate))
        if broken is not None:
            break
        if aggregate not in lasts:
            firsts[aggregate] = (position, event_id, prev)
        lasts[aggregate] = stored
        hashes.append(stored)
        expected += 1
    return BlockCheck(first, hashes, firsts, lasts, broken)


class _Checker:
    """The checks over positions in order, fed one digest at a time (from any reader)."""

    def __init__(self, last: int, anchors: Mapping[int, str]) -> None:
        self.last = last
        self.anchors = {position: value.encode() for position, value in anchors.items()}
        self.heads: dict[bytes, bytes] = {}
        self.global_hash = _GLOBAL_GENESIS
        self.expected = 1
        self.checked = 0
        self.anchors_checked: list[int] = []
        self.first_break: Break | None = None

    def step(self, d: Digest) -> bool:
        """Check one event; False (with ``first_break`` set) at the first one that breaks."""
        position, event_id, aggregate, prev, stored, ok = d
        if position != self.expected:
            return self._broken(
                self.expected,
                b"",
                f"positions {self.expected}..{position - 1} are missing: events were removed",
            )
        if not stored:
            return self._broken(position, event_id, _NO_HASH)
        if not ok:
            return self._broken(position, event_id, _ALTERED)
        if prev != self.heads.get(aggregate, _GENESIS):
            return self._broken(position, event_id, _chain_broken(aggregate))
        self.heads[aggregate] = stored
        self.global_hash = _sha256(b"%s:%d:%s" % (self.global_hash, position, stored)).hexdigest().encode()
        if position in self.anchors:
            if self.anchors[position] != self.global_hash:
                return self._broken(position, event_id, _ANCHOR_BROKEN.format(position=position))
            self.anchors_checked.append(position)
        self.checked += 1
        self.expected += 1
        return True

    def block(self, b: BlockCheck) -> bool:
        """Take one block checked in a worker: its own breaks, its aggregates' links to the blocks
        before it, then the global chain over its hashes; False at the first break, in position order."""
        if b.first is None:
            return True
        if b.first != self.expected:
            return self._broken(
                self.expected,
                b"",
                f"positions {self.expected}..{b.first - 1} are missing: events were removed",
            )
        found = b.broken
        for aggregate, (position, event_id, prev) in b.firsts.items():
            if prev != self.heads.get(aggregate, _GENESIS) and (found is None or position < found[0]):
                found = (position, event_id, _chain_broken(aggregate))
        end = b.first + len(b.hashes) if found is None else found[0]
        global_hash, anchors, position = self.global_hash, self.anchors, b.first
        for stored in b.hashes[: end - b.first]:
            global_hash = _sha256(b"%s:%d:%s" % (global_hash, position, stored)).hexdigest().encode()
            if position in anchors:
                if anchors[position] != global_hash:
                    self.global_hash, self.expected, self.checked = global_hash, position, position - 1
                    return self._broken(position, b"", _ANCHOR_BROKEN.format(position=position))
                self.anchors_checked.append(position)
            position += 1
        self.global_hash, self.expected, self.checked = global_hash, end, end - 1
        if found is not None:
            return self._broken(*found)
        self.heads.update(b.lasts)
        return True

    def _broken(self, position: int, event_id: bytes, reason: str) -> bool:
        self.first_break = Break(position, event_id.decode(errors="replace"), reason)
        return False

    def report(self, started: float) -> Report:
        first_break = self.first_break
        if first_break is None and self.expected <= self.last:
            first_break = Break(self.expected, "", f"positions {self.expected}..{self.last} are missing")
        if first_break is None:
            for position in sorted(self.anchors):
                if position > self.last:
                    first_break = Break(
                        self.last + 1,
                        "",
                        f"an anchor names position {position}, beyond the log's end {self.last}: "
                        "events were removed from the end",
                    )
                    break
        return Report(
            ok=first_break is None,
            checked=self.checked,
            last_position=self.expected - 1,
            global_hash=self.global_hash.decode(),
            seconds=time.perf_counter() - started,
            first_break=first_break,
            anchors_checked=self.anchors_checked,
        )


def verify(
    urls: tuple[str, ...] | list[str],
    stream: str,
    subject_prefix: str,
    *,
    upto: int | None = None,
    anchors: Mapping[int, str] | None = None,
    seed_file: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Report:
    """Check the stream from position 1 to ``upto`` (default: its last position when the check starts).

    ``anchors``: ``{position: global hash}`` values of earlier reports; each must still hold.
    ``seed_file``: the NKey seed to connect with (docs/trust.md). ``progress``: told
    ``(position, last)`` every ``PROGRESS_EVERY`` events.
    """
    started = time.perf_counter()
    with RawReader(urls, stream, seed_file=seed_file) as reader:
        last = reader.last_position(f"{subject_prefix}.>") if upto is None else upto
        checker = _Checker(last, dict(anchors or {}))
        at = 0
        for m in reader.messages(f"{subject_prefix}.>", 1, last):
            if not checker.step(digest(m.position, m.header_block, m.body)):
                break
            at = m.position
            if progress is not None and at % PROGRESS_EVERY == 0:
                progress(at, last)
        if progress is not None:
            progress(at, last)  # where it ended
    return checker.report(started)


# -- a copy of the store, no server in the path --------------------------------------------------
# What each raw header line means to the fast path: (what it is, its canonical line, its value).
_OTHER, _HASHED, _STORED_HASH, _PREV_HASH, _AGGREGATE, _EVENT_ID = range(6)
_KINDS = {_HASH: _STORED_HASH, _PREV: _PREV_HASH, _SUBJECT: _AGGREGATE, _ID: _EVENT_ID}
_LineMeaning = tuple[int, bytes, bytes]


def _meaning(line: bytes) -> _LineMeaning | None:
    """None when the line is not ``Name: value`` (the exact parser decides then)."""
    name, sep, value = line.partition(b": ")
    if not sep:
        return None
    name = name.lower()
    if not name.startswith(_PREFIXES):
        return _OTHER, b"", value
    return _KINDS.get(name, _HASHED), b"%s=%d:%s\n" % (name, len(value), value), value


def _digest_block(path: str, prefix: bytes, upto: int) -> list[Digest]:
    """One block's digests, in a worker process (the hashing is what costs). ``digest``'s work,
    inlined over the block's records for speed: header lines that repeat (the source, the actor,
    the content type...) are parsed once per block, and canonical lines are sorted as a whole (the
    same order as by name for any names Stratus writes). Any message this fast path does not vouch
    for goes through ``digest`` itself (tests hold the two equal)."""
    out: list[Digest] = []
    append, sha = out.append, _sha256
    seen: dict[bytes, _LineMeaning | None] = {}
    for position, subject, block, body in filestore.records(Path(path)):
        if position > upto or not subject.startswith(prefix):
            continue
        lines = []
        stored = prev = aggregate = event_id = b""
        for line in block.split(b"\r\n")[1:-2]:
            meaning = seen.get(line)
            if meaning is None:
                meaning = seen[line] = _meaning(line)
                if meaning is None:
                    break  # not "Name: value": digest() decides
            kind, canonical, value = meaning
            if kind == _OTHER:
                continue
            if kind == _STORED_HASH:
                stored = value
                continue
            lines.append(canonical)
            if kind == _PREV_HASH:
                prev = value
            elif kind == _AGGREGATE:
                aggregate = value
            elif kind == _EVENT_ID:
                event_id = value
        else:
            if stored:
                lines.sort()
                computed = sha(_MAGIC + b"".join(lines) + b"body=%d:" % len(body) + body).hexdigest().encode()
                if computed == stored:
                    append((position, event_id, aggregate, prev, stored, True))
                    continue
        append(digest(position, block, body))
    return out


def verify_store(
    store: Path,
    stream: str,
    subject_prefix: str,
    *,
    upto: int | None = None,
    anchors: Mapping[int, str] | None = None,
    processes: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Report:
    """The same checks over the stream's files in a nats-server store directory (a backup, a stopped
    server's store, or a copy of a running one's: a record the server was still writing ends it).

    Blocks are hashed and checked on their own in ``processes`` worker processes (default: one per
    CPU); the links between blocks and the global chain are checked here, in position order.
    ``upto`` defaults to the last position stored. ``progress``: told ``(blocks checked, blocks)``."""
    started = time.perf_counter()
    blocks = [str(b) for b in filestore.blocks(filestore.stream_dir(store, stream))]
    limit = upto if upto is not None else (1 << 62)
    prefix = f"{subject_prefix}.".encode()
    checker = _Checker(upto or 0, dict(anchors or {}))
    workers = max(1, processes or os.cpu_count() or 1)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        checked = pool.map(_check_block, blocks, itertools.repeat(prefix), itertools.repeat(limit))
        for done, block in enumerate(checked, 1):
            if not checker.block(block):
                pool.shutdown(wait=False, cancel_futures=True)
                break
            if progress is not None:
                progress(done, len(blocks))
    if upto is None:
        checker.last = checker.expected - 1  # the end is what is stored
    return checker.report(started)
