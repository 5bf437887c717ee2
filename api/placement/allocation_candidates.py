"""``GET /placement/allocation_candidates`` (1.10+): providers that can hold a request, with summaries.

Single-provider candidates (no nested or sharing providers): each provider with every requested
resource class in its inventory, room for the amount within min_unit/max_unit/step_size and its
capacity, the ``required`` traits, none of the forbidden ones (``!T``, 1.22+), and a Placement
aggregate in each ``member_of``. Ordered by provider name; ``limit`` (1.16+) keeps the first N.
"""

from __future__ import annotations

from typing import Any

import falcon

from api.placement.common import PlacementError, ok, params, placement_call
from api.placement.resource_providers import matches, parse_member_of, parse_resources, parse_traits
from api.placement.view import ProviderView
from commands.host import Host
from commands.resource_provider import Inventory


def summary(host: Host, version: Any) -> dict[str, Any]:
    usages = host.usages()
    doc: dict[str, Any] = {
        "resources": {
            rc: {"capacity": Inventory(**inv).capacity, "used": usages.get(rc, 0)}
            for rc, inv in host.inventories.items()
        }
    }
    if version.at_least(17):
        doc["traits"] = list(host.traits)
    if version.at_least(29):
        doc["parent_provider_uuid"] = None
        doc["root_provider_uuid"] = str(host.id)
    return doc


class Candidates:
    def __init__(self, view: ProviderView) -> None:
        self._view = view

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        version = req.context.placement_version
        if not version.at_least(10):
            raise PlacementError(404, "The resource could not be found.")
        text = req.get_param("resources")
        if not text:
            raise PlacementError(400, "'resources' is a required query parameter")
        resources = parse_resources(text)
        required, forbidden = parse_traits(params(req, "required"), version)
        member_of = parse_member_of(params(req, "member_of"))
        limit = req.get_param_as_int("limit", min_value=1) if version.at_least(16) else None
        found = [
            h
            for h in sorted(self._view.refresh().values(), key=lambda h: h.hostname)
            if matches(h, resources=resources, required=required, forbidden=forbidden, member_of=member_of)
        ]
        if limit is not None:
            found = found[:limit]
        if version.at_least(12):
            requests: list[Any] = [{"allocations": {str(h.id): {"resources": resources}}} for h in found]
        else:
            requests = [
                {"allocations": [{"resource_provider": {"uuid": str(h.id)}, "resources": resources}]}
                for h in found
            ]
        ok(resp, {
            "allocation_requests": requests,
            "provider_summaries": {str(h.id): summary(h, version) for h in found},
        })  # fmt: skip
