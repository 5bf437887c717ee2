"""``/identity/v3/domains``: Keystone's domains.

A domain is deleted only once disabled (403 otherwise, as Keystone answers), and its projects,
users and groups go with it in the same append. The ``default`` domain is seeded on the first run.
"""

from __future__ import annotations

import falcon

from api import policy
from api.identity.common import Resource, collection, filters
from api.identity.views import domain_view
from commands.keystone.domains import CreateDomain, DeleteDomain, UpdateDomain
from projections import directory_queries as dq

SCHEMAS = ("identity.domains.create", "identity.domains.update")


class Domains(Resource):
    """``GET``/``POST /identity/v3/domains``."""

    @falcon.before(policy.require("identity:list_domains"))
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        with self._read.connection(req) as conn:
            rows = dq.list_domains(conn, **filters(req, "name", "enabled"))
        resp.media = collection(req, "domains", [domain_view(req, r) for r in rows])

    @falcon.before(policy.require("identity:create_domain"))
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        spec = self._body(req, "identity.domains.create")["domain"]
        cmd = CreateDomain(spec["name"], spec.get("description") or "", spec.get("enabled", True))
        row = self._wrote(req, cmd, self._domain)
        resp.status = falcon.HTTP_201
        resp.media = {"domain": domain_view(req, row)}


class DomainItem(Resource):
    """``GET``/``PATCH``/``DELETE /identity/v3/domains/{id}`` (deleted only once disabled)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, domain_id: str) -> None:
        policy.authorize(req.context.actor, "identity:get_domain")
        with self._read.connection(req) as conn:
            resp.media = {"domain": domain_view(req, self._domain(conn, domain_id))}

    @falcon.before(policy.require("identity:update_domain"))
    def on_patch(self, req: falcon.Request, resp: falcon.Response, domain_id: str) -> None:
        spec = self._body(req, "identity.domains.update")["domain"]
        cmd = UpdateDomain(domain_id, spec.get("name"), spec.get("description"), spec.get("enabled"))
        row = self._wrote(req, cmd, self._domain)
        resp.media = {"domain": domain_view(req, row)}

    @falcon.before(policy.require("identity:delete_domain"))
    def on_delete(self, req: falcon.Request, resp: falcon.Response, domain_id: str) -> None:
        with self._read.connection(req) as conn:
            self._domain(conn, domain_id)
            members = dq.domain_members(conn, domain_id)
        cmd = DeleteDomain(domain_id, members["projects"], members["users"], members["groups"])
        result = self._handle(req, cmd)
        for user_id in members["users"]:
            self._credentials.forget(user_id)
        self._written(req, result.position)
        resp.status = falcon.HTTP_204
