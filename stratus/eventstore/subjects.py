"""Subject layout: where each event lives on the stream, so that NATS can filter without decoding.

``<prefix>.<kind>.<originator>.<type>``:

- an eventsourcing topic ``pkg.mod:Outer.Inner`` (an aggregate's nested event class) gives
  ``kind = outer`` and ``type = inner`` (lowercased, then encoded);
- any other topic gives ``kind = _`` and ``type = <the whole topic, encoded>``;
- ``originator`` is the aggregate id, encoded.

Encoding keeps ``[A-Za-z0-9-]`` as is and writes every other UTF-8 byte as ``_`` plus two lowercase
hex digits (``.`` → ``_2e``, ``:`` → ``_3a``, ``_`` → ``_5f``); the empty string is ``_``. So every
token is a valid subject token, decoding is exact, and a literal ``_`` token (the fallback kind)
cannot collide with an encoded name.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from uuid import UUID

_LITERAL = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
_PLAIN = re.compile(r"[A-Za-z0-9-]+")
_NESTED = re.compile(r"^[^:]+:([^.:]+)\.([^.:]+)$")
FALLBACK_KIND = "_"


def encode_token(text: str) -> str:
    """``text`` as one subject token made only of ``[A-Za-z0-9_-]`` (reversible)."""
    if not text:
        return "_"
    if _PLAIN.fullmatch(text):
        return text
    out: list[str] = []
    for byte in text.encode():
        out.append(chr(byte) if byte in _LITERAL else f"_{byte:02x}")
    return "".join(out)


def decode_token(token: str) -> str:
    """The inverse of ``encode_token``."""
    if token == "_":
        return ""
    if "_" not in token:
        return token
    raw = bytearray()
    i = 0
    while i < len(token):
        c = token[i]
        if c == "_":
            raw.append(int(token[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.extend(c.encode())
            i += 1
    return raw.decode()


@functools.lru_cache(maxsize=1024)  # each append asks twice per event, of a few dozen topics
def kind_and_type(topic: str) -> tuple[str, str]:
    """The (kind, type) subject tokens of an eventsourcing topic."""
    m = _NESTED.match(topic)
    if m is not None:
        return encode_token(m.group(1).lower()), encode_token(m.group(2).lower())
    return FALLBACK_KIND, encode_token(topic)


@dataclass(frozen=True)
class SubjectLayout:
    """Subjects and filters under one prefix (``Settings.subject_prefix``)."""

    prefix: str

    @property
    def all(self) -> str:
        return f"{self.prefix}.>"

    def subject(self, originator_id: UUID | str, topic: str) -> str:
        kind, type_ = kind_and_type(topic)
        return f"{self.prefix}.{kind}.{encode_token(str(originator_id))}.{type_}"

    def aggregate_filter(self, originator_id: UUID | str) -> str:
        """Every event of one aggregate, whatever its kind: the aggregate's consistency boundary."""
        return f"{self.prefix}.*.{encode_token(str(originator_id))}.*"

    def topic_filter(self, topic: str) -> str:
        """Every event that may have this topic (nested topics are lowercased: check the header)."""
        kind, type_ = kind_and_type(topic)
        return f"{self.prefix}.{kind}.*.{type_}"

    def kind_filter(self, kind: str) -> str:
        """Every event of one kind of aggregate, e.g. ``kind_filter("instance")``."""
        return f"{self.prefix}.{encode_token(kind.lower())}.>"
