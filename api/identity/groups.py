"""``/identity/v3/groups``: Keystone's groups and their members (``/groups/{id}/users[/{user_id}]``,
``/users/{id}/groups``)."""

from __future__ import annotations

from typing import Any

import falcon

from api import policy
from api.errors import ItemNotFound
from api.identity.common import Resource, collection, filters
from api.identity.views import group_view, user_view
from commands.keystone.groups import AddGroupUser, CreateGroup, DeleteGroup, RemoveGroupUser, UpdateGroup
from projections import directory_queries as dq

SCHEMAS = ("identity.groups.create", "identity.groups.update")


class Groups(Resource):
    """``GET``/``POST /identity/v3/groups``."""

    @falcon.before(policy.require("identity:list_groups"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._read.connection(req) as conn:
            rows = dq.list_groups(conn, **filters(req, "name", "domain_id"))
        resp.media = collection(req, "groups", [group_view(req, r) for r in rows])

    @falcon.before(policy.require("identity:create_group"))
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        spec = self._body(req, "identity.groups.create")["group"]
        with self._read.connection(req) as conn:
            domain_id = self._domain_param(conn, spec.get("domain_id"))
        cmd = CreateGroup(spec["name"], domain_id, spec.get("description") or "")
        row = self._wrote(req, cmd, self._group)
        resp.status = falcon.HTTP_201
        resp.media = {"group": group_view(req, row)}


class GroupItem(Resource):
    """``GET``/``PATCH``/``DELETE /identity/v3/groups/{id}``."""

    @falcon.before(policy.require("identity:get_group"))
    def on_get(self, req: falcon.Request, resp: falcon.Response, group_id: str) -> None:
        with self._read.connection(req) as conn:
            resp.media = {"group": group_view(req, self._group(conn, group_id))}

    @falcon.before(policy.require("identity:update_group"))
    def on_patch(self, req: falcon.Request, resp: falcon.Response, group_id: str) -> None:
        spec = self._body(req, "identity.groups.update")["group"]
        row = self._wrote(req, UpdateGroup(group_id, spec.get("name"), spec.get("description")), self._group)
        resp.media = {"group": group_view(req, row)}

    @falcon.before(policy.require("identity:delete_group"))
    def on_delete(self, req: falcon.Request, resp: falcon.Response, group_id: str) -> None:
        self._handled(req, DeleteGroup(group_id))
        resp.status = falcon.HTTP_204


class GroupUsers(Resource):
    """``GET /identity/v3/groups/{g}/users``."""

    @falcon.before(policy.require("identity:list_users_in_group"))
    def on_get(self, req: falcon.Request, resp: falcon.Response, group_id: str) -> None:
        with self._read.connection(req) as conn:
            self._group(conn, group_id)
            rows = dq.group_users(conn, group_id)
        resp.media = collection(req, "users", [user_view(req, r) for r in rows])


class GroupUser(Resource):
    """``PUT``/``HEAD``/``DELETE /identity/v3/groups/{g}/users/{u}``."""

    def _check(self, req: falcon.Request, group_id: str, user_id: str) -> Any:
        with self._read.connection(req) as conn:
            self._group(conn, group_id)
            self._user(conn, user_id)
            return dq.is_member(conn, group_id, user_id)

    @falcon.before(policy.require("identity:add_user_to_group"))
    def on_put(self, req: falcon.Request, resp: falcon.Response, group_id: str, user_id: str) -> None:
        self._check(req, group_id, user_id)
        self._handled(req, AddGroupUser(group_id, user_id))
        resp.status = falcon.HTTP_204

    @falcon.before(policy.require("identity:check_user_in_group"))
    def on_head(self, req: falcon.Request, resp: falcon.Response, group_id: str, user_id: str) -> None:
        if not self._check(req, group_id, user_id):
            raise ItemNotFound(f"User {user_id} is not a member of group {group_id}.")
        resp.status = falcon.HTTP_204

    on_get = on_head

    @falcon.before(policy.require("identity:remove_user_from_group"))
    def on_delete(self, req: falcon.Request, resp: falcon.Response, group_id: str, user_id: str) -> None:
        self._check(req, group_id, user_id)
        self._handled(req, RemoveGroupUser(group_id, user_id))
        resp.status = falcon.HTTP_204


class UserGroups(Resource):
    """``GET /identity/v3/users/{u}/groups``: the groups a user is in (yourself: always allowed)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, user_id: str) -> None:
        rows = self._theirs(req, user_id, "identity:list_groups_for_user", dq.user_groups)
        items = [{**group_view(req, r), "membership_expires_at": None} for r in rows]
        resp.media = collection(req, "groups", items)
