"""``/image/v2/tasks``: Glance's tasks API (admin only, as Glance's ``tasks_api_access`` default).

A legacy ``import`` task whose ``import_from`` Glance would refuse (not http(s), a file, a host that
does not resolve) is refused with Glance's 400; any other task is recorded and fails at once, since
Stratus imports no image from a URL (``commands.images.tasks``). Shows read the log; lists the read model.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode, urlparse

import falcon

from api import auth
from api.body import read_document
from api.errors import BadRequest, Forbidden
from api.links import page_params
from api.readmodel import POSITION_HEADER, ReadModel
from api.timestamps import isotime
from commands.bus import MessageBus
from commands.images.tasks import RecordTask
from commands.images.tasks import task as find_task
from commands.task import TIME_TO_LIVE, TYPES, Task
from projections import image_queries
from stratus.context import acting

API = "/v2"
DEFAULT_LIMIT = 25
MAX_LIMIT = 1000
STATUSES = ("pending", "processing", "success", "failure")


def resolves(host: str) -> bool:
    """Whether ``host`` is an IP address in standard form or a name that resolves (Glance's check)."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    if host.isdigit():
        return False
    try:
        return bool(socket.getaddrinfo(host, None))
    except (OSError, UnicodeError):
        return False


def task_view(task: Task) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": str(task.id),
        "input": task.input,
        "type": task.type,
        "status": task.status,
        "owner": task.owner,
        "message": task.message,
        "result": task.result,
        "created_at": isotime(task.created_on),
        "updated_at": isotime(task.modified_on),
        "self": f"{API}/tasks/{task.id}",
        "schema": f"{API}/schemas/task",
    }
    if task.input.get("image_id"):
        view["image_id"] = task.input["image_id"]
    if task.request_id:
        view["request_id"] = task.request_id
    if task.user_id:
        view["user_id"] = task.user_id
    if task.expires_at is not None:
        view["expires_at"] = isotime(task.expires_at)
    return view


def _stub(row: dict[str, Any]) -> dict[str, Any]:
    view = {
        "id": str(row["id"]),
        "type": row["type"],
        "status": row["status"],
        "owner": row["owner"],
        "created_at": isotime(row["created_at"]),
        "updated_at": isotime(row["updated_at"]),
        "self": f"{API}/tasks/{row['id']}",
        "schema": f"{API}/schemas/task",
    }
    if row["status"] in ("success", "failure"):
        view["expires_at"] = isotime(row["updated_at"] + TIME_TO_LIVE)
    return view


def _admin(req: falcon.Request) -> None:
    if not auth.is_admin(req.context.actor):
        raise Forbidden("You are not authorized to complete tasks_api_access action.")


def _check_import_from(location: Any, resolve: Callable[[str], bool]) -> None:
    """Glance's ``validate_legacy_import_from_uri``: http(s) only, to a host that resolves."""
    if not location:
        raise BadRequest(f"Invalid location: {location}")
    if not isinstance(location, str):
        raise BadRequest("Invalid location: import_from must be a string.")
    if location.startswith(("file:///", "filesystem:///")):
        raise BadRequest("File based imports are not allowed. Please use a non-local source of image data.")
    if not location.startswith(("http://", "https://")):
        raise BadRequest(
            "The given uri is not valid. Please specify a valid uri from the following list of supported uri "
            "['http']"
        )
    try:
        host = urlparse(location).hostname
    except ValueError:
        host = None
    if not host or not resolve(host):
        raise BadRequest(f"URI for legacy import task does not pass filtering: {location[:255]}")


class TaskCollection:
    """``GET``/``POST /image/v2/tasks``: Glance's import tasks."""

    def __init__(
        self,
        bus: MessageBus,
        read: ReadModel,
        max_body_bytes: int,
        resolve: Callable[[str], bool] = resolves,
    ) -> None:
        self._bus = bus
        self._read = read
        self._max_body = max_body_bytes
        self._resolve = resolve

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _admin(req)
        limit, marker = page_params(req, MAX_LIMIT)
        if req.get_param("limit") is None:
            limit = DEFAULT_LIMIT
        status, task_type = req.get_param("status"), req.get_param("type")
        if status is not None and status not in STATUSES:
            raise BadRequest(f"Invalid status value: {status[:64]}")
        if task_type is not None and task_type not in TYPES:
            raise BadRequest(f"Invalid type value: {task_type[:64]}")
        since = datetime.now(UTC) - TIME_TO_LIVE
        with self._read.connection(req) as conn:
            rows = image_queries.list_tasks(
                conn, limit=limit, marker=marker, since=since, status=status, task_type=task_type
            )
        params = {k: v for k, v in req.params.items() if k != "marker"}
        body: dict[str, Any] = {
            "tasks": [_stub(r) for r in rows],
            "first": f"{API}/tasks" + (f"?{urlencode(params, doseq=True)}" if params else ""),
            "schema": f"{API}/schemas/tasks",
        }
        if limit and len(rows) == limit:
            body["next"] = f"{API}/tasks?{urlencode({**params, 'marker': str(rows[-1]['id'])}, doseq=True)}"
        resp.media = body

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        _admin(req)
        body = self._body(req)
        for name in ("type", "input"):
            if name not in body:
                raise BadRequest(f"Task '{name}' is required")
        if body["type"] not in TYPES:
            shown = str(body["type"])[:64]
            why = f"{shown!r} is not one of {list(TYPES)}"
            raise BadRequest(f"Provided object does not match schema 'task': {why}")
        if not isinstance(body["input"], dict):
            raise BadRequest("Provided object does not match schema 'task': input is not of type 'object'")
        if body["type"] == "import":
            _check_import_from(body["input"].get("import_from"), self._resolve)
        actor = req.context.actor
        request_id = req.context.request_id
        command = RecordTask(body["type"], actor.project_id, actor.user_id, request_id, body["input"])
        with acting(req.context.command):
            result = self._bus.handle(command)
        resp.status = falcon.HTTP_201
        resp.location = f"{API}/tasks/{result.id}"
        resp.set_header(POSITION_HEADER, str(result.position))
        resp.media = task_view(find_task(self._bus.uow, result.id))

    def _body(self, req: falcon.Request) -> dict[str, Any]:
        doc = read_document(req, self._max_body)
        if not isinstance(doc, dict):
            raise BadRequest("Body expected in request.")
        return doc


class TaskItem:
    """``GET /image/v2/tasks/{id}``."""

    def __init__(self, bus: MessageBus) -> None:
        self._bus = bus

    def on_get(self, req: falcon.Request, resp: falcon.Response, task_id: str) -> None:
        _admin(req)
        resp.media = task_view(find_task(self._bus.uow, task_id))
