"""Commands on Glance tasks (``commands.task``): record one, and what became of it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID, uuid4

from commands.errors import NotFound
from commands.task import Task
from commands.unit_of_work import Result, UnitOfWork

UNSUPPORTED = "Stratus does not import images from URLs; upload the data: PUT /v2/images/{image_id}/file."


@dataclass(frozen=True)
class RecordTask:
    type: str
    owner: str
    user_id: str
    request_id: str
    input: dict[str, Any] = field(default_factory=dict)


class TaskHandlers(UnitOfWork):
    def __init__(self, app: Any, *, new_id: Callable[[], UUID] = uuid4) -> None:
        super().__init__(app)
        self._new_id = new_id

    def task(self, task_id: str) -> Task:
        try:
            found = self.find(Task, UUID(task_id))
        except ValueError:
            found = None
        if found is None:
            raise NotFound(f"Task with the given id {task_id} was not found")
        return found

    def record_task(self, cmd: RecordTask) -> Result:
        task = Task.create_task(
            self._new_id(),
            task_type=cmd.type,
            owner=cmd.owner,
            task_input=cmd.input,
            user_id=cmd.user_id,
            request_id=cmd.request_id,
        )
        task.fail(UNSUPPORTED)
        return Result(str(task.id), self.save(task))
