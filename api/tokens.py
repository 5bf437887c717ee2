"""Tokens: signed, expiring statements "user U acts in project P until T", checked on every request.

A token is ``<payload>.<signature>``, both base64url: the payload is JSON (version, token id, user
id, project id, issue and expiry times, auth methods), the signature HMAC-SHA256 over it with the
deployment's token key. Issuing a token writes nothing anywhere: any API node holding the key can
verify it. What the signature cannot say, whether the user was disabled or the token revoked since,
and which roles the user holds now, the API reads from the identity read model on each request
(``projections.identity_queries.subject``), as Keystone computes roles at validation time.

The payload is signed, not encrypted: it holds ids and times, nothing secret. The key is.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import hmac
import os
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

VERSION = 1
_KEY_BYTES = 32


class InvalidToken(Exception):
    """Not a token this deployment signed, or one that has expired."""


@dataclass(frozen=True)
class TokenClaims:
    token_id: str
    user_id: str
    project_id: str
    issued_at: dt.datetime
    expires_at: dt.datetime
    methods: tuple[str, ...] = ("password",)


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class TokenSigner:
    def __init__(
        self,
        key: bytes,
        ttl_seconds: int = 3600,
        *,
        clock: Callable[[], dt.datetime] = _utcnow,
        new_id: Callable[[], str] = lambda: uuid.uuid4().hex,
    ) -> None:
        if len(key) < 16:
            raise ValueError("the token key must be at least 16 bytes")
        self._key = key
        self.ttl = dt.timedelta(seconds=ttl_seconds)
        self._clock = clock
        self._new_id = new_id

    def issue(
        self, user_id: str, project_id: str, methods: tuple[str, ...] = ("password",)
    ) -> tuple[str, TokenClaims]:
        now = self._clock().replace(microsecond=0)
        claims = TokenClaims(self._new_id(), user_id, project_id, now, now + self.ttl, methods)
        payload = orjson.dumps(
            {
                "v": VERSION,
                "id": claims.token_id,
                "u": user_id,
                "p": project_id,
                "iat": int(now.timestamp()),
                "exp": int(claims.expires_at.timestamp()),
                "m": list(methods),
            }
        )
        body = _b64(payload)
        return f"{body}.{_b64(self._sign(body))}", claims

    def verify(self, token: str) -> TokenClaims:
        body, dot, signature = token.partition(".")
        if not dot or len(token) > 1024:
            raise InvalidToken("malformed token")
        try:
            given = _unb64(signature)
            doc = orjson.loads(_unb64(body))
        except (binascii.Error, ValueError):
            raise InvalidToken("malformed token") from None
        if not hmac.compare_digest(given, self._sign(body)):
            raise InvalidToken("bad signature")
        if not isinstance(doc, dict) or doc.get("v") != VERSION:
            raise InvalidToken("unknown token version")
        claims = TokenClaims(
            token_id=str(doc["id"]),
            user_id=str(doc["u"]),
            project_id=str(doc["p"]),
            issued_at=dt.datetime.fromtimestamp(int(doc["iat"]), dt.UTC),
            expires_at=dt.datetime.fromtimestamp(int(doc["exp"]), dt.UTC),
            methods=tuple(doc.get("m") or ()),
        )
        if self._clock() >= claims.expires_at:
            raise InvalidToken("expired")
        return claims

    def _sign(self, body: str) -> bytes:
        return hmac.new(self._key, body.encode(), hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def load_or_create_key(path: Path) -> bytes:
    """The token key in ``path`` (hex), created (mode 0600) on first use; every API node needs the same."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass  # made before, perhaps by another API worker a moment ago: read it below
    else:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(_KEY_BYTES) + "\n")
    for _ in range(50):  # another worker may be between creating the file and writing it
        text = path.read_text().strip()
        if text:
            return bytes.fromhex(text)
        time.sleep(0.02)
    raise ValueError(f"the token key file {path} is empty")


def isoformat(t: dt.datetime) -> str:
    """Keystone's timestamp format: ``2026-01-01T00:00:00.000000Z``."""
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
