"""Every event signed by the identity that appended it, and the check of who may append what.

The recorder stamps each event with its chain hash (stratus.eventstore.chain: SHA-256 over the
event's canonical bytes, which include the hash of the aggregate's previous event); the part's
``Signer`` then adds two headers: ``Trust-Key``, its public NKey (the key id), and
``Trust-Signature``, Ed25519 over ``stratus-signature-v1\\n`` + that chain hash (base64url, no
padding). Signing the chain hash signs every hashed header and the body; the two headers are not
themselves hashed (a signature cannot be inside what it signs), so the chain verifies the same
with or without them.

``Verifier`` decides, for one stored event, whether it is trusted:

- signed: the key is in the registry, the content matches the chain hash, the signature verifies,
  and the key's identity may append on the event's subject (``Identity.appends``, matched against
  the subject rebuilt from the hashed ``ce-topic`` and ``ce-subject``: the stored subject itself is
  not covered by the hash) and it is none of its ``refuses``;
- unsigned: trusted only before the registry's cut-over position (``signed_from``): a log written
  before signing existed; at or after it, refused.

A host's key is held to more than subjects: an instance event (``instance.<server>.<type>``) signed
by a ``host`` identity is trusted only if that server is on one of the identity's hosts at that point
of the log, or a move under way names one of them as its source or destination. ``ServerHosts`` folds
where each server is from the events that place it, and ``InOrder`` checks a log's events in position
order with that fold: the projector, a rebuild and ``stratus audit verify`` all use it, so that they
refuse exactly the same events.

The projector quarantines a refused event (it is never applied); ``stratus audit verify`` reports it.
"""

from __future__ import annotations

import base64
import binascii
import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from stratus.eventstore import chain
from stratus.eventstore.subjects import encode_token, kind_and_type
from stratus.trust.nkeys import InvalidKey, KeyPair, decode_public, verify
from stratus.trust.registry import Identity, Registry

SIGNER = "Trust-Key"
SIGNATURE = "Trust-Signature"
_SIGNER = SIGNER.lower()
_SIGNATURE = SIGNATURE.lower()
_HASH = chain.CHAIN_HASH.lower()
_CONTEXT = b"stratus-signature-v1\n"


def signed_bytes(chain_hash: str) -> bytes:
    """What a signature is made over: the event's chain hash, in a context of its own."""
    return _CONTEXT + chain_hash.encode()


class Signer:
    """One part's signing key: ``sign`` adds the signature headers to an event's headers."""

    def __init__(self, key: KeyPair) -> None:
        self._key = key
        self.key_id = key.public_key

    @classmethod
    def from_seed_file(cls, path: Path) -> Signer:
        return cls(KeyPair.from_seed(path.read_text().strip()))

    def sign(self, headers: dict[str, str]) -> None:
        """Sign the event whose headers (its ``Stratus-Chain-Hash`` set) are ``headers``."""
        signature = self._key.sign(signed_bytes(headers[chain.CHAIN_HASH]))
        headers[SIGNER] = self.key_id
        headers[SIGNATURE] = base64.urlsafe_b64encode(signature).decode().rstrip("=")


class UntrustedEvent(Exception):
    """An event whose signer may not have appended it (or that no one signed after the cut-over)."""


class Verdict(enum.Enum):
    """What the check of one event found."""

    SIGNED = "signed"  # signed by an identity that may append it
    UNSIGNED = "unsigned"  # no signature, before the cut-over: a log from before signing
    REFUSED = "refused"


@dataclass(frozen=True)
class Check:
    """The verdict on one event, the identity that signed it, and why it is refused."""

    verdict: Verdict
    identity: Identity | None = None
    reason: str = ""


def matches(pattern: str, subject: str) -> bool:
    """Whether NATS subject ``subject`` matches ``pattern`` (``*``: one token, ``>``: the rest)."""
    want, have = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or (token != "*" and token != have[i]):
            return False
    return len(want) == len(have)


class Verifier:
    """Checks stored events against a deployment's registry of identities."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._keys: dict[str, Ed25519PublicKey] = {}

    @classmethod
    def load(cls, path: Path | None) -> Verifier | None:
        """The verifier of the registry at ``path`` (``Settings.trust_registry``; None: no checks)."""
        return cls(Registry.load(path)) if path is not None else None

    def check(self, headers: Mapping[str, str], body: bytes, position: int) -> Check:
        """The verdict on the event stored at ``position`` with ``headers`` (names in any case)."""
        h = {k.lower(): v for k, v in headers.items()}
        key_id, signature = h.get(_SIGNER, ""), h.get(_SIGNATURE, "")
        if not key_id and not signature:
            cut = self.registry.signed_from
            if cut is None or position < cut:
                return Check(Verdict.UNSIGNED)
            return Check(Verdict.REFUSED, reason=f"unsigned, at or after the signing cut-over ({cut})")
        identity = self.registry.by_key(key_id)
        if identity is None:
            return Check(
                Verdict.REFUSED, reason=f"signed by a key the registry does not know ({key_id[:12]}...)"
            )
        stored = h.get(_HASH, "")
        if not stored or chain.event_hash(h, body) != stored:
            return Check(Verdict.REFUSED, identity, "its content does not match its chain hash")
        if not self._verifies(key_id, signature, stored):
            return Check(Verdict.REFUSED, identity, f"the signature of {identity.name} does not verify")
        subject = _relative_subject(h)
        if (
            subject is None
            or not any(matches(p, subject) for p in identity.appends)
            or any(matches(p, subject) for p in identity.refuses)
        ):
            return Check(
                Verdict.REFUSED, identity, f"{identity.name} ({identity.role}) may not append {subject}"
            )
        return Check(Verdict.SIGNED, identity)

    def refusal(self, headers: Mapping[str, str], body: bytes, position: int) -> UntrustedEvent | None:
        """Why the event may not be applied (an ``UntrustedEvent`` to quarantine), or None."""
        c = self.check(headers, body, position)
        return UntrustedEvent(c.reason) if c.verdict is Verdict.REFUSED else None

    def _verifies(self, key_id: str, signature: str, chain_hash: str) -> bool:
        key = self._keys.get(key_id)
        if key is None:
            try:
                key = self._keys[key_id] = decode_public(key_id)
            except InvalidKey:
                return False
        try:
            raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
        except (binascii.Error, ValueError):
            return False
        return verify(key, raw, signed_bytes(chain_hash))


def _relative_subject(h: Mapping[str, str]) -> str | None:
    """``<kind>.<originator>.<type>``, rebuilt from the hashed headers (what the writer published on)."""
    topic, originator = h.get("ce-topic"), h.get("ce-subject")
    if topic is None or originator is None:
        return None
    kind, type_ = kind_and_type(topic)
    return f"{kind}.{encode_token(originator)}.{type_}"


# The instance events (subject type tokens) that change which hosts may append a server's events,
# and the payload fields naming those hosts (commands.instance): where the scheduler put it, where
# a move takes it, where a move's end leaves it.
PLACING = (
    "scheduled",
    "offloaded",
    "migrationscheduled",
    "migrationfinished",
    "migrationfailed",
    "revertedondest",
    "resizeconfirmed",
    "resizereverted",
)
INSTANCE_KIND = "instance"


@dataclass(frozen=True)
class _Where:
    host: str | None = None  # the host the server is on (None: on none, or never placed)
    moving: tuple[str, ...] = ()  # the source and destination of a move under way


class ServerHosts:
    """Where each server is at the current point of the log, folded from the events that place it
    (``PLACING``), to tell a host's own servers from others'. Pure: no I/O, never raises."""

    def __init__(self) -> None:
        self._at: dict[str, _Where] = {}

    def permits(self, hosts: Iterable[str], server_id: str) -> bool:
        """Whether a host of ``hosts`` may append events of ``server_id`` now."""
        where = self._at.get(server_id)
        if where is None:
            return False
        return any(h == where.host or h in where.moving for h in hosts)

    def describe(self, server_id: str) -> str:
        where = self._at.get(server_id)
        if where is None or (where.host is None and not where.moving):
            return "it is on no host"
        moving = f" (moving between {' and '.join(where.moving)})" if where.moving else ""
        return f"it is on {where.host}{moving}"

    def observe(self, type_: str, server_id: str, body: bytes) -> None:
        """Fold one trusted instance event of type token ``type_`` (ignored unless ``PLACING``)."""
        if type_ not in PLACING:
            return
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            return  # the projector quarantines it as undecodable; it places nothing
        if not isinstance(payload, dict):
            return
        where = self._at.get(server_id, _Where())

        def named(field: str) -> str | None:
            value = payload.get(field)
            return value if isinstance(value, str) else None

        if type_ == "scheduled":
            where = _Where(named("host"), ())
        elif type_ == "offloaded":
            where = _Where(None, ())
        elif type_ == "migrationscheduled":
            where = _Where(where.host, tuple(h for h in (named("source"), named("dest")) if h))
        elif type_ == "migrationfinished":
            where = _Where(named("dest"), where.moving)
        elif type_ == "revertedondest":
            where = _Where(named("source"), where.moving)
        elif type_ == "migrationfailed":
            where = _Where(named("source"), ())
        else:  # resizeconfirmed, resizereverted: the move is over, the server stays where it is
            where = _Where(where.host, ())
        self._at[server_id] = where


# (position, headers, body) of the stored events between two positions that ``InOrder`` has not
# seen: the projector reads them from the log when it starts after position 1 (only the
# ``PLACING`` subjects are needed).
History = Callable[[int, int], Iterable[tuple[int, Mapping[str, str], bytes]]]


class InOrder:
    """``Verifier.check`` over a log read in position order, with each server's hosts folded as it
    goes (``ServerHosts``): an instance event a host's key signed is refused unless the server is
    on that host, or a move under way names it. ``history(after, upto)``: the events of a gap
    (positions after ``after``, up to ``upto``) when a check skips ahead, e.g. a projector that
    starts from its tracking position; None: gaps hold nothing that places a server."""

    def __init__(self, verifier: Verifier, history: History | None = None) -> None:
        self.verifier = verifier
        self.registry = verifier.registry
        self.servers = ServerHosts()
        self.position = 0  # the last position folded
        self._history = history
        self._refused: dict[int, Check] = {}  # host refusals already made (a batch read again)

    def check(self, headers: Mapping[str, str], body: bytes, position: int) -> Check:
        """The verdict on the event at ``position``; events are expected in increasing positions
        (one already checked is answered as it was)."""
        if position <= self.position:
            return self._refused.get(position) or self.verifier.check(headers, body, position)
        if position > self.position + 1 and self._history is not None:
            for at, h, b in self._history(self.position, position - 1):
                if self.position < at < position:
                    self._step(h, b, at)
        return self._step(headers, body, position)

    def refusal(self, headers: Mapping[str, str], body: bytes, position: int) -> UntrustedEvent | None:
        c = self.check(headers, body, position)
        return UntrustedEvent(c.reason) if c.verdict is Verdict.REFUSED else None

    def _placed(self, identity: Identity, server: str) -> bool:
        return self.servers.permits(identity.hosts, server)

    def _step(self, headers: Mapping[str, str], body: bytes, position: int) -> Check:
        self.position = position
        c = self.verifier.check(headers, body, position)
        if c.verdict is Verdict.REFUSED:
            return c
        h = {k.lower(): v for k, v in headers.items()}
        topic, server = h.get("ce-topic"), h.get("ce-subject")
        if topic is None or server is None:
            return c
        kind, type_ = kind_and_type(topic)
        if kind != INSTANCE_KIND:
            return c
        identity = c.identity
        if identity is not None and identity.role == "host" and not self._placed(identity, server):
            refused = Check(
                Verdict.REFUSED,
                identity,
                f"{identity.name} (host) may not append {type_} of server {server}: "
                f"{self.servers.describe(server)}",
            )
            self._refused[position] = refused
            return refused
        self.servers.observe(type_, server, body)
        return c
