"""``/placement/resource_providers/{uuid}/aggregates`` (1.1+; with generations from 1.19)."""

from __future__ import annotations

from typing import Any

import falcon

from api.placement.common import PlacementError, generation_of, json_body, ok, placement_call
from api.placement.resource_providers import provider
from api.placement.view import ProviderView
from commands.bus import MessageBus
from commands.providers.inventories import SetAggregates
from commands.resource_provider import Provider


def aggregates_doc(host: Provider, req: falcon.Request) -> dict[str, Any]:
    doc: dict[str, Any] = {"aggregates": list(host.provider_aggregates)}
    if req.context.placement_version.at_least(19):
        doc["resource_provider_generation"] = host.generation
    return doc


class ProviderAggregates:
    """``GET``/``PUT /placement/resource_providers/{uuid}/aggregates``."""

    def __init__(self, bus: MessageBus, view: ProviderView) -> None:
        self._bus, self._view = bus, view

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        if not req.context.placement_version.at_least(1):
            raise PlacementError(404, "The resource could not be found.")
        ok(resp, aggregates_doc(provider(self._view, uuid), req))

    @placement_call()
    def on_put(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        version = req.context.placement_version
        if not version.at_least(1):
            raise PlacementError(404, "The resource could not be found.")
        doc = json_body(req)
        generation = None
        if version.at_least(19):  # {"aggregates": [...], "resource_provider_generation": n}
            if not isinstance(doc, dict):
                raise PlacementError(400, "JSON body must be an object")
            generation = generation_of(doc)
            doc = doc.get("aggregates")
        if not isinstance(doc, list) or not all(isinstance(a, str) for a in doc):
            raise PlacementError(400, "'aggregates' must be a list of uuids")
        host, _ = self._bus.handle(SetAggregates(uuid, generation, doc))
        ok(resp, aggregates_doc(host, req))
