"""``/v2.1/os-server-groups``: server groups and their members, in Nova's shapes per microversion:
``project_id``/``user_id`` from 2.13, the soft policies from 2.15, and from 2.64 one ``policy`` with
its ``rules`` (anti-affinity's ``max_server_per_host``) in place of the ``policies`` list and
the always empty ``metadata``.

The list pages as Nova's does, by ``offset`` and ``limit`` (at most 1,000 a page).
A group belongs to its project (another project's group is a 404); admins list every project's with
``all_projects``. Members join when a server is created with the ``group`` scheduler hint.
"""

from __future__ import annotations

from typing import Any

import falcon

from api import auth
from api.errors import BadRequest, ItemNotFound
from api.links import MAX_LIMIT, page_params
from api.readmodel import POSITION_HEADER
from api.resource import BusResource
from api.versions import at_least
from commands.servers.groups import CreateServerGroup, DeleteServerGroup
from projections import admin_queries
from stratus import positions
from stratus.context import Actor, acting

_TRUE = ("1", "true", "t", "yes", "y", "on")


def group_view(req: falcon.Request, row: dict[str, Any]) -> dict[str, Any]:
    view: dict[str, Any] = {"id": str(row["id"]), "name": row["name"]}
    if at_least(req, 64):
        view["policy"] = row["policy"]
        view["rules"] = dict(row.get("rules") or {})
    else:
        view["policies"] = [row["policy"]]
        view["metadata"] = {}
    view["members"] = sorted(row["members"] or {})
    if at_least(req, 13):
        view["project_id"] = row["project_id"]
        view["user_id"] = row["user_id"]
    return view


def _policy_and_rules(req: falcon.Request, spec: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """What the create asks for, in the form its microversion takes (Nova: 400 for the other form)."""
    wanted, unwanted = ("policy", "policies") if at_least(req, 64) else ("policies", "policy")
    for field in (unwanted, *(["rules"] if not at_least(req, 64) else [])):
        if field in spec:
            raise BadRequest(
                f"Invalid input for field/attribute server_group. Additional properties are not allowed "
                f"('{field}' was unexpected)"
            )
    if wanted not in spec:
        raise BadRequest(f"Invalid input for field/attribute server_group. '{wanted}' is a required property")
    policy = spec["policy"] if wanted == "policy" else spec["policies"][0]
    if policy.startswith("soft-") and not at_least(req, 15):
        raise BadRequest(
            f"Invalid input for field/attribute policies. Value: {policy}. It needs microversion 2.15"
        )
    rules = {k: int(v) for k, v in (spec.get("rules") or {}).items()}
    return policy, rules


def _window(req: falcon.Request) -> tuple[int, int]:
    """Nova's ``limit`` and ``offset`` (``common.limited``): at most ``MAX_LIMIT`` groups a page, and
    ``limit=0`` is the most a page holds; each a non-negative integer (else 400)."""
    limit, _ = page_params(req)
    raw = req.get_param("offset")
    try:
        offset = positions.parse_natural(raw) if raw is not None else 0
    except ValueError:
        raise BadRequest("offset param must be a non-negative integer") from None
    return limit or MAX_LIMIT, offset


class ServerGroups(BusResource):
    """``GET`` and ``POST /v2.1/os-server-groups``."""

    read_beside_check = auth.READ_BESIDE_CHECK  # a list: read beside its token's check

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        actor: Actor = req.context.actor
        everyone = (req.get_param("all_projects") or "").strip().lower() in _TRUE and auth.is_admin(actor)
        limit, offset = _window(req)
        with self._read.connection(req) as conn:
            rows = admin_queries.list_server_groups(
                conn, None if everyone else actor.project_id, limit=limit, offset=offset
            )
        resp.media = {"server_groups": [group_view(req, r) for r in rows]}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        actor: Actor = req.context.actor
        spec = self._body(req, "server_groups.create")["server_group"]
        policy, rules = _policy_and_rules(req, spec)
        command = CreateServerGroup(spec["name"], actor.project_id, actor.user_id, policy, rules)
        with acting(req.context.command):
            result = self._bus.handle(command)
        resp.set_header(POSITION_HEADER, str(result.position))
        row = {**vars(command), "id": result.id, "members": {}}
        resp.media = {"server_group": group_view(req, row)}


class ServerGroup(BusResource):
    """``GET`` and ``DELETE /v2.1/os-server-groups/{group_id}``."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, group_id: str) -> None:
        scope = auth.server_scope(req.context.actor)
        with self._read.connection(req) as conn:
            row = admin_queries.get_server_group(conn, group_id, scope)
        if row is None:
            raise ItemNotFound(f"Instance group {group_id} could not be found.")
        resp.media = {"server_group": group_view(req, row)}

    def on_delete(self, req: falcon.Request, resp: falcon.Response, group_id: str) -> None:
        with acting(req.context.command):
            result = self._bus.handle(DeleteServerGroup(group_id, auth.server_scope(req.context.actor)))
        resp.set_header(POSITION_HEADER, str(result.position))
        resp.status = falcon.HTTP_204
