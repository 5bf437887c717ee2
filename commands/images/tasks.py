"""Glance's tasks (``commands.task``): a task is recorded, and fails at once, for Stratus imports no
image from a URL."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from commands.errors import NotFound
from commands.task import Task
from commands.unit_of_work import Result, UnitOfWork

UNSUPPORTED = "Stratus does not import images from URLs; upload the data: PUT /v2/images/{image_id}/file."


@dataclass(frozen=True)
class RecordTask:
    """Record a Glance task (POST /v2/tasks)."""

    type: str
    owner: str
    user_id: str
    request_id: str
    input: dict[str, Any] = field(default_factory=dict)


def task(uow: UnitOfWork, task_id: str) -> Task:
    """The task, or Glance's 404."""
    try:
        found = uow.find(Task, UUID(task_id))
    except ValueError:
        found = None
    if found is None:
        raise NotFound(f"Task with the given id {task_id} was not found")
    return found


def record_task(cmd: RecordTask, uow: UnitOfWork, new_id: Callable[[], UUID]) -> Result:
    """The task is recorded, failed with why."""
    recorded = Task.create_task(
        new_id(),
        task_type=cmd.type,
        owner=cmd.owner,
        task_input=cmd.input,
        user_id=cmd.user_id,
        request_id=cmd.request_id,
    )
    recorded.fail(UNSUPPORTED)
    return Result(str(recorded.id), uow.save(recorded))
