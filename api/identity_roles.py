"""``/identity/v3/roles``, role assignments on projects and domains to users and groups, and
``/identity/v3/role_assignments``.

Roles can be created, renamed and deleted; the four built-in roles (admin, manager, member, reader)
cannot be renamed or deleted, since policy names them. One resource serves the four assignment
routes (``/{projects|domains}/{id}/{users|groups}/{id}/roles[/{role}]``): the route says which.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

import falcon

from api import policy
from api.errors import ItemNotFound
from api.identity_common import Resource, Row, collection, domain_ref, flag, role_view, url
from commands.identity import IMPLIED_ROLES, SYSTEM_SCOPE
from commands.identity_domains import Assignment, CreateRole, UpdateRole
from projections import directory_queries as dq
from projections import identity_queries as q
from stratus.context import acting

SCHEMAS = ("identity.roles.create", "identity.roles.update")


class Roles(Resource):
    @falcon.before(policy.require("identity:list_roles"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if req.get_param("domain_id"):  # Stratus has no domain-specific roles
            resp.media = collection(req, "roles", [])
            return
        with self._read.connection(req) as conn:
            rows = q.list_roles(conn, name=req.get_param("name"))
        resp.media = collection(req, "roles", [role_view(req, r) for r in rows])

    @falcon.before(policy.require("identity:create_role"))
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        spec = self._body(req, "identity.roles.create")["role"]
        with acting(req.context.command):
            result = self._handlers.create_role(CreateRole(spec["name"], spec.get("description") or ""))
        row = self._after(req, result.position, lambda conn: self._role(conn, result.id))
        resp.status = falcon.HTTP_201
        resp.media = {"role": role_view(req, row)}


class RoleItem(Resource):
    @falcon.before(policy.require("identity:get_role"))
    def on_get(self, req: falcon.Request, resp: falcon.Response, role_id: str) -> None:
        with self._read.connection(req) as conn:
            resp.media = {"role": role_view(req, self._role(conn, role_id))}

    @falcon.before(policy.require("identity:update_role"))
    def on_patch(self, req: falcon.Request, resp: falcon.Response, role_id: str) -> None:
        spec = self._body(req, "identity.roles.update")["role"]
        with acting(req.context.command):
            result = self._handlers.update_role(
                UpdateRole(role_id, spec.get("name"), spec.get("description"))
            )
        row = self._after(req, result.position, lambda conn: self._role(conn, role_id))
        resp.media = {"role": role_view(req, row)}

    @falcon.before(policy.require("identity:delete_role"))
    def on_delete(self, req: falcon.Request, resp: falcon.Response, role_id: str) -> None:
        with acting(req.context.command):
            result = self._handlers.delete_role(role_id)
        self._written(req, result.position)
        resp.status = falcon.HTTP_204


# -- implied roles --------------------------------------------------------------------------------
def _role_ref(req: falcon.Request, row: Row) -> dict[str, Any]:
    return {"id": row["id"], "name": row["name"], "links": {"self": url(req, "roles", row["id"])}}


class RoleImplies(Resource):
    """``GET /identity/v3/roles/{prior}/implies``: the roles a role implies (rules made by hand)."""

    @falcon.before(policy.require("identity:list_implied_roles"))
    def on_get(self, req: falcon.Request, resp: falcon.Response, role_id: str) -> None:
        with self._read.connection(req) as conn:
            prior = self._role(conn, role_id)
            implied = [self._role(conn, r["implied_role_id"]) for r in dq.implications(conn, role_id)]
        inference = {"prior_role": _role_ref(req, prior), "implies": [_role_ref(req, r) for r in implied]}
        resp.media = {"role_inference": inference, "links": {"self": req.url}}


class RoleImply(Resource):
    """``PUT``/``GET``/``HEAD``/``DELETE /identity/v3/roles/{prior}/implies/{implied}``."""

    def _view(self, req: falcon.Request, conn: Any, prior: str, implied: str) -> dict[str, Any]:
        inference = {
            "prior_role": _role_ref(req, self._role(conn, prior)),
            "implies": _role_ref(req, self._role(conn, implied)),
        }
        return {"role_inference": inference, "links": {"self": url(req, "roles", prior, "implies", implied)}}

    def _rule(self, req: falcon.Request, prior: str, implied: str) -> dict[str, Any]:
        with self._read.connection(req) as conn:
            if not any(r["implied_role_id"] == implied for r in dq.implications(conn, prior)):
                raise ItemNotFound(f"{prior} does not imply {implied}.")
            return self._view(req, conn, prior, implied)

    @falcon.before(policy.require("identity:create_implied_role"))
    def on_put(self, req: falcon.Request, resp: falcon.Response, role_id: str, implied_role_id: str) -> None:
        with acting(req.context.command):
            result = self._handlers.imply_role(role_id, implied_role_id)
        resp.status = falcon.HTTP_201
        resp.media = self._after(
            req, result.position, lambda conn: self._view(req, conn, role_id, implied_role_id)
        )

    @falcon.before(policy.require("identity:get_implied_role"))
    def on_get(self, req: falcon.Request, resp: falcon.Response, role_id: str, implied_role_id: str) -> None:
        resp.media = self._rule(req, role_id, implied_role_id)

    @falcon.before(policy.require("identity:get_implied_role"))
    def on_head(self, req: falcon.Request, resp: falcon.Response, role_id: str, implied_role_id: str) -> None:
        self._rule(req, role_id, implied_role_id)
        resp.status = falcon.HTTP_204

    @falcon.before(policy.require("identity:delete_implied_role"))
    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, role_id: str, implied_role_id: str
    ) -> None:
        with acting(req.context.command):
            result = self._handlers.stop_implying_role(role_id, implied_role_id)
        self._written(req, result.position)
        resp.status = falcon.HTTP_204


class RoleInferences(Resource):
    """``GET /identity/v3/role_inferences``: every rule made by hand, by prior role."""

    @falcon.before(policy.require("identity:list_role_inference_rules"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._read.connection(req) as conn:
            roles = {r["id"]: r for r in q.list_roles(conn)}
            rules: dict[str, list[str]] = {}
            for rule in dq.implications(conn):
                rules.setdefault(rule["prior_role_id"], []).append(rule["implied_role_id"])
        items = [
            {"prior_role": _role_ref(req, roles[p]), "implies": [_role_ref(req, roles[i]) for i in implied]}
            for p, implied in rules.items()
            if p in roles
        ]
        resp.media = {"role_inferences": items, "links": {"self": req.url}}


# -- assignments ----------------------------------------------------------------------------------
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

    def _assignment(self, req: falcon.Request, scope_id: str, actor_id: str, role_id: str) -> Assignment:
        with self._read.connection(req) as conn:
            self._target(conn, scope_id, actor_id)
            self._role(conn, role_id)
        return Assignment(self._scope, scope_id, self._actor, actor_id, role_id)

    @falcon.before(policy.require("identity:create_grant"))
    def on_put(self, req: falcon.Request, resp: falcon.Response, role_id: str, **ids: str) -> None:
        scope_id, actor_id = self._ids(ids)
        assignment = self._assignment(req, scope_id, actor_id, role_id)
        with acting(req.context.command):
            result = self._handlers.assign(assignment)
        self._written(req, result.position)
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
        scope_id, actor_id = self._ids(ids)
        assignment = self._assignment(req, scope_id, actor_id, role_id)
        with acting(req.context.command):
            result = self._handlers.unassign(assignment)
        self._written(req, result.position)
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


def implied_by(conn: Any, roles: dict[str, Row]) -> dict[str, list[str]]:
    """Each role's id -> the ids of the roles it implies directly: the built-in chain (admin →
    manager → member → reader) and the rules made with ``PUT /roles/{prior}/implies/{implied}``."""
    by_name = {r["name"]: r["id"] for r in roles.values()}
    rules: dict[str, list[str]] = {}
    for prior, implied in IMPLIED_ROLES.items():
        if prior in by_name and implied in by_name:
            rules.setdefault(by_name[prior], []).append(by_name[implied])
    for rule in dq.implications(conn):
        rules.setdefault(rule["prior_role_id"], []).append(rule["implied_role_id"])
    return rules


def with_implied(rows: list[Row], rules: dict[str, list[str]]) -> list[Row]:
    """Each assignment, and one per role its role implies, however indirectly (with the role that
    implied it, as Keystone's ``prior_role`` link)."""
    out = []
    for r in rows:
        out.append(r)
        seen = {r["role_id"]}
        todo = [(r["role_id"], implied) for implied in rules.get(r["role_id"], [])]
        while todo:
            prior, role = todo.pop(0)
            if role in seen:
                continue
            seen.add(role)
            out.append({**r, "role_id": role, "prior_role": prior})
            todo += [(role, implied) for implied in rules.get(role, [])]
    return out


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


def add_routes(app: falcon.App, v3: str, **collaborators: Any) -> None:
    app.add_route(f"{v3}/roles", Roles(**collaborators))
    app.add_route(f"{v3}/roles/{{role_id}}", RoleItem(**collaborators))
    app.add_route(f"{v3}/roles/{{role_id}}/implies", RoleImplies(**collaborators))
    app.add_route(f"{v3}/roles/{{role_id}}/implies/{{implied_role_id}}", RoleImply(**collaborators))
    app.add_route(f"{v3}/role_inferences", RoleInferences(**collaborators))
    for scope in ("project", "domain", "system"):
        for actor in ("user", "group"):
            on = "system" if scope == "system" else f"{scope}s/{{{scope}_id}}"
            base = f"{v3}/{on}/{actor}s/{{{actor}_id}}/roles"
            app.add_route(base, AssignedRoles(scope, actor, **collaborators))
            app.add_route(f"{base}/{{role_id}}", AssignedRole(scope, actor, **collaborators))
    app.add_route(f"{v3}/role_assignments", RoleAssignments(**collaborators))
