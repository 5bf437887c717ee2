"""The rungs from the push read floor to a rebuild: each does one step more of what a replay must do.

All read the log on the same ordered push consumer as the floor (``RawNats.push_stream``, a blocking
socket, no client library), and each rung adds one step of the work any replay of this design does:

- ``payload``: each event's JSON payload parsed with orjson, nothing else;
- ``parsed``: each event's envelope values (``ce-subject``, ``Stratus-Id-Type``,
  ``ce-originatorversion``, ``ce-topic`` from its headers, its position from the ack reply: the five
  ``envelope.decode_notification`` reads) and its JSON payload parsed with orjson. The least any
  replay does: it must read what each event says.
- ``mapped``: instead of the bare parse, the same values made the ``Notification`` the projector
  decodes (``envelope.notification_of``), and eventsourcing's mapper (``Mapper.to_domain_event``:
  the transcoder's orjson and timestamp, the upcasters) turning each event the read models show
  into its domain event: the input the projection functions take, with nothing of our reader.

Then our own code on the same kind of read: ``our_read`` (``RawLog.read_messages`` in batches, the
frames made ``StoredMessage``s, as the rebuild's reader thread reads, not decoded), and the existing
``Projector.fetch`` below nats-py and the rebuild in ``bench_rebuild``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

import orjson
from eventsourcing.persistence import Mapper

from projections.rawlog import RawLog
from projections.readmodels import ReadModels
from stratus.audit.rawreader import RawReader
from stratus.eventstore import JetStreamApplicationRecorder
from stratus.eventstore.envelope import (
    CE_ORIGINATORVERSION,
    CE_SUBJECT,
    CE_TOPIC,
    ID_TYPE,
    notification_of,
)
from tests.bench.rawnats import Handler

# Each stored envelope line a replay reads starts ``\r\n<name>: ``, as the event store writes it.
_SUBJECT, _ID_TYPE, _VERSION, _TOPIC = (
    b"\r\n" + name.encode() + b": " for name in (CE_SUBJECT, ID_TYPE, CE_ORIGINATORVERSION, CE_TOPIC)
)


def _values(block: bytes, reply: bytes) -> tuple[str, bool, int, str, int]:
    """(raw id, whether it is a UUID, originator version, topic, position) of one delivered event: each
    header's line found once, each search starting where the one before ended (the stored block has
    each once, written in this order as the event store writes it: ``envelope.build_headers``), the
    stream sequence from the ack reply (``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.
    <ts>.<pending>``). Written out for the least Python: a loop over the four names, or one regular
    expression for them all, cost ~10 % more."""
    find = block.find
    subject = find(_SUBJECT) + len(_SUBJECT)
    subject_end = find(b"\r\n", subject)
    version = find(_VERSION, subject_end) + len(_VERSION)
    version_end = find(b"\r\n", version)
    topic = find(_TOPIC, version_end) + len(_TOPIC)
    topic_end = find(b"\r\n", topic)
    return (
        block[subject:subject_end].decode(),
        block.startswith(b"uuid\r\n", find(_ID_TYPE, topic_end) + len(_ID_TYPE)),
        int(block[version:version_end]),
        block[topic:topic_end].decode(),
        int(reply.rsplit(b".", 4)[1]),
    )


def payload() -> Handler:
    """Rung (b1): the payload parsed (orjson), nothing else."""

    def handle(block: bytes, body: bytes, reply: bytes) -> object:
        return orjson.loads(body)

    return handle


def parsed() -> Handler:
    """Rung (b): the five envelope values and the payload, parsed."""

    def handle(block: bytes, body: bytes, reply: bytes) -> object:
        return _values(block, reply), orjson.loads(body)

    return handle


def mapped(mapper: Mapper[UUID]) -> Handler:
    """Rung (c), least: the ``Notification`` of the five values, and eventsourcing's mapper's domain
    event of each event the read models show (as ``Projector._entry`` decides)."""
    topics = frozenset(ReadModels.topics)
    to_domain_event = mapper.to_domain_event

    def handle(block: bytes, body: bytes, reply: bytes) -> object:
        raw_id, uuid_id, version, topic, position = _values(block, reply)
        notification = notification_of(raw_id, uuid_id, version, topic, body, position)
        return to_domain_event(notification) if topic in topics else notification

    return handle


def our_read(recorder: JetStreamApplicationRecorder, urls: tuple[str, ...], batch: int) -> Callable[[], int]:
    """Our reader on the push consumer, as a rebuild's reader thread reads (``RawLog.read_messages``
    in batches of ``batch``: frames, ``StoredMessage``s), counting, nothing decoded."""

    def read() -> int:
        raw_log = RawLog(recorder, RawReader(urls, recorder.stream))
        total = 0
        try:
            while msgs := raw_log.read_messages(total + 1, batch):
                total += len(msgs)
        finally:
            raw_log.close()
        return total

    return read


def checked(handler: Handler, sink: list[Any]) -> Handler:
    """``handler``, its answers kept in ``sink`` (to check a rung decodes what the projector does)."""

    def handle(block: bytes, body: bytes, reply: bytes) -> object:
        sink.append(handler(block, body, reply))
        return None

    return handle
