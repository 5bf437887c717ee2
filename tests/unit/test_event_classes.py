"""The explicit event classes and the projection tables built on them, checked without servers.

An event class declared in an aggregate must carry exactly the parameters of the method its
``@event`` decorates, in the same order: eventsourcing fills the event from the method's arguments
(a parameter the class lacks would be dropped silently) and records the fields in declaration order
(the payload on the log). The projections' tables must name only such classes, and the read
models' topics are computed from their table.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
from collections.abc import Iterable

import pytest
from eventsourcing.domain import Aggregate, CanMutateAggregate, _created_event_classes, decorated_funcs
from eventsourcing.utils import get_topic

import commands
from projections import identity, images, keypairs, metadefs, migrations, notifications, operations
from projections.readmodels import RULES, ReadModels

# Fields every event has from eventsourcing, not from the decorated method.
_BASE_FIELDS = {"originator_id", "originator_version", "timestamp", "originator_topic"}


def _aggregates() -> list[type[Aggregate]]:
    found = []
    for info in pkgutil.iter_modules(commands.__path__):
        module = importlib.import_module(f"commands.{info.name}")
        found += [
            c
            for _, c in inspect.getmembers(module, inspect.isclass)
            if issubclass(c, Aggregate) and c is not Aggregate and c.__module__ == module.__name__
        ]
    return found


def _decorated() -> list[tuple[type, type]]:
    """(aggregate, event class) for every event recorded by a decorated method, ``__init__`` included."""
    found = []
    for agg in _aggregates():
        init = vars(agg).get("__init__")
        created = _created_event_classes.get(agg, [])
        for ev in vars(agg).values():
            if not (inspect.isclass(ev) and issubclass(ev, CanMutateAggregate)):
                continue
            if ev in decorated_funcs or (hasattr(init, "decorated_func") and ev in created):
                found.append((agg, ev))
    return found


def _method(aggregate: type, event_class: type) -> object:
    if event_class in decorated_funcs:
        return decorated_funcs[event_class]
    return vars(aggregate)["__init__"].decorated_func


@pytest.mark.parametrize(("aggregate", "event_class"), _decorated(), ids=lambda c: c.__qualname__)
def test_an_event_class_carries_its_method_parameters_in_order(aggregate: type, event_class: type) -> None:
    method = _method(aggregate, event_class)
    params = [p for p in inspect.signature(method).parameters if p not in ("self", "id")]  # type: ignore[arg-type]
    fields = [f.name for f in dataclasses.fields(event_class) if f.name not in _BASE_FIELDS]
    assert fields == params
    assert get_topic(event_class) == f"{aggregate.__module__}:{aggregate.__qualname__}.{event_class.__name__}"


def test_every_decorated_event_is_declared_explicitly() -> None:
    """No event is made from a name any more: each decorated method's class is declared in the
    aggregate's body (eventsourcing subclasses it, so the declared class is among its bases)."""
    for aggregate, event_class in _decorated():
        declared = [b for b in event_class.__mro__[1:] if b.__qualname__ == event_class.__qualname__]
        assert declared, f"{event_class.__qualname__} is not declared in {aggregate.__qualname__}"


def test_the_tables_name_event_classes_of_aggregates() -> None:
    events = {ev for _, ev in _decorated()} | {
        ev for agg in _aggregates() for ev in vars(agg).values() if inspect.isclass(ev)
    }
    tables: list[Iterable[type]] = [RULES, identity.APPLY, images.APPLY, keypairs.APPLY, operations.APPLY]
    tables += [metadefs.APPLY, migrations.INSTANCE_MOVES, notifications.ANNOUNCE]
    for table in tables:
        assert set(table) <= events


def test_the_read_models_topics_come_from_their_table() -> None:
    assert ReadModels.handled == tuple(RULES)
    assert set(ReadModels.topics) == {get_topic(cls) for cls in RULES}
    for statements in (identity.APPLY, images.APPLY, keypairs.APPLY, operations.APPLY, metadefs.APPLY):
        assert set(statements) <= set(RULES)
