"""The event store: eventsourcing recorders on one NATS JetStream stream.

``PERSISTENCE_MODULE=stratus.eventstore`` selects ``Factory``. Composition roots build one
``NatsBridge`` per process (after forking) and pass it in: ``Factory(bridge=..., settings=...)``.
See docs/eventstore.md for subjects, envelope, and guarantees.
"""

from stratus.eventstore.bridge import NatsBridge
from stratus.eventstore.envelope import Envelope, decode, decode_message, event_id
from stratus.eventstore.errors import (
    MAX_EVENTS_PER_APPEND,
    ConcurrentAppendError,
    EventStoreUnavailable,
    TooManyEventsError,
    TrackingNotSupportedError,
)
from stratus.eventstore.factory import Factory, part_store
from stratus.eventstore.recorder import (
    JetStreamAggregateRecorder,
    JetStreamApplicationRecorder,
    JetStreamSubscription,
)
from stratus.eventstore.subjects import SubjectLayout, decode_token, encode_token

__all__ = [
    "MAX_EVENTS_PER_APPEND",
    "ConcurrentAppendError",
    "Envelope",
    "EventStoreUnavailable",
    "Factory",
    "JetStreamAggregateRecorder",
    "JetStreamApplicationRecorder",
    "JetStreamSubscription",
    "NatsBridge",
    "SubjectLayout",
    "TooManyEventsError",
    "TrackingNotSupportedError",
    "decode",
    "decode_message",
    "decode_token",
    "encode_token",
    "event_id",
    "part_store",
]
