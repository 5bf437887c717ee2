"""A replay's decode, read below nats-py, gives for every event of a real log what the plain path gives.

The replay decodes with shortcuts (``projections.rawlog.HeaderBlock``'s lookups in the raw block, and
``StoredMessage.notification``'s, the projector's path, finding all five envelope headers in one method;
the ``Notification`` given its fields whole, originator ids parsed once per id); the reference here takes
none of them: nats-py's parsed headers, eventsourcing's own ``Notification`` constructor, ``UUID()``,
and eventsourcing's mapper on that notification, upcasters included.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

import orjson
import psycopg
from eventsourcing.persistence import Notification, StoredEvent

from commands.app import Stratus
from commands.flavor import Flavor
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
from tests.fixtures.projections import head, populate

DIGEST = "ab" * 32


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


def _requested_v4(app: Stratus) -> StoredEvent:
    """An instance request as version 4 of ``Instance.Requested`` recorded it (user data filed under
    its digest; no addresses, hostname, disk configuration or config drive), to be upcast to 7."""
    instance = Instance.request(
        uuid4(), name="old", project_id="p", user_id="u", flavor={"id": "f", "vcpus": 1},
        image_ref="img", metadata={}, availability_zone=None, request_key=None,
    )  # fmt: skip
    stored = app.mapper.to_stored_event(instance.collect_events()[0])
    state = orjson.loads(stored.state)
    for name in ("access_ip_v4", "access_ip_v6", "hostname", "disk_config", "config_drive"):
        del state[name]
    state.update(class_version=4, user_data={"sha256": DIGEST, "size": 5})
    return StoredEvent(stored.originator_id, stored.originator_version, stored.topic, orjson.dumps(state))


def _flavor_with_a_str_id(app: Stratus) -> StoredEvent:
    """A flavor's creation whose originator id was recorded as a string (``Stratus-Id-Type: str``)."""
    stored = app.mapper.to_stored_event(Flavor.create(flavorid="s1", name="s1", vcpus=1, ram=64, disk=1)
                                        .collect_events()[0])  # fmt: skip
    return StoredEvent(str(stored.originator_id), stored.originator_version, stored.topic, stored.state)


def test_the_replay_decodes_every_event_as_the_plain_path_does(
    app: Stratus, rm: psycopg.Connection[Any]
) -> None:
    populate(app, instances=12, hosts=2, chunk=6)
    app.recorder.insert_events([_requested_v4(app), _flavor_with_a_str_id(app)])
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
