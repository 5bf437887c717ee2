"""Tokens: Fernet tokens (Keystone's own format) saying "user U acts in project P until T".

A token is a Fernet token (``cryptography.fernet``: AES-128-CBC and HMAC-SHA256, the format
Keystone issues) whose plaintext is a small JSON document: version, token id, audit chain id,
user, project, auth methods, issue and expiry times (microseconds). Issuing a token writes nothing
anywhere: any API node holding the keys can verify it. What the token cannot say, whether the user
was disabled, changed their password or lost a role since it was issued, or whether its chain was
revoked, and which roles the user holds now, the API reads from the identity read model on each
request (``projections.identity_queries.subject``), as Keystone computes roles at validation time.

Chains, as Keystone's ``audit_ids``: a token obtained with a password starts a chain (its own id);
a token obtained with a token belongs to the parent's chain and keeps the parent's expiry, so
re-authenticating never extends a token's life. Revoking any token revokes its whole chain.

Keys: the key file holds one or more 32-byte keys in hex, one per line. The first signs new
tokens; every one of them verifies (``MultiFernet``), which is how keys are rotated
(docs/identity.md). Parsing is strict: a token that is not canonical base64url, or whose claims are
missing or of the wrong type, is invalid (401), never an error.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import functools
import hashlib
import hmac
import os
import re
import secrets
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from cryptography.fernet import Fernet, MultiFernet
from cryptography.fernet import InvalidToken as FernetInvalid

VERSION = 2
_KEY_BYTES = 32
MAX_TOKEN_CHARS = 2048
_TOKEN = re.compile(r"[A-Za-z0-9_-]+={0,2}")


class InvalidToken(Exception):
    """Not a token this deployment issued, or one that has expired."""


@dataclass(frozen=True)
class TokenClaims:
    """What a token says: who, in which project, how authenticated, from when until when, in which chain."""

    token_id: str
    user_id: str
    project_id: str
    issued_at: dt.datetime
    expires_at: dt.datetime
    methods: tuple[str, ...] = ("password",)
    chain_id: str = ""  # the first token of the chain's id ("" for a token that starts a chain)
    # The application credential it was issued for: its roles only, and only while it exists.
    application_credential_id: str = ""

    @property
    def chain(self) -> str:
        """The audit chain this token belongs to: revoking any token of it revokes all of them."""
        return self.chain_id or self.token_id

    @property
    def audit_ids(self) -> list[str]:
        """Keystone's ``audit_ids``: this token's, then its chain's when it was issued from another."""
        ids = [_audit_id(self.token_id)]
        if self.chain_id:
            ids.append(_audit_id(self.chain_id))
        return ids


def _audit_id(token_id: str) -> str:
    return base64.urlsafe_b64encode(bytes.fromhex(token_id)[:16]).rstrip(b"=").decode()


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _micros(t: dt.datetime) -> int:
    return int(t.timestamp()) * 1_000_000 + t.microsecond


def _from_micros(value: Any) -> dt.datetime:
    if type(value) is not int:
        raise TypeError("a time must be an integer of microseconds")
    seconds, micros = divmod(value, 1_000_000)
    return dt.datetime.fromtimestamp(seconds, dt.UTC).replace(microsecond=micros)


class TokenSigner:
    """Issues and verifies tokens with the deployment's keys (the first key issues)."""

    def __init__(
        self,
        key: bytes | Sequence[bytes],
        ttl_seconds: int = 3600,
        *,
        clock: Callable[[], dt.datetime] = _utcnow,
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
    ) -> None:
        keys = [key] if isinstance(key, bytes) else list(key)
        if not keys or any(len(k) != _KEY_BYTES for k in keys):
            raise ValueError(f"every token key must be {_KEY_BYTES} bytes")
        self._fernet = MultiFernet([Fernet(base64.urlsafe_b64encode(k)) for k in keys])
        self._keys = tuple(keys)
        self.ttl = dt.timedelta(seconds=ttl_seconds)
        self._clock = clock
        self._new_id = new_id
        # What the most recent tokens decoded to. Decoding (base64, HMAC, AES, the claims: ~55 us,
        # every request's) is a function of the token and these keys alone, so a token used again
        # is not decoded again; its expiry is compared with the clock on every use, and a token
        # that does not decode is never kept (it raises).
        self._decoded = functools.lru_cache(maxsize=4096)(self._decode)

    def digests(self, purpose: str, data: bytes) -> list[str]:
        """HMAC-SHA256 digests of ``data`` under a key derived from each token key for ``purpose``
        (the issuing key's first): a digest a reader of the log, who holds no key, cannot confirm a
        guess with, which every API node computes alike, and which survives a key rotation."""
        derived = (hmac.new(k, f"stratus:{purpose}".encode(), hashlib.sha256).digest() for k in self._keys)
        return [hmac.new(k, data, hashlib.sha256).hexdigest() for k in derived]

    def issue(
        self,
        user_id: str,
        project_id: str,
        methods: tuple[str, ...] = ("password",),
        *,
        parent: TokenClaims | None = None,
        application_credential_id: str = "",
        expires_at: dt.datetime | None = None,
    ) -> tuple[str, TokenClaims]:
        """A new token; from ``parent`` (a token exchanged for this one) it inherits the chain, the
        expiry and the application credential, so that exchanging tokens never extends their life
        or their power. ``expires_at``: an earlier end (the application credential's)."""
        now = self._clock()
        expires = parent.expires_at if parent is not None else now + self.ttl
        if expires_at is not None:
            expires = min(expires, expires_at)
        chain = parent.chain if parent is not None else ""
        credential = parent.application_credential_id if parent is not None else application_credential_id
        claims = TokenClaims(self._new_id(), user_id, project_id, now, expires, methods, chain, credential)
        payload = {
            "v": VERSION,
            "id": claims.token_id,
            "c": chain,
            "u": user_id,
            "p": project_id,
            "iat": _micros(now),
            "exp": _micros(expires),
            "m": list(methods),
        }
        if credential:
            payload["a"] = credential
        return self._fernet.encrypt(orjson.dumps(payload)).decode(), claims

    def verify(self, token: str) -> TokenClaims:
        claims = self._decoded(token)
        if self._clock() >= claims.expires_at:
            raise InvalidToken("expired")
        return claims

    def _decode(self, token: str) -> TokenClaims:
        if len(token) > MAX_TOKEN_CHARS or not _TOKEN.fullmatch(token) or not _canonical(token):
            raise InvalidToken("malformed token")
        try:
            doc = orjson.loads(self._fernet.decrypt(token.encode()))
        except (FernetInvalid, ValueError):
            raise InvalidToken("not a token of this deployment") from None
        try:
            return _claims(doc)
        except (KeyError, TypeError, ValueError, OverflowError):
            raise InvalidToken("malformed claims") from None


def _canonical(token: str) -> bool:
    """Only the base64url text Fernet itself writes (the decoder would skip stray characters)."""
    try:
        raw = base64.urlsafe_b64decode(token.encode())
    except (binascii.Error, ValueError):
        return False
    return base64.urlsafe_b64encode(raw).decode() == token


def _claims(doc: Any) -> TokenClaims:
    if not isinstance(doc, dict) or doc.get("v") != VERSION:
        raise ValueError("unknown token version")
    texts = [doc["id"], doc["c"], doc["u"], doc["p"]]
    methods = doc["m"]
    if not all(isinstance(t, str) for t in texts) or not isinstance(methods, list):
        raise TypeError("claims of the wrong type")
    if not all(isinstance(m, str) for m in methods):
        raise TypeError("methods of the wrong type")
    token_id, chain, user_id, project_id = texts
    credential = doc.get("a", "")
    if not isinstance(credential, str):
        raise TypeError("claims of the wrong type")
    bytes.fromhex(token_id)  # ValueError unless hex
    return TokenClaims(
        token_id=token_id,
        user_id=user_id,
        project_id=project_id,
        issued_at=_from_micros(doc["iat"]),
        expires_at=_from_micros(doc["exp"]),
        methods=tuple(methods),
        chain_id=chain,
        application_credential_id=credential,
    )


def load_or_create_key(path: Path) -> list[bytes]:
    """The token keys in ``path`` (hex, one per line; the first issues), the file created (mode 0600)
    with one new key on first use; every API node needs the same file."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass  # made before, perhaps by another API worker a moment ago: read it below
    else:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(_KEY_BYTES) + "\n")
    for _ in range(50):  # another worker may be between creating the file and writing it
        lines = [line.strip() for line in path.read_text().splitlines()]
        keys = [bytes.fromhex(line) for line in lines if line and not line.startswith("#")]
        if keys:
            return keys
        time.sleep(0.02)
    raise ValueError(f"the token key file {path} is empty")


def isoformat(t: dt.datetime) -> str:
    """Keystone's timestamp format: ``2026-01-01T00:00:00.000000Z``."""
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
