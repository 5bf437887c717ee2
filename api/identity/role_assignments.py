"""Role assignments: on projects, domains and the system, to users and groups
(``/identity/v3/{projects|domains}/{id}/{users|groups}/{id}/roles[/{role_id}]``,
``/identity/v3/system/{users|groups}/{id}/roles[/{role_id}]``), and ``/identity/v3/role_assignments``.

One resource class serves each of the assignment routes: the route says which scope and actor.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

import falcon

from api import policy
from api.errors import ItemNotFound
from api.identity.common import Resource, Row, collection, domain_ref, flag, url
from api.identity.roles import implied_by, with_implied
from api.identity.views import role_view
from commands.identity import SYSTEM_SCOPE
from commands.keystone.assignments import Assignment, AssignRole, UnassignRole
from projections import directory_queries as dq
from projections import identity_queries as q


class _Assignments(Resource):
    """Serves ``/{scope}s/{scope_id}/{actor}s/{actor_id}/roles...`` for one scope and actor kind."""

    def __init__(self, scope: str, actor: str, **collaborators: Any) -> None:
        super().__init__(**collaborators)
        self._scope = scope  # "project", "domain" or "system"
        self._actor = actor  # "user" or "group"

    def _ids(self, ids: dict[str, str]) -> tuple[str, str]:
        """The route's scope and actor ids (``project_id``/``domain_id``, ``user_id``/``group_id``)."""
        return ids.get(f"{self._scope}_id", SYSTEM_SCOPE), ids[f"{self._actor}_id"]

    def _target(self, conn: Any, scope_id: str, actor_id: str) -> None:
        if self._scope != "system":
            (self._project if self._scope == "project" else self._domain)(conn, scope_id)
        (self._user if self._actor == "user" else self._group)(conn, actor_id)

    def _held(self, conn: Any, scope_id: str, actor_id: str, role_id: str | None = None) -> list[Row]:
        return dq.assignments(
            conn,
            scope_type=self._scope,
            scope_id=scope_id,
            actor_type=self._actor,
            actor_id=actor_id,
            role_id=role_id,
        )


class AssignedRoles(_Assignments):
    """``GET``: the roles given to the user or group there."""

    @falcon.before(policy.require("identity:list_grants"))
    def on_get(self, req: falcon.Request, resp: falcon.Response, **ids: str) -> None:
        scope_id, actor_id = self._ids(ids)
        with self._read.connection(req) as conn:
            self._target(conn, scope_id, actor_id)
            roles = [
                role_view(req, self._role(conn, r["role_id"])) for r in self._held(conn, scope_id, actor_id)
            ]
        resp.media = collection(req, "roles", roles)


class AssignedRole(_Assignments):
    """``PUT``/``HEAD``/``DELETE``: give, check and take back one role."""

    def _assignment(self, req: falcon.Request, role_id: str, ids: dict[str, str]) -> Assignment:
        """The assignment the path names, once its scope, actor and role are found (404 otherwise)."""
        scope_id, actor_id = self._ids(ids)
        with self._read.connection(req) as conn:
            self._target(conn, scope_id, actor_id)
            self._role(conn, role_id)
        return Assignment(self._scope, scope_id, self._actor, actor_id, role_id)

    @falcon.before(policy.require("identity:create_grant"))
    def on_put(self, req: falcon.Request, resp: falcon.Response, role_id: str, **ids: str) -> None:
        self._handled(req, AssignRole(self._assignment(req, role_id, ids)))
        resp.status = falcon.HTTP_204

    @falcon.before(policy.require("identity:check_grant"))
    def on_head(self, req: falcon.Request, resp: falcon.Response, role_id: str, **ids: str) -> None:
        scope_id, actor_id = self._ids(ids)
        with self._read.connection(req) as conn:
            if not self._held(conn, scope_id, actor_id, role_id):
                raise ItemNotFound(
                    f"Could not find role assignment of role {role_id} to {self._actor} {actor_id}."
                )
        resp.status = falcon.HTTP_204

    on_get = on_head

    @falcon.before(policy.require("identity:revoke_grant"))
    def on_delete(self, req: falcon.Request, resp: falcon.Response, role_id: str, **ids: str) -> None:
        self._handled(req, UnassignRole(self._assignment(req, role_id, ids)))
        resp.status = falcon.HTTP_204


class RoleAssignments(Resource):
    """``GET /identity/v3/role_assignments`` with ``user.id``, ``group.id``, ``scope.project.id``,
    ``scope.domain.id``, ``role.id``, ``effective`` (group memberships expanded into their users,
    implied roles listed too) and ``include_names``."""

    @falcon.before(policy.require("identity:list_role_assignments"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if req.get_param("scope.OS-INHERIT:inherited_to"):
            resp.media = collection(req, "role_assignments", [])  # Stratus has no inherited roles
            return
        effective = _given(req, "effective")
        project, domain = req.get_param("scope.project.id"), req.get_param("scope.domain.id")
        system = req.get_param("scope.system")
        user, group = req.get_param("user.id"), req.get_param("group.id")
        with self._read.connection(req) as conn:
            rows = dq.assignments(
                conn,
                scope_type="project" if project else "domain" if domain else "system" if system else None,
                scope_id=project or domain or (SYSTEM_SCOPE if system else None),
                actor_type=None if effective else "user" if user else "group" if group else None,
                actor_id=None if effective else user or group,
            )
            if effective:
                rows = _expanded(conn, rows, user, group)
            roles = {r["id"]: r for r in q.list_roles(conn)}
            if effective:
                rows = with_implied(rows, implied_by(conn, roles))
            wanted = req.get_param("role.id")
            rows = [r for r in rows if r["role_id"] in roles and (not wanted or r["role_id"] == wanted)]
            named = _names(conn, rows, roles) if _given(req, "include_names") else None
        resp.media = collection(req, "role_assignments", [_view(req, r, named) for r in rows])


def _expanded(conn: Any, rows: list[Row], user: str | None, group: str | None) -> list[Row]:
    """Group assignments replaced by one per member (marked with the group they came through)."""
    groups = [r["actor_id"] for r in rows if r["actor_type"] == "group"]
    members: dict[str, list[str]] = {}
    for m in dq.members_of(conn, groups) if groups else []:
        members.setdefault(m["group_id"], []).append(m["user_id"])
    out = []
    for r in rows:
        if r["actor_type"] == "user":
            out.append(r)
            continue
        if group and r["actor_id"] != group:
            continue
        out += [
            {**r, "actor_type": "user", "actor_id": u, "via_group": r["actor_id"]}
            for u in members.get(r["actor_id"], [])
        ]
    return [r for r in out if not user or r["actor_id"] == user]


def _given(req: falcon.Request, name: str) -> bool:
    """Keystone's flags: present (``?effective``) or true (``?effective=true``), not false."""
    if name not in parse_qs(req.query_string, keep_blank_values=True):
        return False
    return not (req.get_param(name) or "").strip() or flag(req, name) is True


def _names(conn: Any, rows: list[Row], roles: dict[str, Row]) -> dict[str, dict[str, Row]]:
    def ids(kind: str, key: str) -> list[str]:
        return [r[key + "_id"] for r in rows if r[key + "_type"] == kind]

    tables = {
        "project": dq.names(conn, "projects", ids("project", "scope")),
        "domain": dq.names(conn, "domains", ids("domain", "scope")),
        "user": dq.names(conn, "users", ids("user", "actor")),
        "group": dq.names(conn, "groups", ids("group", "actor")),
        "role": roles,
        "system": {},
    }
    domain_ids = [row["domain_id"] for kind in ("project", "user", "group") for row in tables[kind].values()]
    tables["domain"].update(dq.names(conn, "domains", domain_ids))
    return tables


def _view(req: falcon.Request, r: Row, named: dict[str, dict[str, Row]] | None) -> dict[str, Any]:
    scope, actor = r["scope_type"], r["actor_type"]
    via = r.get("via_group")
    item: dict[str, Any] = {
        "role": {"id": r["role_id"]},
        actor: {"id": r["actor_id"]},
        "scope": {scope: {"all": True} if scope == "system" else {"id": r["scope_id"]}},
    }
    target = ["system"] if scope == "system" else [f"{scope}s", r["scope_id"]]
    if via:
        link = url(req, *target, "groups", via, "roles", r["role_id"])
        item["links"] = {"assignment": link, "membership": url(req, "groups", via, "users", r["actor_id"])}
    else:
        item["links"] = {"assignment": url(req, *target, f"{actor}s", r["actor_id"], "roles", r["role_id"])}
    if "prior_role" in r:
        item["links"]["prior_role"] = url(req, "roles", r["prior_role"])
    if named is not None:
        domains = named["domain"]
        item["role"]["name"] = named["role"].get(r["role_id"], {}).get("name")
        for key, kind, ident in ((actor, actor, r["actor_id"]), (scope, scope, r["scope_id"])):
            row = named[kind].get(ident)
            target = item[key] if key == actor else item["scope"][scope]
            if row is None:
                continue
            target["name"] = row["name"]
            if kind != "domain":
                target["domain"] = domain_ref(row["domain_id"], domains)
    return item
