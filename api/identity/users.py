"""``/identity/v3/users``: Keystone's users, their passwords and the projects they hold roles on.

A password is hashed into ``api/identity/credentials.py``'s store, never into an event: the log records
only that it changed (``User.PasswordSet``).
"""

from __future__ import annotations

from typing import Any

import falcon

from api import policy
from api.errors import BadRequest, Unauthorized
from api.identity.common import AUTH_FAILED, Resource, collection, filters
from api.identity.views import project_view, user_view
from commands.keystone.users import CreateUser, DeleteUser, RecordPasswordSet, UpdateUser
from projections import identity_queries as q
from stratus.context import Actor, CommandContext, acting

SCHEMAS = ("identity.users.create", "identity.users.update", "identity.users.password")


class Users(Resource):
    """``GET``/``POST /identity/v3/users`` (a password given is hashed apart from the log)."""

    @falcon.before(policy.require("identity:list_users"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._read.connection(req) as conn:
            rows = q.list_users(conn, **filters(req, "name", "domain_id", "enabled"))
        resp.media = collection(req, "users", [user_view(req, r) for r in rows])

    @falcon.before(policy.require("identity:create_user"))
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        spec = self._body(req, "identity.users.create")["user"]
        default_project = spec.get("default_project_id")
        with self._read.connection(req) as conn:
            domain_id = self._domain_param(conn, spec.get("domain_id"))
            if default_project is not None:
                self._project(conn, default_project)
        cmd = CreateUser(
            spec["name"],
            domain_id,
            default_project_id=default_project,
            enabled=spec.get("enabled", True),
            email=spec.get("email"),
            description=spec.get("description"),
            extra=_extra(spec),
        )
        with acting(req.context.command):
            result = self._bus.handle(cmd)
            if spec.get("password"):
                with self._credentials.setting(result.id, spec["password"]):
                    result = self._bus.handle(RecordPasswordSet(result.id))
        row = self._after(req, result.position, lambda conn: self._user(conn, result.id))
        resp.status = falcon.HTTP_201
        resp.media = {"user": user_view(req, row)}


# What a user body may say that is Keystone's own; anything else is an extra attribute, kept.
_USER_FIELDS = frozenset(
    {
        "id",
        "name",
        "domain_id",
        "default_project_id",
        "password",
        "enabled",
        "email",
        "description",
        "options",
    }
)


def _extra(spec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in spec.items() if k not in _USER_FIELDS}


class UserItem(Resource):
    """``GET``/``PATCH``/``DELETE /identity/v3/users/{id}`` (a user may read themself)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        self._themself_or(req, user_id, "identity:get_user")
        with self._read.connection(req) as conn:
            row = self._user(conn, user_id)
        resp.media = {"user": user_view(req, row)}

    @falcon.before(policy.require("identity:update_user"))
    def on_patch(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        spec = self._body(req, "identity.users.update")["user"]
        if spec.get("id", user_id) != user_id:
            raise BadRequest("Invalid input for field 'id': a user's id cannot change.")
        with self._read.connection(req) as conn:
            self._user(conn, user_id)
            if spec.get("default_project_id") is not None:
                self._project(conn, spec["default_project_id"])
        cmd = UpdateUser(
            user_id,
            name=spec.get("name"),
            extra=_extra(spec),
            enabled=spec.get("enabled"),
            email=spec.get("email"),
            description=spec.get("description"),
            default_project_id=spec.get("default_project_id"),
        )
        with acting(req.context.command):
            result = self._bus.handle(cmd)
            if "password" in spec:
                with self._credentials.setting(user_id, spec["password"]):
                    result = self._bus.handle(RecordPasswordSet(user_id))
        row = self._after(req, result.position, lambda conn: self._user(conn, user_id))
        resp.media = {"user": user_view(req, row)}

    @falcon.before(policy.require("identity:delete_user"))
    def on_delete(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        result = self._handle(req, DeleteUser(user_id))
        self._credentials.forget(user_id)  # after the deletion is recorded: a crash leaves a hash, not a lie
        self._written(req, result.position)
        resp.status = falcon.HTTP_204


class UserPassword(Resource):
    """``POST /identity/v3/users/{u}/password``: a user changes their own password, proving the old
    one (no token needed, as in Keystone: a user whose password expired can still change it)."""

    public = frozenset({"POST"})

    def on_post(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        spec = self._body(req, "identity.users.password")["user"]
        source = req.remote_addr or "-"
        throttle = self._credentials.throttle
        if throttle.retry_after(user_id, source):
            raise Unauthorized(AUTH_FAILED)
        if not self._credentials.check(user_id, spec["original_password"]):
            throttle.failed(user_id, source)
            raise Unauthorized(AUTH_FAILED)
        throttle.succeeded(user_id)
        # No token: the user, proven by their password, is the actor (in no project).
        command = CommandContext(actor=Actor(user_id, ""), request_id=req.context.request_id)
        with acting(command), self._credentials.setting(user_id, spec["password"]):
            result = self._bus.handle(RecordPasswordSet(user_id))
        self._written(req, result.position)
        resp.status = falcon.HTTP_204


class UserProjects(Resource):
    """``GET /identity/v3/users/{id}/projects``: the projects the user holds a role on."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        rows = self._theirs(req, user_id, "identity:list_user_projects", q.user_projects)
        resp.media = collection(req, "projects", [project_view(req, r) for r in rows])
