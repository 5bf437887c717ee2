"""A server's instance actions (Nova's ``os-instance-actions``), folded from its events on the log.

The log already holds everything Nova keeps in its ``instance_actions`` tables: each user request
starts an action (the event it appended names the request id, the user and the project in its
envelope), and the events the scheduler and the hypervisor appended in reaction carry the same
correlation id, with their times and outcomes. So the actions are a pure function of the server's
history, read from the log when asked: no table to keep in step, and an auditor sees the same thing
replaying the log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from commands.actions import ACTIONS
from stratus.eventstore.envelope import Envelope

SUCCESS = "Success"
ERROR = "Error"
BUILD_EVENT = "compute__do_build_and_run_instance"
SCHEDULE_EVENT = "conductor_schedule_and_build_instances"
DELETE_EVENT = "compute_terminate_instance"


@dataclass
class ActionEvent:
    event: str
    start_time: str
    finish_time: str | None = None
    result: str | None = None
    traceback: str | None = None  # the fault's details, for admins


@dataclass
class InstanceAction:
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


_STARTERS = {
    "requested": "create",
    "deletionrequested": "delete",
    "locked": "lock",
    "unlocked": "unlock",
    "unshelverequested": "unshelve",
    "resizeconfirmed": "confirmResize",
    "revertrequested": "revertResize",
}
# A move's steps as Nova's action events: (the step's own event, the event that opens the next step).
MIGRATE_EVENT = "conductor_migrate_server"
_MOVE_STEPS = {
    "migrationscheduled": (MIGRATE_EVENT, "compute_resize_instance"),
    "migratedfromsource": ("compute_resize_instance", "compute_finish_resize"),
    "revertedondest": ("compute_revert_resize", "compute_finish_revert_resize"),
}


def fold(envelopes: list[Envelope]) -> list[InstanceAction]:
    """The actions of one server, oldest first, from its events in log order."""
    actions: list[InstanceAction] = []
    by_correlation: dict[str, InstanceAction] = {}
    for env in envelopes:
        kind, data, when = _type(env), _data(env), nova_time(env.time)
        name = _STARTERS.get(kind)
        if kind == "actionrequested":
            name = ACTIONS[data["action"]].name
        elif kind == "migrationrequested":
            name = "resize" if data.get("migration_type") == "resize" else "migrate"
        if name is not None:
            action = InstanceAction(name, env.requestid, env.actoruser, env.actorproject, when, when)
            actions.append(action)
            by_correlation[env.correlationid or env.requestid] = action
            _started(action, kind, data, when)
            continue
        found = by_correlation.get(env.correlationid)
        if found is None:
            continue  # not caused by a user's request (none such yet): no action to file it under
        found.updated_at = when
        _progressed(found, kind, data, when)
    return actions


def _started(action: InstanceAction, kind: str, data: dict[str, Any], when: str) -> None:
    if kind in ("requested", "unshelverequested"):
        action.events.append(ActionEvent(SCHEDULE_EVENT, when))
    elif kind == "deletionrequested":
        action.events.append(ActionEvent(DELETE_EVENT, when))
    elif kind == "actionrequested":
        action.events.append(ActionEvent(ACTIONS[data["action"]].event, when))
    elif kind == "migrationrequested":
        action.events.append(ActionEvent(MIGRATE_EVENT, when))
    elif kind == "resizeconfirmed":
        action.events.append(ActionEvent("compute_confirm_resize", when, when, SUCCESS))
    elif kind == "revertrequested":
        action.events.append(ActionEvent("compute_revert_resize", when))


def _progressed(action: InstanceAction, kind: str, data: dict[str, Any], when: str) -> None:
    if kind == "scheduled":
        _finish(action.open_event(SCHEDULE_EVENT), when, SUCCESS)
    elif kind == "spawningstarted":
        action.events.append(ActionEvent(BUILD_EVENT, when))
    elif kind == "spawned":
        _finish(action.open_event(BUILD_EVENT), when, SUCCESS)
    elif kind in _MOVE_STEPS:
        done, following = _MOVE_STEPS[kind]
        _finish(action.open_event(done), when, SUCCESS)
        action.events.append(ActionEvent(following, when))
    elif kind in ("actionfinished", "deleted", "migrationfinished", "resizereverted"):
        for event in action.events:
            _finish(event, when, SUCCESS)
    elif kind in ("faulted", "actionfailed", "migrationfailed", "unshelvefailed"):
        details = str(data.get("details") or data.get("message") or "")
        for event in action.events:
            _finish(event, when, ERROR, details)


def _finish(event: ActionEvent | None, when: str, result: str, traceback: str | None = None) -> None:
    if event is not None and event.finish_time is None:
        event.finish_time, event.result, event.traceback = when, result, traceback
