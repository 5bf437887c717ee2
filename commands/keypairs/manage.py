"""Creating and deleting key pairs. A key pair is counted in its user's ``key_pairs`` ledger, within the
limit of the project's quota, in the same atomic append that creates or deletes it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from eventsourcing.persistence import IntegrityError

from commands import loaders
from commands.errors import AlreadyExists
from commands.keypair import X509, KeyPair, keypair_aggregate_id
from commands.keypairs.keys import generate_x509_certificate
from commands.ledger import KEY_PAIRS
from commands.quota import DEFAULT_LIMITS
from commands.unit_of_work import Result, UnitOfWork, retried


@dataclass(frozen=True)
class CreateKeyPair:
    """Create (import, or generate) a user's key pair."""

    user_id: str
    name: str
    public_key: str | None = None  # None: generate a key pair and return its private key once
    # whose quota's ``key_pairs`` limits the user's key pairs (None: the default limit)
    project_id: str | None = None
    type: str = "ssh"  # or "x509": public_key is a PEM certificate (microversion 2.2)


@dataclass(frozen=True)
class DeleteKeyPair:
    """Delete a user's key pair."""

    user_id: str
    name: str


@dataclass(frozen=True)
class KeyPairCreated(Result):
    """The new key pair's id and position, and its private key if it was generated."""

    private_key: str | None = None  # only for a generated key pair; never recorded anywhere


def create_keypair(
    cmd: CreateKeyPair, uow: UnitOfWork, generate_key: Callable[[], tuple[str, str]]
) -> KeyPairCreated:
    """Import the public key, or generate a key pair (``generate_key``, or an x509 certificate)."""
    private_key = None
    public_key = cmd.public_key
    limits = uow.limits(cmd.project_id) if cmd.project_id else DEFAULT_LIMITS
    if public_key is None:
        # Refuse what would be refused anyway before paying for a 2048-bit RSA key generation:
        # a name in use, or no room in the user's key pair quota.
        existing = uow.find(KeyPair, keypair_aggregate_id(cmd.user_id, cmd.name))
        if existing is not None and not existing.deleted:
            raise AlreadyExists(f"Key pair '{cmd.name}' already exists.")
        uow.ledger(KEY_PAIRS, cmd.user_id).admit(cmd.name, limits)
        private_key, public_key = (
            generate_x509_certificate(cmd.user_id) if cmd.type == X509 else generate_key()
        )
    return _create(cmd, uow, public_key, private_key, limits)


@retried
def _create(
    cmd: CreateKeyPair, uow: UnitOfWork, public_key: str, private_key: str | None, limits: Mapping[str, int]
) -> KeyPairCreated:
    keypair_id = keypair_aggregate_id(cmd.user_id, cmd.name)
    keypair = uow.find(KeyPair, keypair_id)
    if keypair is None:
        keypair = KeyPair.create(cmd.user_id, cmd.name, public_key, cmd.type)
    else:
        keypair.recreate(public_key, cmd.type)
    ledger = uow.ledger(KEY_PAIRS, cmd.user_id)
    ledger.admit(cmd.name, limits)  # the user's key pairs, counted where they are appended
    try:
        position = uow.save(keypair, ledger)
    except IntegrityError:
        again = uow.find(KeyPair, keypair_id)
        if again is not None and not again.deleted:
            raise AlreadyExists(f"Key pair '{cmd.name}' already exists.") from None
        raise  # another of the user's key pairs was added or removed meanwhile: count again
    return KeyPairCreated(str(keypair.id), position, private_key)


@retried
def delete_keypair(cmd: DeleteKeyPair, uow: UnitOfWork) -> Result:
    """The key pair is deleted and leaves its user's ledger."""
    keypair = loaders.keypair(uow, cmd.user_id, cmd.name)
    keypair.delete()
    ledger = uow.ledger(KEY_PAIRS, cmd.user_id)
    ledger.release(cmd.name)
    return Result(cmd.name, uow.save(keypair, ledger))
