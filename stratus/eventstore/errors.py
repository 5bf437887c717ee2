"""The event store's exceptions, all eventsourcing persistence errors so the library handles them.

nats-py's exceptions are translated into these where they enter (the recorder); nothing above the
event store sees a ``nats`` exception.
"""

from __future__ import annotations

from eventsourcing.persistence import DataError, IntegrityError, OperationalError, ProgrammingError

__all__ = [
    "ConcurrentAppendError",
    "EventStoreUnavailable",
    "TooManyEventsError",
    "TrackingNotSupportedError",
]


class EventStoreUnavailable(OperationalError):
    """NATS did not answer before the call's deadline (down, restarting, or overloaded).

    For an append this means the outcome could not be established: nothing was acknowledged. The
    append is idempotent, so the same events may be appended again.
    """


class ConcurrentAppendError(IntegrityError):
    """An aggregate already has the version being appended: the writer's view was stale.

    Reload the aggregate, decide again, append again.
    """


class TooManyEventsError(DataError):
    """One append holds more events than one NATS atomic batch can carry (1000)."""


class TrackingNotSupportedError(ProgrammingError, NotImplementedError):
    """JetStream has no place for tracking records; read models track their position in PostgreSQL."""
