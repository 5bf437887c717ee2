"""A server's instance actions (Nova's ``os-instance-actions``), folded from its events on the log.

The log already holds everything Nova keeps in its ``instance_actions`` tables: each user request
starts an action (the event it appended names the request id, the user and the project in its
envelope), and the events the scheduler and the hypervisor appended in reaction carry the same
correlation id, with their times and outcomes. So the actions are a pure function of the server's
history, read from the log when asked: no table to keep in step, and an auditor sees the same thing
replaying the log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from commands.actions import ACTIONS
from commands.instance import Instance
from stratus.eventstore.envelope import Envelope

SUCCESS = "Success"
ERROR = "Error"
BUILD_EVENT = "compute__do_build_and_run_instance"
SCHEDULE_EVENT = "conductor_schedule_and_build_instances"
DELETE_EVENT = "compute_terminate_instance"


@dataclass
class ActionEvent:
    """One step of an action (Nova's instance action event): what ran, when, how it ended, where."""

    event: str
    start_time: str
    finish_time: str | None = None
    result: str | None = None
    traceback: str | None = None  # the fault's details, for admins
    message: str | None = None  # the fault's message (Nova's 2.84 ``details``), for everyone
    host: str | None = None  # where it ran: the server's host then (None before it had one)


@dataclass
class InstanceAction:
    """One user request on a server and its steps (Nova's instance action), as ``os-instance-actions``
    shows it."""

    action: str
    request_id: str
    user_id: str
    project_id: str
    start_time: str
    updated_at: str
    events: list[ActionEvent] = field(default_factory=list)

    @property
    def message(self) -> str | None:
        return ERROR if any(e.result == ERROR for e in self.events) else None

    def open_event(self, name: str) -> ActionEvent | None:
        return next((e for e in reversed(self.events) if e.event == name and e.finish_time is None), None)


def _type(envelope: Envelope) -> str:
    return envelope.type.rsplit(".", 1)[-1]


def _data(envelope: Envelope) -> dict[str, Any]:
    try:
        data = orjson.loads(envelope.data)
    except orjson.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def nova_time(rfc3339: str) -> str:
    """Nova prints action times as naive ISO 8601 in UTC with microseconds."""
    return (
        datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))
        .replace(tzinfo=None)
        .isoformat(timespec="microseconds")
    )


def _kind(event_class: type) -> str:
    """The name an event class goes by in its envelope's type (``stratus.instance.<name>``)."""
    return event_class.__name__.lower()


Step = Callable[[InstanceAction, dict[str, Any], str], None]  # (the action, the event's data, when)


def _open(event: str, finished: bool = False) -> Step:
    """The step opens Nova's action event ``event`` (``finished``: one that ends as it starts)."""

    def step(action: InstanceAction, data: dict[str, Any], when: str) -> None:
        if finished:
            action.events.append(ActionEvent(event, when, when, SUCCESS))
        else:
            action.events.append(ActionEvent(event, when))

    return step


def _close(event: str, following: str | None = None) -> Step:
    """The step ends the open action event ``event`` well (and opens ``following``, the next)."""

    def step(action: InstanceAction, data: dict[str, Any], when: str) -> None:
        _finish(action.open_event(event), when, SUCCESS)
        if following is not None:
            action.events.append(ActionEvent(following, when))

    return step


def _succeeded(action: InstanceAction, data: dict[str, Any], when: str) -> None:
    for event in action.events:
        _finish(event, when, SUCCESS)


def _failed(action: InstanceAction, data: dict[str, Any], when: str) -> None:
    details = str(data.get("details") or data.get("message") or "")
    for event in action.events:
        _finish(event, when, ERROR, details, str(data.get("message") or "") or None)


def _power_action(action: InstanceAction, data: dict[str, Any], when: str) -> None:
    action.events.append(ActionEvent(ACTIONS[data["action"]].event, when))


# The events a user's request appended: each starts an action, named here (or from its data), and
# opens its first step.
MIGRATE_EVENT = "conductor_migrate_server"
_STARTERS: dict[str, tuple[Callable[[dict[str, Any]], str], Step]] = {
    _kind(Instance.Requested): (lambda data: "create", _open(SCHEDULE_EVENT)),
    _kind(Instance.DeletionRequested): (lambda data: "delete", _open(DELETE_EVENT)),
    _kind(Instance.Locked): (lambda data: "lock", lambda action, data, when: None),
    _kind(Instance.Unlocked): (lambda data: "unlock", lambda action, data, when: None),
    _kind(Instance.UnshelveRequested): (lambda data: "unshelve", _open(SCHEDULE_EVENT)),
    _kind(Instance.ResizeConfirmed): (
        lambda data: "confirmResize",
        _open("compute_confirm_resize", finished=True),
    ),
    _kind(Instance.RevertRequested): (lambda data: "revertResize", _open("compute_revert_resize")),
    _kind(Instance.ActionRequested): (lambda data: ACTIONS[data["action"]].name, _power_action),
    _kind(Instance.MigrationRequested): (
        lambda data: "resize" if data.get("migration_type") == "resize" else "migrate",
        _open(MIGRATE_EVENT),
    ),
}
# The events appended in reaction (same correlation id): how each moves its action on. A move's
# steps close their own event and open the next one.
_STEPS: dict[str, Step] = {
    _kind(Instance.Scheduled): _close(SCHEDULE_EVENT),
    _kind(Instance.SpawningStarted): _open(BUILD_EVENT),
    _kind(Instance.Spawned): _close(BUILD_EVENT),
    _kind(Instance.MigrationScheduled): _close(MIGRATE_EVENT, "compute_resize_instance"),
    _kind(Instance.MigratedFromSource): _close("compute_resize_instance", "compute_finish_resize"),
    _kind(Instance.RevertedOnDest): _close("compute_revert_resize", "compute_finish_revert_resize"),
    **dict.fromkeys(
        map(
            _kind,
            (Instance.ActionFinished, Instance.Deleted, Instance.MigrationFinished, Instance.ResizeReverted),
        ),
        _succeeded,
    ),
    **dict.fromkeys(
        map(
            _kind,
            (Instance.Faulted, Instance.ActionFailed, Instance.MigrationFailed, Instance.UnshelveFailed),
        ),
        _failed,
    ),
}


def fold(envelopes: list[Envelope]) -> list[InstanceAction]:
    """The actions of one server, oldest first, from its events in log order."""
    actions: list[InstanceAction] = []
    by_correlation: dict[str, InstanceAction] = {}
    host: str | None = None
    for env in envelopes:
        kind, data, when = _type(env), _data(env), nova_time(env.time)
        if isinstance(data.get("host"), str):
            host = data["host"]
        starter = _STARTERS.get(kind)
        if starter is not None:
            name, first = starter
            action = InstanceAction(name(data), env.requestid, env.actoruser, env.actorproject, when, when)
            actions.append(action)
            by_correlation[env.correlationid or env.requestid] = action
            first(action, data, when)
            _at(action, host)
            continue
        found = by_correlation.get(env.correlationid)
        if found is None:
            continue  # not caused by a user's request (none such yet): no action to file it under
        found.updated_at = when
        step = _STEPS.get(kind)
        if step is not None:
            step(found, data, when)
        _at(found, host)
    return actions


def _at(action: InstanceAction, host: str | None) -> None:
    """Events that have no host yet ran where the server is now (its first, at its placement)."""
    for event in action.events:
        if event.host is None:
            event.host = host


def _finish(
    event: ActionEvent | None,
    when: str,
    result: str,
    traceback: str | None = None,
    message: str | None = None,
) -> None:
    if event is not None and event.finish_time is None:
        event.finish_time, event.result, event.traceback, event.message = when, result, traceback, message
