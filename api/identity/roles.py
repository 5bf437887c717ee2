"""``/identity/v3/roles``, the rules by which one role implies another (``/roles/{id}/implies``,
``/role_inferences``), and the closure of those rules that tokens and effective assignments use.

Roles can be created, renamed and deleted; the four built-in roles (admin, manager, member, reader)
cannot be renamed or deleted, since policy names them. Role assignments are ``role_assignments``.
"""

from __future__ import annotations

from typing import Any

import falcon

from api import policy
from api.errors import ItemNotFound
from api.identity.common import Resource, Row, collection, url
from api.identity.views import role_view
from commands.identity import IMPLIED_ROLES
from commands.keystone.roles import CreateRole, DeleteRole, ImplyRole, StopImplyingRole, UpdateRole
from projections import directory_queries as dq
from projections import identity_queries as q

SCHEMAS = ("identity.roles.create", "identity.roles.update")


class Roles(Resource):
    """``GET``/``POST /identity/v3/roles``."""

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
        row = self._wrote(req, CreateRole(spec["name"], spec.get("description") or ""), self._role)
        resp.status = falcon.HTTP_201
        resp.media = {"role": role_view(req, row)}


class RoleItem(Resource):
    """``GET``/``PATCH``/``DELETE /identity/v3/roles/{id}`` (the built-in roles stay)."""

    @falcon.before(policy.require("identity:get_role"))
    def on_get(self, req: falcon.Request, resp: falcon.Response, role_id: str) -> None:
        with self._read.connection(req) as conn:
            resp.media = {"role": role_view(req, self._role(conn, role_id))}

    @falcon.before(policy.require("identity:update_role"))
    def on_patch(self, req: falcon.Request, resp: falcon.Response, role_id: str) -> None:
        spec = self._body(req, "identity.roles.update")["role"]
        row = self._wrote(req, UpdateRole(role_id, spec.get("name"), spec.get("description")), self._role)
        resp.media = {"role": role_view(req, row)}

    @falcon.before(policy.require("identity:delete_role"))
    def on_delete(self, req: falcon.Request, resp: falcon.Response, role_id: str) -> None:
        self._handled(req, DeleteRole(role_id))
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
        result = self._handle(req, ImplyRole(role_id, implied_role_id))
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
        self._handled(req, StopImplyingRole(role_id, implied_role_id))
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
