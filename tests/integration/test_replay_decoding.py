"""A replay's decode, read below nats-py, gives for every event of a real log what the plain path gives.

The replay decodes with shortcuts (``projections.rawlog.HeaderBlock``'s lookups in the raw block, and
``StoredMessage.notification``'s, the projector's path, finding all five envelope headers in one method;
the ``Notification`` given its fields whole, originator ids parsed once per id); the reference here takes
none of them: nats-py's parsed headers, eventsourcing's own ``Notification`` constructor, ``UUID()``,
and eventsourcing's mapper on that notification, upcasters included.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import Notification

from commands.app import Stratus
from commands.instance import Instance
from projections.projector import Projector
from projections.rawlog import RawLog, StoredMessage, replay_log
from projections.readmodels import ReadModels
from stratus.eventstore.envelope import (
    CE_ORIGINATORVERSION,
    CE_SUBJECT,
    CE_TOPIC,
    ID_TYPE,
    NATS_SEQUENCE,
    decode_notification,
)
from tests.fixtures.odd_events import DIGEST, flavor_with_a_str_id, requested_v4
from tests.fixtures.projections import head, populate


def _reference(msg: Any) -> Notification:
    """A nats-py message's notification, built the plain way."""
    headers = msg.headers
    raw_id = headers[CE_SUBJECT]
    return Notification(
        originator_id=UUID(raw_id) if headers.get(ID_TYPE) == "uuid" else raw_id,
        originator_version=int(headers[CE_ORIGINATORVERSION]),
        topic=headers[CE_TOPIC],
        state=bytes(msg.data),
        id=int(headers[NATS_SEQUENCE]),
    )


def test_the_replay_decodes_every_event_as_the_plain_path_does(
    app: Stratus, rm: psycopg.Connection[Any]
) -> None:
    populate(app, instances=12, hosts=2, chunk=6)
    app.recorder.insert_events([requested_v4(app), flavor_with_a_str_id(app)])
    plain = app.recorder.read_messages(1, 10_000)  # type: ignore[attr-defined]  # nats-py's messages
    assert len(plain) == head(app)
    with replay_log(app.recorder) as source:  # type: ignore[arg-type]
        assert isinstance(source, RawLog)
        raw = source.read_messages(1, 10_000)
        entries = Projector(source, app.mapper, rm, schema="unused", batch_size=10_000).fetch(0).entries
    assert len(raw) == len(entries) == len(plain)
    topics: set[str] = set()
    upcast: Any = None
    str_id: Any = None
    for stored, entry, msg in zip(raw, entries, plain, strict=True):
        reference = _reference(msg)
        assert type(stored) is StoredMessage
        for notification in (decode_notification(stored), stored.notification()):
            assert type(notification) is Notification
            assert notification == reference and vars(notification) == vars(reference)
            assert hash(notification) == hash(reference)
        assert (entry.position, entry.topic, entry.originator_id, entry.error) == (
            reference.id, reference.topic, reference.originator_id, None
        )  # fmt: skip
        assert reference.topic in ReadModels.topics
        event = app.mapper.to_domain_event(reference)
        assert type(entry.event) is type(event) and vars(entry.event) == vars(event)
        topics.add(reference.topic)
        if isinstance(event, Instance.Requested) and event.name == "old":
            upcast = entry.event
        if isinstance(reference.originator_id, str):
            str_id = entry.event
    assert len(topics) >= 8  # the lifecycle's instance, host and flavor events
    assert upcast is not None and upcast.user_data == {"id": DIGEST, "size": 5}  # upcast from 4 to 7
    assert upcast.config_drive is False
    assert str_id is not None and isinstance(str_id.originator_id, UUID)  # the mapper's conversion
