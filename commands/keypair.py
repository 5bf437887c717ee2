"""KeyPair: a user's named SSH public key, injected into the servers that name it, or (Nova's
``x509`` type, microversion 2.2) an X.509 certificate, which Nova kept for Windows guests' WinRM.

Key pairs belong to a user (not a project), as in Nova; the aggregate id is derived from the user
and the name, so a name is unique per user by construction. Only the public key is ever recorded:
a private key Stratus generates is returned once and forgotten.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from eventsourcing.domain import Aggregate, event

from commands.errors import AlreadyExists, InvalidInput, NotFound

_NS = uuid5(NAMESPACE_URL, "urn:stratus:keypair")
SSH = "ssh"
X509 = "x509"


def keypair_aggregate_id(user_id: str, name: str) -> UUID:
    return uuid5(_NS, f"{user_id}\x00{name}")


def fingerprint(public_key: str) -> str:
    """Nova's fingerprint: the MD5 of the key's blob (the base64 part), as colon-separated hex."""
    parts = public_key.split()
    blob = base64.b64decode(parts[1], validate=True)
    digest = hashlib.md5(blob, usedforsecurity=False).hexdigest()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


def x509_fingerprint(certificate: str) -> str:
    """Nova's fingerprint of a certificate: its SHA-1, as colon-separated hex."""
    digest = _certificate(certificate).fingerprint(hashes.SHA1()).hex()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


def _certificate(text: str) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(text.encode())
    except (ValueError, TypeError) as e:
        raise InvalidInput(
            f"Keypair data is invalid: failed to generate X509 fingerprint. Error message: {e}"
        ) from e


def checked_key(public_key: str, key_type: str) -> tuple[str, str]:
    """(the key stripped, its fingerprint) if it is a key of ``key_type``; Nova's 400 otherwise."""
    if key_type == X509:
        text = public_key.strip()
        return text, x509_fingerprint(text)
    key = checked_public_key(public_key)
    return key, fingerprint(key)


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


def _all_ssh(state: dict[str, Any]) -> None:
    """Version 2 allows ``x509``; version 1's key pairs are all ``ssh``, as their ``type`` says."""


class KeyPair(Aggregate):
    """A user's named SSH public key, injected into the servers that name it."""

    class Created(Aggregate.Created):
        """A user's key pair was created (imported, or generated: only its public key is recorded). Version
        2: the key pair may be an X.509 certificate (type x509, microversion 2.2); version 1 events are
        all ssh."""

        name: str
        user_id: str
        public_key: str
        fingerprint: str
        type: str
        class_version = 2
        upcast_v1_v2 = staticmethod(_all_ssh)

    class Recreated(Aggregate.Event):
        """A deleted key pair's name was taken again, with this key. Version 2: the key pair may be an
        X.509 certificate (type x509, microversion 2.2); version 1 events are all ssh."""

        public_key: str
        fingerprint: str
        type: str
        class_version = 2
        upcast_v1_v2 = staticmethod(_all_ssh)

    @event(Created)
    def __init__(self, name: str, user_id: str, public_key: str, fingerprint: str, type: str) -> None:
        self.name = name
        self.user_id = user_id
        self.public_key = public_key
        self.fingerprint = fingerprint
        self.type = type
        self.deleted = False

    @classmethod
    def create(cls, user_id: str, name: str, public_key: str, key_type: str = SSH) -> KeyPair:
        key, print_ = checked_key(public_key, key_type)
        return cls._create(  # type: ignore[no-any-return]
            cls.Created,
            id=keypair_aggregate_id(user_id, name),
            name=name,
            user_id=user_id,
            public_key=key,
            fingerprint=print_,
            type=key_type,
        )

    def recreate(self, public_key: str, key_type: str = SSH) -> None:
        """The name is taken again after it was deleted."""
        if not self.deleted:
            raise AlreadyExists(f"Key pair '{self.name}' already exists.")
        key, print_ = checked_key(public_key, key_type)
        self._recreated(key, print_, key_type)

    @event(Recreated)
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

    class Deleted(Aggregate.Event):
        """The key pair was deleted (servers keep the key they were built with)."""

    @event(Deleted)
    def _deleted(self) -> None:
        self.deleted = True
