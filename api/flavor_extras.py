"""``/v2.1/flavors/{id}/os-extra_specs`` and ``/v2.1/flavors/{id}/os-flavor-access`` (+ the access
actions), and flavor delete: the parts of a flavor an operator changes after creating it.

Reads come from the read model (a flavor the caller cannot see is a 404: a private flavor is seen
by admins and by the projects given access); writes are admin commands on the flavor's events.
"""

from __future__ import annotations

from typing import Any

import falcon

from api import auth
from api.errors import BadRequest, ItemNotFound
from api.readmodel import POSITION_HEADER, ReadModel
from api.resource import BusResource
from commands import loaders
from commands.flavors.change import (
    AddFlavorAccess,
    DeleteFlavorExtraSpec,
    RemoveFlavorAccess,
    SetFlavorExtraSpecs,
)
from commands.unit_of_work import Result
from projections import queries
from stratus.context import Actor, acting

# Flavors are everyone's: a read of any user waits for the last flavor write through this process
# (an admin creates a flavor or grants access, then a member lists), as Nova's database answers.
FLAVORS = "flavors:everyone"


def visible_flavor(read: ReadModel, req: falcon.Request, flavor_id: str) -> dict[str, Any]:
    """The flavor as the caller may see it, not deleted; 404 otherwise."""
    actor: Actor = req.context.actor
    with read.connection(req, concerning=(FLAVORS,)) as conn:
        row = queries.get_flavor(conn, flavor_id)
    if row is None or row["deleted"] or not can_see(actor, row):
        raise ItemNotFound(f"Flavor {flavor_id} could not be found.")
    return row


def can_see(actor: Actor, row: dict[str, Any]) -> bool:
    return auth.is_admin(actor) or row["is_public"] or actor.project_id in (row.get("projects") or [])


def _spec_value(value: object) -> str:
    """Nova keeps every extra spec value as a string (``True`` for a JSON true)."""
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


class _Resource(BusResource):
    def _written(self, resp: falcon.Response, result: Result) -> None:
        resp.set_header(POSITION_HEADER, str(result.position))
        self._read.note(FLAVORS, result.position)


class ExtraSpecs(_Resource):
    """``GET`` and ``POST /v2.1/flavors/{flavor_id}/os-extra_specs``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, flavor_id: str) -> None:
        row = visible_flavor(self._read, req, flavor_id)
        resp.media = {"extra_specs": dict(row.get("extra_specs") or {})}

    def on_post(self, req: falcon.Request, resp: falcon.Response, flavor_id: str) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:os-flavor-extra-specs:create")
        specs = {
            k: _spec_value(v) for k, v in self._body(req, "flavors.extra_specs.create")["extra_specs"].items()
        }
        with acting(req.context.command):
            result = self._bus.handle(SetFlavorExtraSpecs(flavor_id, specs))
        self._written(resp, result)
        resp.media = {"extra_specs": specs}


class ExtraSpec(_Resource):
    """``GET``, ``PUT`` and ``DELETE /v2.1/flavors/{flavor_id}/os-extra_specs/{key}``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, flavor_id: str, key: str) -> None:
        specs = visible_flavor(self._read, req, flavor_id).get("extra_specs") or {}
        if key not in specs:
            raise ItemNotFound(f"Flavor {flavor_id} has no extra specs with key {key}.")
        resp.media = {key: specs[key]}

    def on_put(self, req: falcon.Request, resp: falcon.Response, flavor_id: str, key: str) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:os-flavor-extra-specs:update")
        body = self._body(req, "flavors.extra_specs.update")
        if key not in body:
            raise BadRequest("Request body and URI mismatch")
        value = _spec_value(body[key])
        with acting(req.context.command):
            result = self._bus.handle(SetFlavorExtraSpecs(flavor_id, {key: value}))
        self._written(resp, result)
        resp.media = {key: value}

    def on_delete(self, req: falcon.Request, resp: falcon.Response, flavor_id: str, key: str) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:os-flavor-extra-specs:delete")
        with acting(req.context.command):
            result = self._bus.handle(DeleteFlavorExtraSpec(flavor_id, key))
        self._written(resp, result)
        resp.status = falcon.HTTP_200


def _access_list(flavor_id: str, projects: list[str]) -> dict[str, Any]:
    return {"flavor_access": [{"flavor_id": flavor_id, "tenant_id": p} for p in projects]}


class FlavorAccess(_Resource):
    """``GET /v2.1/flavors/{flavor_id}/os-flavor-access`` (admin)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, flavor_id: str) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:os-flavor-access")
        row = visible_flavor(self._read, req, flavor_id)
        if row["is_public"]:
            raise ItemNotFound("Access list not available for public flavors.")
        resp.media = _access_list(flavor_id, list(row.get("projects") or []))


class FlavorAction(_Resource):
    """``POST /v2.1/flavors/{flavor_id}/action``: ``addTenantAccess`` / ``removeTenantAccess`` (admin)."""

    def on_post(self, req: falcon.Request, resp: falcon.Response, flavor_id: str) -> None:
        body = self._body(req, "flavors.action")
        ((action, args),) = body.items()
        project = args["tenant"]
        if action == "addTenantAccess":
            auth.require_admin(req.context.actor, "os_compute_api:os-flavor-access:add_tenant_access")
            auth.require_project(self._bus.app, project)
            with acting(req.context.command):
                result = self._bus.handle(AddFlavorAccess(flavor_id, project))
        else:
            auth.require_admin(req.context.actor, "os_compute_api:os-flavor-access:remove_tenant_access")
            with acting(req.context.command):
                result = self._bus.handle(RemoveFlavorAccess(flavor_id, project))
        self._written(resp, result)
        flavor = loaders.flavor(self._bus.uow, flavor_id)
        resp.media = _access_list(flavor_id, list(flavor.projects))
