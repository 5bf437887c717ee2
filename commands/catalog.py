"""Commands on what users keep for their servers: images (the image service) and key pairs.

Each handler loads the aggregate from the log, makes one domain call and appends, like those of
``commands.handlers``. Image data never passes through here: the API stores it
(``stratus.imagestore``) and records the upload with its size and digests.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from eventsourcing.persistence import IntegrityError

from commands.errors import AlreadyExists, NotFound
from commands.handlers import Handlers
from commands.image import Image
from commands.image_usage import ImageLimits, ImageUsage, image_usage_id
from commands.keypair import X509, KeyPair, keypair_aggregate_id
from commands.ledger import KEY_PAIRS
from commands.quota import DEFAULT_LIMITS
from commands.unit_of_work import Result, UnitOfWork


@dataclass(frozen=True)
class CreateImage:
    owner: str
    name: str | None = None
    image_id: UUID | str | None = None
    visibility: str = "shared"
    container_format: str | None = None
    disk_format: str | None = None
    min_disk: int = 0
    min_ram: int = 0
    protected: bool = False
    tags: tuple[str, ...] = ()
    properties: dict[str, Any] = field(default_factory=dict)
    os_hidden: bool = False


@dataclass(frozen=True)
class RecordImageUpload:
    image_id: str
    project_id: str | None  # None: an admin
    size: int
    checksum: str
    os_hash_algo: str
    os_hash_value: str


@dataclass(frozen=True)
class DeleteImage:
    image_id: str
    project_id: str | None  # None: an admin


@dataclass(frozen=True)
class CreateKeyPair:
    user_id: str
    name: str
    public_key: str | None = None  # None: generate a key pair and return its private key once
    # whose quota's ``key_pairs`` limits the user's key pairs (None: the default limit)
    project_id: str | None = None
    type: str = "ssh"  # or "x509": public_key is a PEM certificate (microversion 2.2)


@dataclass(frozen=True)
class DeleteKeyPair:
    user_id: str
    name: str


@dataclass(frozen=True)
class KeyPairCreated(Result):
    private_key: str | None = None  # only for a generated key pair; never recorded anywhere


def generate_ssh_key() -> tuple[str, str]:
    """A new RSA 2048 key pair: (private key in PEM, public key in OpenSSH form), as Nova generates."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, public.decode() + " Generated-by-Stratus"


def generate_x509_certificate(user_id: str) -> tuple[str, str]:
    """A new RSA 2048 key and a self-signed client certificate for ``user_id`` (PEM each), as Nova
    generates an x509 key pair (WinRM's: CN and UPN the user, ten years, client authentication)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, user_id[:64])])  # X.520: at most 64
    now = datetime.now(UTC)
    upn = x509.OtherName(x509.ObjectIdentifier("1.3.6.1.4.1.311.20.2.3"), _der_utf8(f"{user_id}@localhost"))
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + timedelta(days=3650))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([upn]), critical=False)
        .sign(key, hashes.SHA256())
    )
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()
    return private, certificate.public_bytes(serialization.Encoding.PEM).decode()


def _der_utf8(text: str) -> bytes:
    """``text`` as a DER UTF8String."""
    data = text.encode()
    size = len(data)
    if size < 0x80:
        length = bytes([size])
    else:  # DER's long form: the length's own size first, in as few bytes as it takes
        octets = size.to_bytes((size.bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(octets)]) + octets
    return b"\x0c" + length + data


class CatalogHandlers(UnitOfWork):
    def __init__(
        self,
        handlers: Handlers,
        *,
        new_id: Callable[[], UUID] = uuid4,
        generate_key: Callable[[], tuple[str, str]] = generate_ssh_key,
        image_limits: ImageLimits | None = None,
    ) -> None:
        super().__init__(handlers.app)
        self._handlers = handlers
        self._new_id = new_id
        self._generate_key = generate_key
        self.image_limits = image_limits or ImageLimits()

    # -- images ---------------------------------------------------------------------------------
    def image(self, image_id: str, project_id: str | None) -> Image:
        """The image if ``project_id`` may see it (None: an admin); Glance's 404 otherwise."""
        try:
            image = self._handlers.image(image_id)
        except NotFound:
            raise NotFound(f"No image found with ID {image_id}") from None
        if not image.visible_to(project_id):
            raise NotFound(f"No image found with ID {image_id}")
        return image

    def image_usage(self, project_id: str) -> ImageUsage:
        """The project's image quota usage, as the log has it."""
        return self.find(ImageUsage, image_usage_id(project_id)) or ImageUsage(project_id)

    def create_image(self, cmd: CreateImage) -> Result:
        image_id = str(cmd.image_id or self._new_id())
        fields = {k: v for k, v in vars(cmd).items() if k != "image_id"}
        fields["tags"] = list(dict.fromkeys(cmd.tags))

        def decide() -> Result:
            image = Image.create(image_id, **fields)
            conflict = AlreadyExists(f"Image with identifier {image.image_id} already exists!")
            if self.find(Image, image.id) is not None:
                raise conflict
            with contextlib.suppress(NotFound):
                self._handlers.image(image.image_id)  # an image kept where version 1 put it
                raise conflict
            usage = self.image_usage(cmd.owner)
            usage.admit(image.image_id, self.image_limits)
            return Result(image.image_id, self.save(image, usage))

        return self.retrying(decide)

    def record_image_upload(self, cmd: RecordImageUpload) -> Result:
        def decide() -> Result:
            image = self.image(cmd.image_id, cmd.project_id)
            image.ensure_owned_by(cmd.project_id)
            image.record_upload(cmd.size, cmd.checksum, cmd.os_hash_algo, cmd.os_hash_value)
            usage = self.image_usage(image.owner)  # charged to the image's owner, whoever uploads
            usage.charge(image.image_id, cmd.size, self.image_limits)
            return Result(image.image_id, self.save(image, usage))

        return self.retrying(decide)

    def delete_image(self, cmd: DeleteImage) -> Result:
        def decide() -> Result:
            image = self.image(cmd.image_id, cmd.project_id)
            image.ensure_owned_by(cmd.project_id)
            image.delete()
            usage = self.image_usage(image.owner)
            usage.release(image.image_id)
            return Result(image.image_id, self.save(image, usage))

        return self.retrying(decide)

    # -- key pairs ------------------------------------------------------------------------------
    def keypair(self, user_id: str, name: str) -> KeyPair:
        return self._handlers.keypair(user_id, name)

    def create_keypair(self, cmd: CreateKeyPair) -> KeyPairCreated:
        private_key = None
        public_key = cmd.public_key
        limits = self._handlers.limits(cmd.project_id) if cmd.project_id else DEFAULT_LIMITS
        keypair_id = keypair_aggregate_id(cmd.user_id, cmd.name)
        if public_key is None:
            # Refuse what would be refused anyway before paying for a 2048-bit RSA key generation:
            # a name in use, or no room in the user's key pair quota.
            existing = self.find(KeyPair, keypair_id)
            if existing is not None and not existing.deleted:
                raise AlreadyExists(f"Key pair '{cmd.name}' already exists.")
            self.ledger(KEY_PAIRS, cmd.user_id).admit(cmd.name, limits)
            private_key, public_key = (
                generate_x509_certificate(cmd.user_id) if cmd.type == X509 else self._generate_key()
            )

        def decide() -> KeyPairCreated:
            keypair = self.find(KeyPair, keypair_id)
            if keypair is None:
                keypair = KeyPair.create(cmd.user_id, cmd.name, public_key, cmd.type)
            else:
                keypair.recreate(public_key, cmd.type)
            ledger = self.ledger(KEY_PAIRS, cmd.user_id)
            ledger.admit(cmd.name, limits)  # the user's key pairs, counted where they are appended
            try:
                position = self.save(keypair, ledger)
            except IntegrityError:
                again = self.find(KeyPair, keypair_id)
                if again is not None and not again.deleted:
                    raise AlreadyExists(f"Key pair '{cmd.name}' already exists.") from None
                raise  # another of the user's key pairs was added or removed meanwhile: count again
            return KeyPairCreated(str(keypair.id), position, private_key)

        return self.retrying(decide)

    def delete_keypair(self, cmd: DeleteKeyPair) -> Result:
        def decide() -> Result:
            keypair = self.keypair(cmd.user_id, cmd.name)
            keypair.delete()
            ledger = self.ledger(KEY_PAIRS, cmd.user_id)
            ledger.release(cmd.name)
            return Result(cmd.name, self.save(keypair, ledger))

        return self.retrying(decide)
