"""``GET /placement/allocation_candidates`` (1.10+): providers that can hold a request, with summaries.

Single-provider candidates (no tree or sharing combinations): each provider, a compute host or
another, with every requested resource class in its inventory, room for the amount within
min_unit/max_unit/step_size and its capacity, the ``required`` traits, none of the forbidden ones
(``!T``, 1.22+), and a Placement aggregate in each ``member_of``. Ordered by provider name;
``limit`` (1.16+) keeps the first N.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

import falcon

from api.placement.common import PlacementError, ok, params, placement_call
from api.placement.resource_providers import matches, parse_member_of, parse_resources, parse_traits
from api.placement.view import ProviderView, root_of
from commands.resource_provider import Inventory, Provider


def summary(host: Provider, version: Any, providers: Mapping[UUID, Provider]) -> dict[str, Any]:
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
        doc["parent_provider_uuid"] = host.parent_provider_uuid
        doc["root_provider_uuid"] = root_of(providers, host)
    return doc


class Candidates:
    """``GET /placement/allocation_candidates``: the providers that can take a request."""

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
        providers = self._view.refresh()
        found = [
            h
            for h in sorted(providers.values(), key=lambda h: h.provider_name)
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
            "provider_summaries": {str(h.id): summary(h, version, providers) for h in found},
        })  # fmt: skip
