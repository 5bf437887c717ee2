"""``/placement/resource_classes`` (1.2+): the standard classes and the custom ones operators created.

Custom classes are recorded in the ``PlacementCatalog`` aggregate; a class used by an inventory
cannot be deleted (409). Inventories accept any ``CUSTOM_*`` class without it being created first
(docs/placement.md: a difference from Placement).
"""

from __future__ import annotations

from typing import Any

import falcon

from api.placement.common import PlacementError, body, link, ok, placement_call
from api.placement.view import ProviderView
from commands.bus import MessageBus
from commands.providers import loaders
from commands.providers.custom import CreateResourceClass, DeleteResourceClass
from commands.resource_provider import STANDARD_CLASSES

_PATH = "/placement/resource_classes"


def _doc(name: str) -> dict[str, Any]:
    return {"name": name, "links": [link("self", f"{_PATH}/{name}")]}


def _need(req: falcon.Request, minor: int) -> None:
    if not req.context.placement_version.at_least(minor):
        raise PlacementError(404, "The resource could not be found.")


class Collection:
    """``GET``/``POST /placement/resource_classes``."""

    def __init__(self, bus: MessageBus) -> None:
        self._bus = bus

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _need(req, 2)
        names = [*STANDARD_CLASSES, *loaders.placement_catalog(self._bus.uow).resource_classes]
        ok(resp, {"resource_classes": [_doc(n) for n in names]})

    @placement_call()
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        _need(req, 2)
        name = body(req).get("name")
        if not isinstance(name, str):
            raise PlacementError(400, "'name' is a required property")
        if name in STANDARD_CLASSES or not self._bus.handle(CreateResourceClass(name)):
            raise PlacementError(409, f"Conflicting resource class already exists: {name}")
        resp.set_header("Location", f"{_PATH}/{name}")
        resp.status = falcon.HTTP_201


class Item:
    """``GET``/``PUT``/``DELETE /placement/resource_classes/{name}`` (custom classes only)."""

    def __init__(self, bus: MessageBus, view: ProviderView) -> None:
        self._bus, self._view = bus, view

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        _need(req, 2)
        if (
            name not in STANDARD_CLASSES
            and name not in loaders.placement_catalog(self._bus.uow).resource_classes
        ):
            raise PlacementError(404, f"No such resource class {name}.")
        ok(resp, _doc(name))

    @placement_call()
    def on_put(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        """1.7+: create a custom class if it is not there (201), else nothing (204)."""
        _need(req, 7)
        if name in STANDARD_CLASSES:
            resp.status = falcon.HTTP_204
            return
        created = self._bus.handle(CreateResourceClass(name))
        if created:
            resp.set_header("Location", f"{_PATH}/{name}")
        resp.status = falcon.HTTP_201 if created else falcon.HTTP_204

    @placement_call()
    def on_delete(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        _need(req, 2)

        def in_use(rc: str) -> bool:
            return any(rc in h.inventories for h in self._view.refresh().values())

        self._bus.handle(DeleteResourceClass(name, in_use))
        resp.status = falcon.HTTP_204
