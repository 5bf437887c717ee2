"""Who appended each event, checked (``stratus audit verify`` with a trust registry).

A pass beside the hash chain's (stratus.audit.verify): for every event in position order, the
verdict of ``stratus.eventstore.signing.Verifier`` (signed by an identity that may append it,
unsigned before the registry's cut-over, or refused), counted per identity, with the first refused
event named. The events are checked in order (``signing.InOrder``), as the projector checks them: a
host's key is refused on the events of a server that is not on its host at that point of the log.
The chain's pass proves the log unaltered; this one proves who wrote it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from stratus.audit import filestore
from stratus.audit.rawreader import RawReader
from stratus.eventstore import chain
from stratus.eventstore.signing import InOrder, Verdict, Verifier


@dataclass(frozen=True)
class Refused:
    """The first event whose signer may not have appended it."""

    position: int
    event_id: str
    reason: str


@dataclass
class SignatureReport:
    """What the check of the signatures found."""

    checked: int = 0
    signed: int = 0
    unsigned: int = 0  # before the cut-over: written before signing
    refused: int = 0
    signed_from: int | None = None
    first_refused: Refused | None = None
    by_identity: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.refused == 0

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
            "seconds": round(self.seconds, 3),
        }


def check(messages: Iterable[tuple[int, bytes, bytes]], verifier: Verifier) -> SignatureReport:
    """The verdicts on ``(position, raw header block, body)`` messages."""
    started = time.perf_counter()
    report = SignatureReport(signed_from=verifier.registry.signed_from)
    in_order = InOrder(verifier)
    for position, block, body in messages:
        headers = {
            n.decode(errors="replace"): v.decode(errors="replace") for n, v in chain.parse_header_block(block)
        }
        c = in_order.check(headers, body, position)
        report.checked += 1
        if c.verdict is Verdict.SIGNED:
            report.signed += 1
            report.by_identity[c.identity.name if c.identity else "?"] += 1
        elif c.verdict is Verdict.UNSIGNED:
            report.unsigned += 1
        else:
            report.refused += 1
            if report.first_refused is None:
                report.first_refused = Refused(position, headers.get("ce-id", ""), c.reason)
    report.seconds = time.perf_counter() - started
    return report


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
