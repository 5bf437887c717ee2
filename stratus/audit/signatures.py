"""Who appended each event, checked (``stratus audit verify`` with a trust registry).

A pass beside the hash chain's (stratus.audit.verify): for every event in position order, the
verdict of ``stratus.eventstore.signing.Verifier`` (signed by an identity that may append it,
unsigned before the registry's cut-over, or refused), counted per identity, with the first refused
event named. The events are checked in order (``signing.InOrder``), as the projector checks them: a
host's key is refused on the events of a server that is not on its host at that point of the log.
The chain's pass proves the log unaltered; this one proves who wrote it.

A refused event the operator excluded (``stratus trust exclude``: an ``EventExcluded`` an ``admin``
identity signed, after it in the log) is reported as excluded, with the exclusion, and is no
failure: loads fold it as nothing. An exclusion that excludes nothing is a failure of its own: one
no ``admin`` identity signed, or one naming a position that holds no refused event (or one excluded
already, or its aggregate's first event, which no load folds as excluded).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from stratus.audit import filestore
from stratus.audit.rawreader import RawReader
from stratus.eventstore import chain
from stratus.eventstore.envelope import CE_ORIGINATORVERSION
from stratus.eventstore.signing import Check, Exclusion, InOrder, Verdict, Verifier, exclusion


@dataclass(frozen=True)
class Refused:
    """An event whose signer may not have appended it (or an exclusion that excludes nothing)."""

    position: int
    event_id: str
    reason: str


@dataclass(frozen=True)
class ExcludedEvent:
    """A refused event the operator excluded: it stays in the log and in its chain, and counts as
    nothing (``excluded_at``: the exclusion's position, ``excluded_by``: the identity that signed it,
    ``because``: the operator's reason)."""

    position: int
    event_id: str
    reason: str
    excluded_at: int
    excluded_by: str
    because: str


@dataclass
class SignatureReport:
    """What the check of the signatures found."""

    checked: int = 0
    signed: int = 0
    unsigned: int = 0  # before the cut-over: written before signing
    refused: int = 0  # refused and not excluded
    signed_from: int | None = None
    first_refused: Refused | None = None
    by_identity: Counter[str] = field(default_factory=Counter)
    excluded: list[ExcludedEvent] = field(default_factory=list)
    void_exclusions: list[Refused] = field(default_factory=list)  # exclusions that exclude nothing
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.refused == 0 and not self.void_exclusions

    def to_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "checked": self.checked,
            "signed": self.signed,
            "unsigned": self.unsigned,
            "refused": self.refused,
            "signed_from": self.signed_from,
            "by_identity": dict(sorted(self.by_identity.items())),
            "first_refused": None if self.first_refused is None else vars(self.first_refused),
            "excluded": [vars(e) for e in self.excluded],
            "void_exclusions": [vars(v) for v in self.void_exclusions],
            "seconds": round(self.seconds, 3),
        }


def check(messages: Iterable[tuple[int, bytes, bytes]], verifier: Verifier) -> SignatureReport:
    """The verdicts on ``(position, raw header block, body)`` messages."""
    started = time.perf_counter()
    report = SignatureReport(signed_from=verifier.registry.signed_from)
    in_order = InOrder(verifier)
    refused: dict[int, tuple[Refused, bool]] = {}  # position -> refusal, whether its aggregate's first
    excluded: dict[int, int] = {}  # the positions excluded -> the exclusion's position
    for position, block, body in messages:
        headers = {
            n.decode(errors="replace"): v.decode(errors="replace") for n, v in chain.parse_header_block(block)
        }
        c = in_order.check(headers, body, position)
        report.checked += 1
        event_id = headers.get("ce-id", "")
        if c.verdict is Verdict.SIGNED:
            report.signed += 1
            report.by_identity[c.identity.name if c.identity else "?"] += 1
        elif c.verdict is Verdict.UNSIGNED:
            report.unsigned += 1
        else:
            refused[position] = (
                Refused(position, event_id, c.reason),
                headers.get(CE_ORIGINATORVERSION) == "1",
            )
        named = exclusion(headers, body)
        if named is None:
            continue
        void = _void(c, named, refused, excluded)
        if void:
            report.void_exclusions.append(Refused(position, event_id, f"{void}: it excludes nothing"))
            continue
        refusal, _ = refused.pop(named.position)
        excluded[named.position] = position
        report.excluded.append(
            ExcludedEvent(refusal.position, refusal.event_id, refusal.reason, position,
                          c.identity.name if c.identity else "?", named.reason)
        )  # fmt: skip
    report.refused = len(refused)
    report.first_refused = refused[min(refused)][0] if refused else None
    report.seconds = time.perf_counter() - started
    return report


def _void(
    c: Check, named: Exclusion, refused: Mapping[int, tuple[Refused, bool]], excluded: Mapping[int, int]
) -> str:
    """Why the exclusion ``named``, whose verdict is ``c``, excludes nothing ("": it excludes the
    refused event at its position), as a load has it (``signing.exclusions``, ``LoadCheck``)."""
    if c.verdict is Verdict.REFUSED:
        return f"the exclusion of position {named.position} is itself refused ({c.reason})"
    if c.identity is None or c.identity.role != "admin":
        who = f"{c.identity.name} ({c.identity.role})" if c.identity else "no one"
        return f"the exclusion of position {named.position} is signed by {who}, not by an admin identity"
    if named.position in excluded:
        return f"position {named.position} is excluded already, at position {excluded[named.position]}"
    if named.position not in refused:
        return f"position {named.position} holds no refused event before the exclusion"
    refusal, first = refused[named.position]
    if first:
        return f"position {named.position} is its aggregate's first event, which no load folds as excluded"
    if named.event_id != refusal.event_id:
        return f"it names event {named.event_id}, but position {named.position} holds {refusal.event_id}"
    return ""


def verify(
    urls: tuple[str, ...] | list[str],
    stream: str,
    subject_prefix: str,
    verifier: Verifier,
    *,
    upto: int | None = None,
    seed_file: Path | None = None,
) -> SignatureReport:
    """Check every event's signer on the stream, positions 1 to ``upto`` (default: the last)."""
    with RawReader(urls, stream, seed_file=seed_file) as reader:
        last = reader.last_position(f"{subject_prefix}.>") if upto is None else upto
        messages = reader.messages(f"{subject_prefix}.>", 1, last)
        return check(((m.position, m.header_block, m.body) for m in messages), verifier)


def verify_store(
    store: Path, stream: str, subject_prefix: str, verifier: Verifier, *, upto: int | None = None
) -> SignatureReport:
    """The same check over the stream's files in a nats-server store directory."""
    prefix = f"{subject_prefix}.".encode()
    limit = upto if upto is not None else (1 << 62)

    def stored() -> Iterable[tuple[int, bytes, bytes]]:
        for block in filestore.blocks(filestore.stream_dir(store, stream)):
            for position, subject, header, body in filestore.records(block):
                if position <= limit and subject.startswith(prefix):
                    yield position, header, body

    return check(stored(), verifier)
