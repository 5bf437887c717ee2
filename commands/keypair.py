"""KeyPair: a user's named SSH public key, injected into the servers that name it.

Key pairs belong to a user (not a project), as in Nova; the aggregate id is derived from the user
and the name, so a name is unique per user by construction. Only the public key is ever recorded:
a private key Stratus generates is returned once and forgotten.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from uuid import NAMESPACE_URL, UUID, uuid5

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from eventsourcing.domain import Aggregate, event

from commands.errors import AlreadyExists, InvalidInput, NotFound

_NS = uuid5(NAMESPACE_URL, "urn:stratus:keypair")
SSH = "ssh"


def keypair_aggregate_id(user_id: str, name: str) -> UUID:
    return uuid5(_NS, f"{user_id}\x00{name}")


def fingerprint(public_key: str) -> str:
    """Nova's fingerprint: the MD5 of the key's blob (the base64 part), as colon-separated hex."""
    parts = public_key.split()
    blob = base64.b64decode(parts[1], validate=True)
    digest = hashlib.md5(blob, usedforsecurity=False).hexdigest()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


def checked_public_key(public_key: str) -> str:
    """The key, stripped, if it is an OpenSSH public key; Nova's 400 message otherwise."""
    text = public_key.strip()
    try:
        parts = text.split()
        if len(parts) < 2:
            raise ValueError("not '<type> <base64> [comment]'")
        base64.b64decode(parts[1], validate=True)
        serialization.load_ssh_public_key(text.encode())
    except (ValueError, binascii.Error, UnsupportedAlgorithm) as e:
        raise InvalidInput("Keypair data is invalid: failed to generate fingerprint") from e
    return text


class KeyPair(Aggregate):
    @event("Created")
    def __init__(self, name: str, user_id: str, public_key: str, fingerprint: str, type: str) -> None:
        self.name = name
        self.user_id = user_id
        self.public_key = public_key
        self.fingerprint = fingerprint
        self.type = type
        self.deleted = False

    @classmethod
    def create(cls, user_id: str, name: str, public_key: str) -> KeyPair:
        key = checked_public_key(public_key)
        return cls._create(  # type: ignore[attr-defined, no-any-return]
            cls.Created,  # type: ignore[attr-defined]
            id=keypair_aggregate_id(user_id, name),
            name=name,
            user_id=user_id,
            public_key=key,
            fingerprint=fingerprint(key),
            type=SSH,
        )

    def recreate(self, public_key: str) -> None:
        """The name is taken again after it was deleted."""
        if not self.deleted:
            raise AlreadyExists(f"Key pair '{self.name}' already exists.")
        key = checked_public_key(public_key)
        self._recreated(key, fingerprint(key), SSH)

    @event("Recreated")
    def _recreated(self, public_key: str, fingerprint: str, type: str) -> None:
        self.public_key = public_key
        self.fingerprint = fingerprint
        self.type = type
        self.deleted = False

    def ensure_exists(self) -> None:
        if self.deleted:
            raise NotFound(f"Keypair {self.name} not found for user {self.user_id}")

    def delete(self) -> None:
        self.ensure_exists()
        self._deleted()

    @event("Deleted")
    def _deleted(self) -> None:
        self.deleted = True
