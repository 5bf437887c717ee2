"""Console tokens as nova-consoleauth keeps them: one use, a deadline, one server and one console
type, and only the SHA-256 of the token stored.

Tokens are not facts of the log: they are secrets that live for minutes, used once. They are kept
in PostgreSQL (a table of their own, as Nova's ``console_auth_tokens``), where the API that issues
them and the proxies that take them both reach, and where one use is one atomic row update.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any
from uuid import UUID

import psycopg

SCHEMA = "stratus_consoles"
_SCHEMA_LOCK = 0x5C0_7050  # pg_advisory_xact_lock key: two processes creating the table at once
_DDL = f"""
CREATE SCHEMA IF NOT EXISTS {SCHEMA};
CREATE TABLE IF NOT EXISTS {SCHEMA}.tokens (
    token_hash bytea PRIMARY KEY,          -- sha256 of the token; the token is never stored
    server_id uuid NOT NULL,
    console_type text NOT NULL,            -- Nova's type: serial, novnc
    host text NOT NULL,                    -- the server's host when the token was issued
    expires_at double precision NOT NULL,  -- seconds since the epoch
    used_at double precision               -- set by the one use
);
CREATE INDEX IF NOT EXISTS tokens_expires_at ON {SCHEMA}.tokens (expires_at);
"""
# How long a spent or expired token's row is kept (to tell "used" and "expired" from "unknown").
KEEP_SECONDS = 3600.0

Connect = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]


class TokenRefused(Exception):
    """The token opens nothing; the message says why, for the proxy's client."""


@dataclasses.dataclass(frozen=True)
class Grant:
    """What a token, once taken, opens."""

    server_id: str
    console_type: str
    host: str


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class ConsoleTokens:
    """The tokens table on connections from ``connect`` (a pool's); ``clock`` and ``new_token`` are
    injected for the tests."""

    def __init__(
        self,
        connect: Connect,
        *,
        clock: Callable[[], float] = time.time,
        new_token: Callable[[], str] = lambda: secrets.token_urlsafe(32),
    ) -> None:
        self._connect = connect
        self._clock = clock
        self._new_token = new_token
        self._ready = False
        self._lock = threading.Lock()

    def _ensure_schema(self, conn: psycopg.Connection[Any]) -> None:
        if self._ready:
            return
        with self._lock, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            conn.execute(_DDL)  # type: ignore[arg-type]
            self._ready = True

    def issue(self, server_id: str, console_type: str, host: str, ttl: float) -> str:
        """A new token for ``server_id``'s ``console_type`` console on ``host``, good for ``ttl`` s."""
        token = self._new_token()
        now = self._clock()
        with self._connect() as conn:
            self._ensure_schema(conn)
            with conn.transaction():
                conn.execute(
                    f"INSERT INTO {SCHEMA}.tokens (token_hash, server_id, console_type, host, expires_at)"
                    " VALUES (%s, %s, %s, %s, %s)",
                    (digest(token), UUID(server_id), console_type, host, now + ttl),
                )
                conn.execute(f"DELETE FROM {SCHEMA}.tokens WHERE expires_at < %s", (now - KEEP_SECONDS,))
        return token

    def take(self, token: str, console_type: str) -> Grant:
        """Spend ``token`` on a ``console_type`` console: what it opens, or ``TokenRefused``. A token
        is spent by its first attempt, even one refused for its type: a token is tried once."""
        if not token or len(token) > 256:
            raise TokenRefused("The console token is missing or malformed.")
        now = self._clock()
        with self._connect() as conn:
            self._ensure_schema(conn)
            with conn.transaction():
                row = conn.execute(
                    f"SELECT server_id, console_type, host, expires_at, used_at FROM {SCHEMA}.tokens"
                    " WHERE token_hash = %s FOR UPDATE",
                    (digest(token),),
                ).fetchone()
                if row is not None and _at(row, 4) is None:
                    conn.execute(
                        f"UPDATE {SCHEMA}.tokens SET used_at = %s WHERE token_hash = %s", (now, digest(token))
                    )
        if row is None:
            raise TokenRefused("The console token is unknown.")
        server_id, kind, host, expires_at, used_at = (_at(row, i) for i in range(5))
        if used_at is not None:
            raise TokenRefused("The console token was already used.")
        if float(expires_at) <= now:
            raise TokenRefused("The console token has expired.")
        if kind != console_type:
            raise TokenRefused(f"The console token is for a {kind} console, not {console_type}.")
        return Grant(str(server_id), str(kind), str(host))


def _at(row: Any, i: int) -> Any:
    """Column ``i`` of a row, whether the connection makes tuples or dicts."""
    return list(row.values())[i] if isinstance(row, dict) else row[i]
