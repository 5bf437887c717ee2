"""``/placement/resource_providers/{uuid}/usages``: what is used of each inventory."""

from __future__ import annotations

import falcon

from api.placement.common import ok, placement_call
from api.placement.resource_providers import provider
from api.placement.view import ProviderView


class ProviderUsages:
    def __init__(self, view: ProviderView) -> None:
        self._view = view

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        host = provider(self._view, uuid)
        ok(resp, {"resource_provider_generation": host.generation, "usages": host.usages()})
