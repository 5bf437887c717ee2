"""New key pairs, generated as Nova generates them when a user asks for one without a public key."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


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
