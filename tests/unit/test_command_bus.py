"""The command registry and bus, without servers: every command reaches its handler with what the
handler asks for, and ``@retried`` decides again after a lost race (``UnitOfWork.retrying``)."""

from __future__ import annotations

import inspect
from typing import Any, cast

import pytest
from eventsourcing.persistence import IntegrityError

from commands.app import Stratus
from commands.bus import HANDLERS, bootstrap
from commands.errors import Conflict
from commands.unit_of_work import UnitOfWork, retried

NO_APP = cast(Stratus, object())  # nothing here touches the log


def test_every_handler_takes_its_command_and_gets_every_dependency_it_names() -> None:
    bus = bootstrap(NO_APP)
    for command, handler in HANDLERS.items():
        _cmd, uow, *wanted = inspect.signature(handler).parameters
        assert uow == "uow", handler
        assert set(wanted) <= set(bus.dependencies), (command.__name__, wanted)
        assert command.__doc__, f"{command.__name__} has no docstring"


def test_a_command_without_a_handler_is_refused() -> None:
    with pytest.raises(TypeError, match="no handler for object"):
        bootstrap(NO_APP).handle(object())


def test_retried_decides_again_after_a_lost_race_then_reports_a_conflict() -> None:
    calls: list[int] = []

    @retried
    def losing(cmd: Any, uow: UnitOfWork) -> None:
        calls.append(cmd)
        raise IntegrityError("another writer appended first")

    with pytest.raises(Conflict):
        losing(7, UnitOfWork(NO_APP, attempts=3))
    assert calls == [7, 7, 7]


def test_an_extended_bus_keeps_its_group_commit_unless_the_network_changes() -> None:
    bus = bootstrap(NO_APP)
    assert bus.extended(image_limits=None).dependencies["create_groups"] is bus.dependencies["create_groups"]
    assert bus.extended(network=None).dependencies["create_groups"] is not bus.dependencies["create_groups"]
