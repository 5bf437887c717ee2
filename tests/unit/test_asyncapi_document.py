"""The AsyncAPI document (schemas/asyncapi.json): up to date, a channel per event class, no
dangling reference."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any

import orjson
from eventsourcing.domain import Aggregate, CanMutateAggregate, _created_event_classes
from eventsourcing.utils import get_topic

import commands
import schemas
from schemas import asyncapi
from stratus.eventstore import SubjectLayout


def event_classes() -> list[type[Any]]:
    """Every concrete event class of every aggregate in the commands package (modules found, not listed)."""
    found: dict[str, type[Any]] = {}
    for info in pkgutil.iter_modules(commands.__path__):
        module = importlib.import_module(f"commands.{info.name}")
        for _, agg in inspect.getmembers(module, inspect.isclass):
            if not issubclass(agg, Aggregate) or agg is Aggregate or agg.__module__ != module.__name__:
                continue
            members = [
                m for m in vars(agg).values() if inspect.isclass(m) and issubclass(m, CanMutateAggregate)
            ]
            created = _created_event_classes[agg]
            for m in members:
                if any(o is not m and issubclass(o, m) for o in members):
                    continue
                if m.__name__ == "Created" and m not in created:
                    continue
                found[get_topic(m)] = m
    return [found[t] for t in sorted(found)]


def test_the_document_is_up_to_date() -> None:
    committed = asyncapi.path().read_bytes()
    assert orjson.loads(committed) == asyncapi.document(), (
        "schemas/asyncapi.json is stale: run `python -m schemas.asyncapi --write`"
    )
    assert committed.startswith(b'{\n  "asyncapi": "3.0.0"')


def test_every_event_class_has_its_subject_as_a_channel() -> None:
    doc = asyncapi.document()
    layout = SubjectLayout(asyncapi.DEFAULT_PREFIX)
    addresses = {c["address"]: name for name, c in doc["channels"].items()}
    classes = event_classes()
    assert len(classes) >= 12
    missing = []
    for cls in classes:
        topic = get_topic(cls)
        address = layout.subject("ID", topic).replace(".ID.", ".{id}.")
        channel = addresses.get(address)
        if channel is None:
            missing.append(topic)
            continue
        version = getattr(cls, "class_version", 1)
        versions = [m["$ref"].rsplit(".v", 1)[1] for m in doc["channels"][channel]["messages"].values()]
        assert str(version) in versions, (topic, version, versions)
    assert missing == []


def test_messages_reference_schemas_that_exist() -> None:
    doc = asyncapi.document()
    names = set(schemas.event_schema_names())
    for key, message in doc["components"]["messages"].items():
        ref = message["payload"]["$ref"]
        if key.startswith("notification."):
            schemas.load(ref)
            continue
        assert ref in names, ref
        assert message["name"] == "stratus." + ".".join(ref.removeprefix("events/").split(".")[:2])
    for name, channel in doc["channels"].items():
        for ref in channel["messages"].values():
            assert ref["$ref"].removeprefix("#/components/messages/") in doc["components"]["messages"], name
    for op in doc["operations"].values():
        assert op["channel"]["$ref"].removeprefix("#/channels/") in doc["channels"]
