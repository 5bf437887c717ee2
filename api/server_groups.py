"""``/v2.1/os-server-groups``: server groups and their members, in Nova's 2.1 shapes (with 2.13's
``project_id``/``user_id``; the soft policies, 2.15's, are accepted as well).

A group belongs to its project (another project's group is a 404); admins list every project's with
``all_projects``. Members join when a server is created with the ``group`` scheduler hint.
"""

from __future__ import annotations

from typing import Any

import falcon
from jsonschema import Draft202012Validator

from api import auth
from api.body import read_json
from api.errors import ItemNotFound
from api.readmodel import POSITION_HEADER, ReadModel
from commands.operations import CreateServerGroup, Operations
from projections import admin_queries
from stratus.context import Actor, acting

_TRUE = ("1", "true", "t", "yes", "y", "on")


def group_view(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(row["id"]),
        "name": row["name"],
        "policies": [row["policy"]],
        "members": sorted(row["members"] or {}),
        "metadata": {},
        "project_id": row["project_id"],
        "user_id": row["user_id"],
    }


class _Groups:
    def __init__(
        self,
        ops: Operations,
        read_model: ReadModel,
        validators: dict[str, Draft202012Validator],
        max_body_bytes: int,
    ) -> None:
        self._ops = ops
        self._read = read_model
        self._validators = validators
        self._max_body = max_body_bytes


class ServerGroups(_Groups):
    """``GET`` and ``POST /v2.1/os-server-groups``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        actor: Actor = req.context.actor
        everyone = (req.get_param("all_projects") or "").strip().lower() in _TRUE and auth.is_admin(actor)
        with self._read.connection(req) as conn:
            rows = admin_queries.list_server_groups(conn, None if everyone else actor.project_id)
        resp.media = {"server_groups": [group_view(r) for r in rows]}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        actor: Actor = req.context.actor
        spec = read_json(req, self._validators["server_groups.create"], self._max_body)["server_group"]
        command = CreateServerGroup(spec["name"], actor.project_id, actor.user_id, spec["policies"][0])
        with acting(req.context.command):
            result = self._ops.create_server_group(command)
        resp.set_header(POSITION_HEADER, str(result.position))
        resp.media = {
            "server_group": {
                "id": result.id,
                "name": command.name,
                "policies": [command.policy],
                "members": [],
                "metadata": {},
                "project_id": command.project_id,
                "user_id": command.user_id,
            }
        }


class ServerGroup(_Groups):
    """``GET`` and ``DELETE /v2.1/os-server-groups/{group_id}``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, group_id: str) -> None:
        scope = auth.server_scope(req.context.actor)
        with self._read.connection(req) as conn:
            row = admin_queries.get_server_group(conn, group_id, scope)
        if row is None:
            raise ItemNotFound(f"Instance group {group_id} could not be found.")
        resp.media = {"server_group": group_view(row)}

    def on_delete(self, req: falcon.Request, resp: falcon.Response, group_id: str) -> None:
        with acting(req.context.command):
            result = self._ops.delete_server_group(group_id, auth.server_scope(req.context.actor))
        resp.set_header(POSITION_HEADER, str(result.position))
        resp.status = falcon.HTTP_204
