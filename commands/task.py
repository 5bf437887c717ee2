"""Task: Glance's asynchronous image task (the legacy ``import`` from a URL), as a record of its fate.

Stratus imports no image from a URL (images are uploaded: ``PUT /v2/images/{id}/file``), so a task
that passes Glance's checks is recorded and, in the same append, its failure with the reason, as
Glance records a task whose source its workers cannot fetch. Tasks live ``TIME_TO_LIVE`` after they
finish (Glance's ``task_time_to_live``, 48 hours), then are no longer listed.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

PENDING = "pending"
FAILURE = "failure"
TYPES = ("import", "api_image_import", "location_import")
TIME_TO_LIVE = timedelta(hours=48)


class Task(Aggregate):
    """One of Glance's image tasks, as a record of what became of it."""

    class Created(Aggregate.Created):
        """An admin created a Glance task (status pending): its type, input as given, and who asked."""

        task_type: str
        owner: str
        task_input: dict[str, Any]
        user_id: str
        request_id: str

    @event(Created)
    def __init__(
        self, task_type: str, owner: str, task_input: dict[str, Any], user_id: str, request_id: str
    ) -> None:
        self.type = task_type
        self.owner = owner
        self.input = dict(task_input)
        self.user_id = user_id
        self.request_id = request_id
        self.status = PENDING
        self.message = ""
        self.result: dict[str, Any] | None = None

    @classmethod
    def create_task(cls, task_id: UUID, **fields: Any) -> Task:
        return cls._create(cls.Created, id=task_id, **fields)  # type: ignore[no-any-return,attr-defined]

    @property
    def expires_at(self) -> Any:
        return self.modified_on + TIME_TO_LIVE if self.status == FAILURE else None

    def fail(self, message: str) -> None:
        self._failed(message)

    class Failed(Aggregate.Event):
        """The task failed (status failure) for the reason given; it expires 48 hours later."""

        message: str

    @event(Failed)
    def _failed(self, message: str) -> None:
        self.status = FAILURE
        self.message = message
