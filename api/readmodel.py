"""Reading the read models: a pooled connection, after waiting for the position the client names.

A client that wrote something reads its own write by sending the write's ``X-Stratus-Position``
back as ``X-Stratus-Min-Position`` (or ``?min_position=``): the read waits, up to the configured
time, for the projector to have applied the log that far, and is answered 503 with ``Retry-After``
otherwise. psycopg's connection and pool failures are translated here into a 503. Once PostgreSQL is
found away (a connection failed, or none could be had while the pool could still grow), reads stop waiting
out the pool's timeout: they take a connection within a tenth of a second or answer 503, until one
succeeds again (the pool reconnects in the background meanwhile).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import falcon
import psycopg
import psycopg_pool
from psycopg.rows import dict_row

from api.errors import BadRequest, ReadModelBehind, ServiceUnavailable
from projections import queries
from stratus import positions
from stratus.recent import Recent

log = logging.getLogger("stratus.api")

MIN_POSITION_HEADER = "X-Stratus-Min-Position"
MIN_POSITION_PARAM = "min_position"
POSITION_HEADER = "X-Stratus-Position"
# While PostgreSQL is away, how long a read waits for a connection (psycopg_pool's 0 would refuse even
# an idle one): long enough to take one the pool has reconnected in the background meanwhile.
AWAY_WAIT_SECONDS = 0.1


def open_pool(
    url: str, *, min_size: int = 1, max_size: int = 8, timeout: float = 10.0
) -> psycopg_pool.ConnectionPool:
    """The read side's pool: autocommit sessions (each query sees the latest committed batch)."""
    pool = psycopg_pool.ConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        timeout=timeout,
        kwargs={"autocommit": True, "row_factory": dict_row},
        configure=queries.read_json_with_orjson,
        open=False,
        name="stratus-api-read",
    )
    pool.open(wait=False)
    return pool


def min_position(req: falcon.Request) -> int | None:
    value = req.get_header(MIN_POSITION_HEADER)
    source = MIN_POSITION_HEADER
    if value is None:
        value = req.get_param(MIN_POSITION_PARAM)
        source = MIN_POSITION_PARAM
    if value is None:
        return None
    try:
        return positions.parse_natural(value)
    except ValueError:
        raise BadRequest(f"{source} must be a log position: a non-negative integer.") from None


def project_key(project_id: str) -> str:
    """Whose reads wait for a write to a project's resources: every user of that project."""
    return f"project:{project_id}"


class Written:
    """The last log position each user wrote at through this process (the most recent users kept)."""

    def __init__(self, size: int = 10_000) -> None:
        self._by_user: Recent[str, int] = Recent(size)

    def record(self, user_id: str, position: int) -> None:
        self._by_user.put(user_id, position, max)

    def last_of(self, keys: tuple[str, ...]) -> int | None:
        """The last position any of ``keys`` wrote at, None when none is known."""
        return max(self._by_user.get_each(keys), default=None)


class ReadModel:
    """The read model's connections, each one waiting until the model has applied what the caller wrote."""

    def __init__(
        self, pool: psycopg_pool.ConnectionPool, wait_seconds: float, written: Written | None = None
    ) -> None:
        self._pool = pool
        self._wait = wait_seconds
        self._written = written
        # True from a failure that showed PostgreSQL away until a connection is had again.
        self._away = threading.Event()

    def note(self, key: str, position: int) -> None:
        """Remember a write that concerns others than its writer (``key``: whom), for their reads."""
        if self._written is not None:
            self._written.record(key, position)

    def connection(
        self,
        req: falcon.Request,
        after: int | None = None,
        concerning: tuple[str, ...] = (),
        as_anyone: bool = False,
    ) -> Reading:
        """A connection to read with, once the read model has reached the request's minimum position
        (or ``after``: the position of a write the request itself just made), the last write of the
        request's actor (unless ``as_anyone``: the token's own check), and the last write ``note``d
        for any of ``concerning`` (another project's share of an image, say)."""
        position = min_position(req) if after is None else after
        if position is None and self._written is not None and not as_anyone:
            actor = getattr(req.context, "actor", None)
            own = (actor.user_id, project_key(actor.project_id)) if actor is not None else ()
            position = self._written.last_of((*own, *concerning))
        return Reading(self, position)

    def _taken(self, position: int | None) -> psycopg.Connection[Any]:
        try:
            # While PostgreSQL is away, no request waits out the pool's timeout.
            conn = self._pool.getconn(AWAY_WAIT_SECONDS if self._away.is_set() else None)
        except psycopg.OperationalError as e:  # the pool's timeout, or the pool closed
            raise self._unavailable(e) from e
        if self._away.is_set():
            self._away.clear()
        try:
            if position is not None and not queries.wait_for_position(conn, position, self._wait):
                raise ReadModelBehind(position, self._wait)
        except BaseException as e:
            self._returned(conn, e)
            raise
        return conn

    def _returned(self, conn: psycopg.Connection[Any], error: BaseException | None) -> None:
        """``conn`` back to the pool as psycopg_pool's ``connection()`` gives it back (committed, or
        rolled back after ``error``); PostgreSQL's or the pool's failure, ``error``'s included, a 503."""
        try:
            try:
                conn.__exit__(type(error) if error is not None else None, error, None)
            finally:
                self._pool.putconn(conn)
        except (psycopg_pool.PoolTimeout, psycopg.OperationalError) as e:
            raise self._unavailable(e) from e
        if isinstance(error, (psycopg_pool.PoolTimeout, psycopg.OperationalError)):
            raise self._unavailable(error) from error

    def _unavailable(self, e: psycopg_pool.PoolTimeout | psycopg.OperationalError) -> ServiceUnavailable:
        if isinstance(e, psycopg_pool.PoolTimeout):
            if self._pool.get_stats().get("pool_size", 0) < self._pool.max_size:
                self._away.set()  # not busy (it could have grown): it could not connect
            log.error("read-model pool exhausted or unreachable: %s", e)
            return ServiceUnavailable("The read model is busy or unreachable; retry.")
        self._away.set()
        log.error("read-model connection failed: %s", e)
        return ServiceUnavailable("The read model is unreachable; retry.")


class Reading:
    """``ReadModel.connection``: a pooled connection for the length of a ``with`` block (a class, not
    a generator's context manager, nor the pool's: two fewer generators to step through a request)."""

    __slots__ = ("_conn", "_position", "_read")

    def __init__(self, read: ReadModel, position: int | None) -> None:
        self._read = read
        self._position = position
        self._conn: psycopg.Connection[Any] | None = None

    def __enter__(self) -> psycopg.Connection[Any]:
        self._conn = self._read._taken(self._position)
        return self._conn

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            self._read._returned(conn, error)
