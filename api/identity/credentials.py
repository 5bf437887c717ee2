"""Password hashes and login throttling: kept in PostgreSQL, outside the event log, written only by the API.

The log is replicated, exported and read by auditors and integrators; a password hash in it would
be offline-crackable by all of them, forever (a log is never rewritten). So ``User.PasswordSet``
records only that a password changed, and the hash lives here, in the ``stratus_identity`` schema,
which no rebuild of the read models touches. It must be backed up with the database (see
docs/identity.md).

Hashes are argon2id (``argon2-cffi``, RFC 9106's low-memory profile by default: 64 MiB, 3 passes,
4 lanes; ``password_hash_memory_kib`` and ``password_hash_iterations`` set the cost, as Keystone's
``password_hash_rounds`` does), in the PHC string format that records its parameters. Hashes made
by earlier releases (scrypt, ``scrypt$<n>$<r>$<p>$<salt>$<hash>``) still verify, and are replaced
by an argon2id hash at the user's next successful login, as is any argon2id hash whose parameters
differ from today's.

Application credentials' secrets are hashed the same way, in ``application_credential_secrets``:
shown once when the credential is made, never logged, never in an event.

Login throttling (``LoginThrottle``): failed password logins are counted per user and per source
address in fixed windows, in PostgreSQL so that every API node sees the same counts. Past the limit,
logins for that user (or from that address) answer 429 with ``Retry-After`` until the window ends,
before any password is checked; a successful login clears the user's count.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import hashlib
import hmac
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from stratus.config import Settings

SCHEMA = "stratus_identity"
# Creating the schema from several API workers at once needs one of them at a time.
_SCHEMA_LOCK = 0x7374726174757369  # "stratusi"
_HASHER = PasswordHasher()  # argon2id, RFC 9106 low-memory parameters


def password_hasher(settings: Settings) -> PasswordHasher:
    """argon2id at the deployment's cost (``password_hash_memory_kib``, ``password_hash_iterations``)
    over 4 lanes: RFC 9106's low-memory profile by default."""
    return PasswordHasher(
        memory_cost=settings.password_hash_memory_kib,
        time_cost=settings.password_hash_iterations,
        parallelism=4,
    )


_DDL = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
CREATE TABLE IF NOT EXISTS {SCHEMA}.credentials (
    user_id text PRIMARY KEY,
    password_hash text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
-- Application credentials' secrets, hashed as passwords are (their credentials are in the log).
CREATE TABLE IF NOT EXISTS {SCHEMA}.application_credential_secrets (
    credential_id text PRIMARY KEY,
    secret_hash text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS {SCHEMA}.login_failures (
    key text PRIMARY KEY,
    failures integer NOT NULL,
    window_start timestamptz NOT NULL
);
"""


def hash_password(password: str, hasher: PasswordHasher = _HASHER) -> str:
    return hasher.hash(password)


def verify_password(password: str, stored: str) -> bool:
    if stored.startswith("$argon2"):
        try:
            return _HASHER.verify(stored, password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False
    return _verify_scrypt(password, stored)


def needs_rehash(stored: str, hasher: PasswordHasher = _HASHER) -> bool:
    """Whether ``stored`` should be replaced by a hash with today's scheme and parameters."""
    if not stored.startswith("$argon2id$"):
        return True
    try:
        return hasher.check_needs_rehash(stored)
    except InvalidHashError:
        return True


def _verify_scrypt(password: str, stored: str) -> bool:
    """A hash of the scrypt era (``scrypt$n$r$p$salt$hash``): verified, then upgraded by the caller."""
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


def ensure_schema(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        conn.execute(_DDL)  # type: ignore[arg-type]


class Credentials:
    """The credentials table, on connections from ``connect`` (a pool's, or a single one's), and the
    login throttle beside it; hashes made with ``hasher`` (``password_hasher``: the deployment's cost)."""

    def __init__(
        self,
        connect: Callable[[], Any],
        throttle: ThrottlePolicy | None = None,
        hasher: PasswordHasher = _HASHER,
    ) -> None:
        self._connect = connect
        self.throttle = LoginThrottle(connect, throttle)
        self._hasher = hasher

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
            verify_password(password, _dummy_hash(self._hasher))
            return False
        if not verify_password(password, stored):
            return False
        if needs_rehash(stored, self._hasher):
            self._store(user_id, hash_password(password, self._hasher), only_if=stored)
        return True

    @contextmanager
    def setting(self, user_id: str, password: str) -> Iterator[None]:
        """Write ``password``'s hash and keep it only if the block (which records the event) succeeds."""
        hashed = hash_password(password, self._hasher)
        with self._connect() as conn, conn.transaction():
            self._upsert(conn, user_id, hashed)
            yield

    @contextmanager
    def secret_setting(self, credential_id: str, secret: str) -> Iterator[None]:
        """Write an application credential's secret's hash; kept only if the block (which records
        the credential) succeeds."""
        hashed = hash_password(secret, self._hasher)
        with self._connect() as conn, conn.transaction():
            conn.execute(
                f"INSERT INTO {SCHEMA}.application_credential_secrets (credential_id, secret_hash) "
                "VALUES (%s, %s)",
                (credential_id, hashed),
            )
            yield

    def check_secret(self, credential_id: str, secret: str) -> bool:
        with self._connect() as conn:
            row = conn.execute(
                f"SELECT secret_hash FROM {SCHEMA}.application_credential_secrets WHERE credential_id = %s",
                (credential_id,),
            ).fetchone()
        if row is None:
            verify_password(secret, _dummy_hash(self._hasher))
            return False
        stored = row["secret_hash"] if isinstance(row, dict) else row[0]
        return verify_password(secret, str(stored))

    def forget_secret(self, credential_id: str) -> None:
        with self._connect() as conn:
            conn.execute(
                f"DELETE FROM {SCHEMA}.application_credential_secrets WHERE credential_id = %s",
                (credential_id,),
            )

    def forget(self, user_id: str) -> None:
        """Remove a deleted user's password hash."""
        with self._connect() as conn:
            conn.execute(f"DELETE FROM {SCHEMA}.credentials WHERE user_id = %s", (user_id,))
        self.throttle.succeeded(user_id)

    def _store(self, user_id: str, hashed: str, *, only_if: str) -> None:
        """Replace the hash, unless it changed meanwhile (a password set between check and upgrade)."""
        with self._connect() as conn:
            conn.execute(
                f"UPDATE {SCHEMA}.credentials SET password_hash = %s, updated_at = now() "
                "WHERE user_id = %s AND password_hash = %s",
                (hashed, user_id, only_if),
            )

    @staticmethod
    def _upsert(conn: Any, user_id: str, hashed: str) -> None:
        conn.execute(
            f"INSERT INTO {SCHEMA}.credentials (user_id, password_hash) VALUES (%s, %s) "
            "ON CONFLICT (user_id) DO UPDATE SET password_hash = EXCLUDED.password_hash, "
            "updated_at = now()",
            (user_id, hashed),
        )


@functools.cache
def _dummy_hash(hasher: PasswordHasher) -> str:
    return hash_password("not a password", hasher)


# -- login throttling -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ThrottlePolicy:
    """At most ``per_user`` failed logins for one user name, and ``per_source`` from one address,
    in each ``window_seconds``; past that, 429 until the window ends."""

    per_user: int = 10
    per_source: int = 50
    window_seconds: int = 300


class LoginThrottle:
    """Failed password logins counted in PostgreSQL (every API node shares the counts)."""

    def __init__(self, connect: Callable[[], Any], policy: ThrottlePolicy | None = None) -> None:
        self._connect = connect
        self.policy = policy or ThrottlePolicy()

    def _limits(self, user: str, source: str) -> list[tuple[str, int]]:
        return [(f"user:{user}", self.policy.per_user), (f"source:{source}", self.policy.per_source)]

    def retry_after(self, user: str, source: str) -> int:
        """Seconds until ``user`` may try again from ``source`` (0: now)."""
        keys = self._limits(user, source)
        with self._connect() as conn:
            rows = conn.execute(
                f"SELECT key, failures, window_start + make_interval(secs => %s) - now() AS left "
                f"FROM {SCHEMA}.login_failures WHERE key = ANY(%s)",
                (self.policy.window_seconds, [k for k, _ in keys]),
            ).fetchall()
        limits = dict(keys)
        wait = 0
        for row in rows:
            key, failures, left = (row["key"], row["failures"], row["left"]) if isinstance(row, dict) else row
            if failures >= limits[key] and left > dt.timedelta(0):
                wait = max(wait, int(left.total_seconds()) + 1)
        return wait

    def failed(self, user: str, source: str) -> None:
        """Count a failed login against ``user`` and ``source`` (a new window when the last has ended)."""
        window = self.policy.window_seconds
        with self._connect() as conn, conn.transaction():
            for key, _ in self._limits(user, source):
                conn.execute(
                    f"INSERT INTO {SCHEMA}.login_failures AS f (key, failures, window_start) "
                    "VALUES (%s, 1, now()) ON CONFLICT (key) DO UPDATE SET "
                    "failures = CASE WHEN f.window_start < now() - make_interval(secs => %s) "
                    "THEN 1 ELSE f.failures + 1 END, "
                    "window_start = CASE WHEN f.window_start < now() - make_interval(secs => %s) "
                    "THEN now() ELSE f.window_start END",
                    (key, window, window),
                )

    def succeeded(self, user: str) -> None:
        with self._connect() as conn:
            conn.execute(f"DELETE FROM {SCHEMA}.login_failures WHERE key = %s", (f"user:{user}",))
