"""The envelope: every event on the stream is a CloudEvent (1.0, NATS binding, binary content mode).

Any NATS client can read the log without Python or eventsourcing: the attributes travel as ``ce-*``
headers, the body is the event's JSON payload. ``Envelope`` is the same information in Python, and
``Envelope.to_json()`` its structured-mode form (``schemas/envelope.v1.json``) for HTTP feeds.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import orjson
from eventsourcing.persistence import Notification, StoredEvent

from stratus.context import CommandContext
from stratus.eventstore.subjects import kind_and_type

SPECVERSION = "1.0"
JSON = "application/json"
OCTETS = "application/octet-stream"

# CloudEvents attributes (NATS binding: "ce-" + attribute name; datacontenttype is content-type).
CE_SPECVERSION = "ce-specversion"
CE_ID = "ce-id"
CE_SOURCE = "ce-source"
CE_TYPE = "ce-type"
CE_SUBJECT = "ce-subject"
CE_TIME = "ce-time"
CONTENT_TYPE = "content-type"
CE_CORRELATIONID = "ce-correlationid"
CE_CAUSATIONID = "ce-causationid"
CE_ACTORUSER = "ce-actoruser"
CE_ACTORPROJECT = "ce-actorproject"
CE_ACTORROLES = "ce-actorroles"
CE_REQUESTID = "ce-requestid"
CE_SCHEMAVERSION = "ce-schemaversion"
CE_ORIGINATORVERSION = "ce-originatorversion"
CE_TOPIC = "ce-topic"
# Not CloudEvents attributes: how to give the originator id back with its Python type, and which
# append (one call of insert_events) wrote the message, to resolve an ambiguous publish.
ID_TYPE = "Stratus-Id-Type"
APPEND_ID = "Stratus-Append-Id"
# Set by NATS.
NATS_MSG_ID = "Nats-Msg-Id"
NATS_SEQUENCE = "Nats-Sequence"
NATS_SUBJECT = "Nats-Subject"

_MISSING: Any = object()


def event_id(originator_id: UUID | str, originator_version: int) -> str:
    """The event's id, also its ``Nats-Msg-Id``: unique per aggregate version."""
    return f"{originator_id}:{originator_version}"


def _now_rfc3339() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _inspect_state(state: bytes) -> tuple[str, str, int]:
    """(content type, time, schema version) read from a stored event's JSON state."""
    if not state.startswith(b"{"):
        return OCTETS, _now_rfc3339(), 1
    try:
        obj = orjson.loads(state)
    except orjson.JSONDecodeError:
        return OCTETS, _now_rfc3339(), 1
    if not isinstance(obj, dict):
        return JSON, _now_rfc3339(), 1
    ts = obj.get("timestamp")
    if isinstance(ts, dict):  # eventsourcing's JSONTranscoder: {"_type_": "datetime_iso", "_data_": ...}
        ts = ts.get("_data_")
    time = ts if isinstance(ts, str) and ts else _now_rfc3339()
    version = obj.get("class_version", 1)
    return JSON, time, version if isinstance(version, int) else 1


def build_headers(
    stored_event: StoredEvent, context: CommandContext, *, source: str, append_id: str
) -> dict[str, str]:
    """The NATS headers of one stored event: CloudEvents attributes and the id's type."""
    content_type, time, schema_version = _inspect_state(stored_event.state)
    kind, type_ = kind_and_type(stored_event.topic)
    actor = context.actor
    subject = str(stored_event.originator_id)
    eid = event_id(subject, stored_event.originator_version)  # the id's str() made once
    return {
        NATS_MSG_ID: eid,
        CE_SPECVERSION: SPECVERSION,
        CE_ID: eid,
        CE_SOURCE: source,
        CE_TYPE: f"stratus.{kind}.{type_.lower()}",
        CE_SUBJECT: subject,
        CE_TIME: time,
        CONTENT_TYPE: content_type,
        CE_CORRELATIONID: context.correlation_id,
        CE_CAUSATIONID: context.causation_id,
        CE_ACTORUSER: actor.user_id,
        CE_ACTORPROJECT: actor.project_id,
        CE_ACTORROLES: ",".join(actor.roles),
        CE_REQUESTID: context.request_id,
        CE_SCHEMAVERSION: str(schema_version),
        CE_ORIGINATORVERSION: str(stored_event.originator_version),
        CE_TOPIC: stored_event.topic,
        ID_TYPE: "uuid" if isinstance(stored_event.originator_id, UUID) else "str",
        APPEND_ID: append_id,
    }


@dataclass(frozen=True)
class Envelope:
    """One event as a CloudEvent, with its position (stream sequence) on the log."""

    position: int
    id: str
    source: str
    type: str
    subject: str
    time: str
    datacontenttype: str
    data: bytes
    topic: str
    originator_id: UUID | str
    originator_version: int
    schemaversion: int
    correlationid: str
    causationid: str
    actoruser: str
    actorproject: str
    actorroles: tuple[str, ...]
    requestid: str
    nats_subject: str = ""
    specversion: str = SPECVERSION

    def to_dict(self) -> dict[str, Any]:
        """Structured-mode CloudEvents JSON (``schemas/envelope.v1.json``), data inlined."""
        d: dict[str, Any] = {
            "specversion": self.specversion,
            "id": self.id,
            "source": self.source,
            "type": self.type,
            "subject": self.subject,
            "time": self.time,
            "datacontenttype": self.datacontenttype,
            "position": self.position,
            "originatorversion": self.originator_version,
            "schemaversion": self.schemaversion,
            "topic": self.topic,
            "correlationid": self.correlationid,
            "causationid": self.causationid,
            "actoruser": self.actoruser,
            "actorproject": self.actorproject,
            "actorroles": ",".join(self.actorroles),
            "requestid": self.requestid,
        }
        if self.datacontenttype == JSON:
            d["data"] = orjson.loads(self.data)
        else:
            d["data_base64"] = base64.b64encode(self.data).decode()
        return d

    def to_json(self) -> bytes:
        return orjson.dumps(self.to_dict())


# ``Notification(...)`` sets each of its five fields with ``object.__setattr__`` (a frozen
# dataclass): a third of a microsecond per event more than giving it its ``__dict__`` whole, the way
# eventsourcing's mapper builds domain events. Where the class is not that plain dataclass (a
# library upgrade adding slots, fields or a ``__post_init__``), the constructor is used.
_FIELDS = ("originator_id", "originator_version", "topic", "state", "id")
_PLAIN_NOTIFICATION = (
    tuple(f.name for f in dataclasses.fields(Notification)) == _FIELDS
    and not hasattr(Notification, "__slots__")
    and not hasattr(Notification, "__post_init__")
)


def _new_notification(
    originator_id: UUID | str, originator_version: int, topic: str, state: bytes, position: int
) -> Notification:
    """``Notification(originator_id=..., originator_version=..., topic=..., state=..., id=position)``."""
    if not _PLAIN_NOTIFICATION:
        return Notification(originator_id, originator_version, topic, state, position)
    notification = object.__new__(Notification)
    object.__setattr__(
        notification,
        "__dict__",
        {
            "originator_id": originator_id,
            "originator_version": originator_version,
            "topic": topic,
            "state": state,
            "id": position,
        },
    )
    return notification


# An aggregate's events carry its id again and again (a replay, an aggregate's load): parsed once.
# The same UUID object is shared by those events' notifications (UUIDs are immutable).
_uuid = functools.lru_cache(maxsize=4096)(UUID)


def _notification(headers: Mapping[str, str], data: bytes, position: int) -> Notification:
    # ``get`` and KeyError rather than ``headers[name]``: one call instead of two on a ``HeaderBlock``
    if (raw_id := headers.get(CE_SUBJECT, _MISSING)) is _MISSING:
        raise KeyError(CE_SUBJECT)
    originator_id = _uuid(raw_id) if headers.get(ID_TYPE) == "uuid" else raw_id
    if (version := headers.get(CE_ORIGINATORVERSION, _MISSING)) is _MISSING:
        raise KeyError(CE_ORIGINATORVERSION)
    originator_version = int(version)
    if (topic := headers.get(CE_TOPIC, _MISSING)) is _MISSING:
        raise KeyError(CE_TOPIC)
    return _new_notification(originator_id, originator_version, topic, data, position)


def notification_of(
    raw_id: str, uuid_id: bool, originator_version: int, topic: str, state: bytes, position: int
) -> Notification:
    """The Notification ``decode_notification`` makes of a stored message whose envelope headers a
    reader found itself (``projections.rawlog``): ``ce-subject`` (``raw_id``), whether
    ``Stratus-Id-Type`` is ``uuid``, ``ce-originatorversion``, ``ce-topic``, the body, ``Nats-Sequence``.
    Raises ``ValueError`` for an id said to be a UUID that is not one, as ``decode_notification`` does."""
    return _new_notification(_uuid(raw_id) if uuid_id else raw_id, originator_version, topic, state, position)


def decode(
    headers: Mapping[str, str], data: bytes, *, position: int, nats_subject: str = ""
) -> tuple[Notification, Envelope]:
    """A stored message (headers, body, stream sequence) as a Notification and its Envelope."""
    notification = _notification(headers, data, position)
    raw_id = headers[CE_SUBJECT]
    originator_id, version, topic = (
        notification.originator_id,
        notification.originator_version,
        notification.topic,
    )
    roles = headers.get(CE_ACTORROLES, "")
    envelope = Envelope(
        position=position,
        id=headers.get(CE_ID, event_id(originator_id, version)),
        source=headers.get(CE_SOURCE, ""),
        type=headers.get(CE_TYPE, ""),
        subject=raw_id,
        time=headers.get(CE_TIME, ""),
        datacontenttype=headers.get(CONTENT_TYPE, JSON),
        data=data,
        topic=topic,
        originator_id=originator_id,
        originator_version=version,
        schemaversion=int(headers.get(CE_SCHEMAVERSION, "1")),
        correlationid=headers.get(CE_CORRELATIONID, ""),
        causationid=headers.get(CE_CAUSATIONID, ""),
        actoruser=headers.get(CE_ACTORUSER, ""),
        actorproject=headers.get(CE_ACTORPROJECT, ""),
        actorroles=tuple(r for r in roles.split(",") if r),
        requestid=headers.get(CE_REQUESTID, ""),
        nats_subject=nats_subject or headers.get(NATS_SUBJECT, ""),
    )
    return notification, envelope


# The topic under which ``decode_message_leniently`` answers a stored message whose envelope cannot
# be read (headers missing or malformed: a message published by something other than the event
# store), for readers that show the log (history, the event stream) and go on past it.
UNDECODABLE_TOPIC = "stratus.eventstore:Undecodable"


def decode_message_leniently(msg: Any) -> tuple[Notification, Envelope]:
    """``decode_message``, with a placeholder (``UNDECODABLE_TOPIC``) for a message it cannot read."""
    try:
        return decode_message(msg)
    except (KeyError, ValueError):
        headers: Mapping[str, str] = msg.headers or {}
        seq = headers.get(NATS_SEQUENCE)
        position = int(seq) if seq is not None else int(msg.metadata.sequence.stream)
        return _undecodable(headers, bytes(msg.data), position, headers.get(NATS_SUBJECT, msg.subject))


def decode_notification(msg: Any) -> Notification:
    """``decode_message``'s Notification alone, for readers that need no CloudEvents attributes (the
    projector, rebuilds, aggregate loads): half the cost, since the envelope's 20 fields are not built.
    Raises what ``decode_message`` raises."""
    headers: Mapping[str, str] = msg.headers or {}
    seq = headers.get(NATS_SEQUENCE)
    position = int(seq) if seq is not None else int(msg.metadata.sequence.stream)
    return _notification(headers, bytes(msg.data), position)


def decode_message(msg: Any) -> tuple[Notification, Envelope]:
    """A nats-py message from this stream (direct get or a JetStream consumer) → (Notification, Envelope).

    The position comes from the ``Nats-Sequence`` header (direct get) or the consumer's ack metadata.
    A message whose envelope headers are missing or malformed raises ``KeyError`` or ``ValueError``:
    the parts that follow the log quarantine it (``stratus.quarantine``).
    """
    headers: Mapping[str, str] = msg.headers or {}
    seq = headers.get(NATS_SEQUENCE)
    if seq is not None:
        position = int(seq)
        subject = headers.get(NATS_SUBJECT, msg.subject)
    else:
        position = int(msg.metadata.sequence.stream)
        subject = msg.subject
    return decode(headers, bytes(msg.data), position=position, nats_subject=subject)


def _undecodable(
    headers: Mapping[str, str], data: bytes, position: int, subject: str
) -> tuple[Notification, Envelope]:
    raw_id = str(headers.get(CE_SUBJECT, ""))[:200]
    notification = Notification(
        originator_id=raw_id, originator_version=0, topic=UNDECODABLE_TOPIC, state=data, id=position
    )
    envelope = Envelope(
        position=position, id="", source="", type="stratus.undecodable", subject=raw_id, time="",
        datacontenttype=JSON, data=data, topic=UNDECODABLE_TOPIC, originator_id=raw_id,
        originator_version=0, schemaversion=1, correlationid="", causationid="", actoruser="",
        actorproject="", actorroles=(), requestid="", nats_subject=subject,
    )  # fmt: skip
    return notification, envelope
