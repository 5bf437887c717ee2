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
  not covered by the hash);
- unsigned: trusted only before the registry's cut-over position (``signed_from``): a log written
  before signing existed; at or after it, refused.

The projector quarantines a refused event (it is never applied); ``stratus audit verify`` reports it.
"""

from __future__ import annotations

import base64
import binascii
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

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
        if subject is None or not any(matches(p, subject) for p in identity.appends):
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
