"""Ed25519 key pairs in NATS's NKey encoding, on ``cryptography`` (no ``nkeys`` package needed).

A user's NKey seed (``SU...``) is what a part connects to NATS with (the server sends a nonce, the
client signs it) and, in Stratus, also the key that signs every event the part appends; its public
key (``U...``) is the user named in the server's configuration and the key id on the event.

The encoding (github.com/nats-io/nkeys): base32 without padding of a prefix, the 32 raw key bytes
and a CRC-16/XMODEM of both, little-endian. A seed's prefix is two bytes carrying the seed marker
and the key's type (user here).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

PREFIX_SEED = 18 << 3  # "S"
PREFIX_USER = 20 << 3  # "U"


class InvalidKey(ValueError):
    """Not a well-formed NKey (bad base32, wrong prefix or checksum)."""


def _crc16(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def _encode(raw: bytes) -> str:
    checked = raw + _crc16(raw).to_bytes(2, "little")
    return base64.b32encode(checked).decode().rstrip("=")


def _decode(text: str) -> bytes:
    padded = text.strip() + "=" * (-len(text.strip()) % 8)
    try:
        checked = base64.b32decode(padded)
    except (binascii.Error, ValueError) as e:
        raise InvalidKey("not base32") from e
    if len(checked) < 3:
        raise InvalidKey("too short")
    raw, crc = checked[:-2], int.from_bytes(checked[-2:], "little")
    if _crc16(raw) != crc:
        raise InvalidKey("checksum mismatch")
    return raw


def encode_public(raw: bytes) -> str:
    """A user's public key (``U...``) from its 32 raw bytes."""
    return _encode(bytes([PREFIX_USER]) + raw)


def decode_public(public_key: str) -> Ed25519PublicKey:
    """The Ed25519 public key a ``U...`` NKey names."""
    raw = _decode(public_key)
    if raw[0] != PREFIX_USER or len(raw) != 33:
        raise InvalidKey("not a user public key")
    return Ed25519PublicKey.from_public_bytes(raw[1:])


@dataclass(frozen=True)
class KeyPair:
    """A user NKey: ``seed`` (secret, ``SU...``) and ``public_key`` (``U...``)."""

    seed: str
    public_key: str
    _private: Ed25519PrivateKey

    @classmethod
    def generate(cls) -> KeyPair:
        return cls.from_private(Ed25519PrivateKey.generate())

    @classmethod
    def from_private(cls, private: Ed25519PrivateKey) -> KeyPair:
        raw_seed = private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        head = bytes([PREFIX_SEED | (PREFIX_USER >> 5), (PREFIX_USER & 31) << 3])
        raw_public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return cls(_encode(head + raw_seed), encode_public(raw_public), private)

    @classmethod
    def from_seed(cls, seed: str) -> KeyPair:
        raw = _decode(seed)
        if len(raw) != 34 or raw[0] & 0xF8 != PREFIX_SEED:
            raise InvalidKey("not an NKey seed")
        prefix = ((raw[0] & 7) << 5) | ((raw[1] & 0xF8) >> 3)
        if prefix != PREFIX_USER:
            raise InvalidKey("not a user seed")
        return cls.from_private(Ed25519PrivateKey.from_private_bytes(raw[2:]))

    def sign(self, data: bytes) -> bytes:
        return self._private.sign(data)


def verify(public_key: Ed25519PublicKey, signature: bytes, data: bytes) -> bool:
    """Whether ``signature`` is ``public_key``'s over ``data``."""
    try:
        public_key.verify(signature, data)
    except InvalidSignature:
        return False
    return True
