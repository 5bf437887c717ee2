"""Every event the code emits validates against its published schema in schemas/.

The scenario drives every command through the real JetStream event store, then reads the log back
as CloudEvents envelopes: each envelope must match schemas/envelope.v1.json and its data the schema
of its type and version. A second test makes sure no event class lacks a schema.
"""

from __future__ import annotations

import schemas
from tests.fixtures.every_event import emit_every_event, event_classes
from tests.fixtures.facades.handlers import Handlers


def test_every_emitted_event_validates_against_its_schema(handlers: Handlers) -> None:
    emit_every_event(handlers)
    envelopes = handlers.app.recorder.read_envelopes(1, 1000)  # type: ignore[attr-defined]
    seen = set()
    for envelope in envelopes:
        doc = envelope.to_dict()
        errors = [e.message for e in schemas.validator("envelope.v1.json").iter_errors(doc)]
        assert errors == [], (doc["type"], errors)
        _, kind, type_ = doc["type"].split(".")
        name = schemas.event_schema_name(kind, type_, doc["schemaversion"])
        errors = [f"{list(e.path)}: {e.message}" for e in schemas.validator(name).iter_errors(doc["data"])]
        assert errors == [], (name, errors)
        assert doc["actoruser"] == "u1" and doc["actorproject"] == "p1"
        seen.add((kind, type_))
    # the scenario really did emit every event type there is
    assert sorted(seen) == event_classes()


def test_schemas_reject_what_they_should(handlers: Handlers) -> None:
    """The schemas are not vacuous: a wrong type, an unknown field and a missing field all fail."""
    v = schemas.validator(schemas.event_schema_name("instance", "spawned"))
    good = {"timestamp": "2026-01-01T00:00:00Z", "power_state": 1}
    assert v.is_valid(good)
    assert not v.is_valid({**good, "power_state": "running"})
    assert not v.is_valid({**good, "extra": 1})
    assert not v.is_valid({"timestamp": "2026-01-01T00:00:00Z"})
    assert not v.is_valid({**good, "timestamp": "yesterday"})


def test_every_event_class_has_a_schema() -> None:
    classes = event_classes()
    assert len(classes) >= 12
    names = set(schemas.event_schema_names())
    missing = [f"{k}.{t}" for k, t in classes if schemas.event_schema_name(k, t) not in names]
    assert missing == []
