"""``/placement/resource_providers/{uuid}/inventories[/{resource_class}]``: a provider's inventories.

Every write names the provider generation it was decided against; a stale one is refused with 409
``placement.concurrent_update`` (checked again by the log's optimistic concurrency on append).
"""

from __future__ import annotations

from typing import Any

import falcon

from api import error_codes as codes
from api.placement.common import PlacementError, body, generation_of, ok, placement_call
from api.placement.resource_providers import provider
from api.placement.view import ProviderView
from commands.bus import MessageBus
from commands.providers.inventories import DeleteInventory, SetInventories, SetInventory
from commands.resource_provider import Provider


def inventories_doc(host: Provider) -> dict[str, Any]:
    return {"resource_provider_generation": host.generation, "inventories": dict(host.inventories)}


def inventory_doc(host: Provider, resource_class: str) -> dict[str, Any]:
    inv = host.inventories.get(resource_class)
    if inv is None:
        raise PlacementError(
            404, f"No inventory of class {resource_class} for {host.id}", codes.PLACEMENT_DEFAULT.code
        )
    return {"resource_provider_generation": host.generation, **inv}


class Collection:
    """``GET``/``PUT``/``DELETE /placement/resource_providers/{uuid}/inventories``."""

    def __init__(self, bus: MessageBus, view: ProviderView) -> None:
        self._bus, self._view = bus, view

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        ok(resp, inventories_doc(provider(self._view, uuid)))

    @placement_call()
    def on_put(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        doc = body(req)
        inventories = doc.get("inventories")
        if not isinstance(inventories, dict) or not all(isinstance(v, dict) for v in inventories.values()):
            raise PlacementError(400, "'inventories' is a required property (an object of objects)")
        host, _ = self._bus.handle(SetInventories(uuid, generation_of(doc), inventories))
        ok(resp, inventories_doc(host))

    @placement_call()
    def on_delete(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        if not req.context.placement_version.at_least(5):
            raise PlacementError(405, "DELETE of all inventories needs microversion 1.5")
        self._bus.handle(SetInventories(uuid, None, {}))
        resp.status = falcon.HTTP_204


class Item:
    """``GET``/``PUT``/``DELETE /placement/resource_providers/{uuid}/inventories/{class}``."""

    def __init__(self, bus: MessageBus, view: ProviderView) -> None:
        self._bus, self._view = bus, view

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response, uuid: str, resource_class: str) -> None:
        ok(resp, inventory_doc(provider(self._view, uuid), resource_class))

    @placement_call()
    def on_put(self, req: falcon.Request, resp: falcon.Response, uuid: str, resource_class: str) -> None:
        doc = body(req)
        generation = generation_of(doc)
        fields = {k: v for k, v in doc.items() if k != "resource_provider_generation"}
        host, _ = self._bus.handle(SetInventory(uuid, generation, resource_class, fields))
        ok(resp, inventory_doc(host, resource_class))

    @placement_call()
    def on_delete(self, req: falcon.Request, resp: falcon.Response, uuid: str, resource_class: str) -> None:
        self._bus.handle(DeleteInventory(uuid, None, resource_class))
        resp.status = falcon.HTTP_204
