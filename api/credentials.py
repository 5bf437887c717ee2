"""Password hashes: kept in PostgreSQL, outside the event log, written only by the API.

The log is replicated, exported and read by auditors and integrators; a password hash in it would
be offline-crackable by all of them, forever (a log is never rewritten). So ``User.PasswordSet``
records only that a password changed, and the hash lives here, in the ``stratus_identity`` schema,
which no rebuild of the read models touches. It must be backed up with the database (see
docs/identity.md).

Hashes are scrypt (``hashlib.scrypt``, RFC 7914) with a random 16-byte salt per password, stored as
``scrypt$<n>$<r>$<p>$<salt>$<hash>`` (base64), so parameters can be raised later and old hashes
still verify.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

SCHEMA = "stratus_identity"
# Creating the schema from several API workers at once needs one of them at a time.
_SCHEMA_LOCK = 0x7374726174757369  # "stratusi"
# scrypt's cost: n=2**14, r=8, p=1 is RFC 7914's figure for interactive logins (16 MiB, tens of ms
# per hash). Each hash records its parameters, so raising them later leaves old hashes verifiable.
N, R, P = 2**14, 8, 1
_DKLEN = 32

_DDL = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
CREATE TABLE IF NOT EXISTS {SCHEMA}.credentials (
    user_id text PRIMARY KEY,
    password_hash text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
"""


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    salt = salt if salt is not None else secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=N, r=R, p=P, dklen=_DKLEN)
    return f"scrypt${N}${R}${P}${_b64(salt)}${_b64(digest)}"


def verify_password(password: str, stored: str) -> bool:
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        expected = base64.b64decode(digest)
        actual = hashlib.scrypt(
            password.encode(),
            salt=base64.b64decode(salt),
            n=int(n),
            r=int(r),
            p=int(p),
            dklen=len(expected),
            maxmem=256 * int(n) * int(r) + 1024 * 1024,
        )
    except ValueError:
        return False
    return hmac.compare_digest(actual, expected)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def ensure_schema(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        conn.execute(_DDL)  # type: ignore[arg-type]


class Credentials:
    """The credentials table, on connections from ``connect`` (a pool's, or a single one's)."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        self._connect = connect

    def password_hash(self, user_id: str) -> str | None:
        with self._connect() as conn:
            row = conn.execute(
                f"SELECT password_hash FROM {SCHEMA}.credentials WHERE user_id = %s", (user_id,)
            ).fetchone()
        if row is None:
            return None
        value = row["password_hash"] if isinstance(row, dict) else row[0]
        return str(value)

    def check(self, user_id: str, password: str) -> bool:
        stored = self.password_hash(user_id)
        if stored is None:
            # Spend the same time as a real check, so that timing does not say which users have passwords.
            verify_password(password, _dummy_hash())
            return False
        return verify_password(password, stored)

    @contextmanager
    def setting(self, user_id: str, password: str) -> Iterator[None]:
        """Write ``password``'s hash and keep it only if the block (which records the event) succeeds."""
        hashed = hash_password(password)
        with self._connect() as conn, conn.transaction():
            conn.execute(
                f"INSERT INTO {SCHEMA}.credentials (user_id, password_hash) VALUES (%s, %s) "
                "ON CONFLICT (user_id) DO UPDATE SET password_hash = EXCLUDED.password_hash, "
                "updated_at = now()",
                (user_id, hashed),
            )
            yield


@functools.cache
def _dummy_hash() -> str:
    return hash_password("not a password", salt=b"\0" * 16)
