"""The event store's exceptions, all eventsourcing persistence errors so the library handles them.

nats-py's exceptions are translated into these where they enter (the recorder); nothing above the
event store sees a ``nats`` exception.
"""

from __future__ import annotations

from eventsourcing.persistence import DataError, IntegrityError, OperationalError, ProgrammingError

# The most events one append may hold: NATS's atomic batch limit, kept by every recorder (the
# in-memory one too, so that a unit test finds a decision too large for the log).
MAX_EVENTS_PER_APPEND = 1000

__all__ = [
    "MAX_EVENTS_PER_APPEND",
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
