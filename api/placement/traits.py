"""``/placement/traits``, ``/placement/traits/{name}`` and ``/placement/resource_providers/{uuid}/traits``
(microversion 1.6+)."""

from __future__ import annotations

import falcon

from api.placement.common import PlacementError, body, generation_of, ok, placement_call
from api.placement.resource_providers import provider
from api.placement.view import ProviderView
from commands.bus import MessageBus
from commands.providers import loaders
from commands.providers.custom import CreateTrait, DeleteTrait
from commands.providers.inventories import SetTraits
from commands.resource_provider import Provider


def _need_1_6(req: falcon.Request) -> None:
    if not req.context.placement_version.at_least(6):
        raise PlacementError(404, "The resource could not be found.")


def traits_doc(host: Provider) -> dict[str, object]:
    return {"traits": list(host.traits), "resource_provider_generation": host.generation}


def _known(bus: MessageBus, view: ProviderView) -> set[str]:
    """The custom traits operators created and every trait any provider has."""
    return {
        *loaders.placement_catalog(bus.uow).traits,
        *(t for h in view.refresh().values() for t in h.traits),
    }


class Collection:
    """The traits operators created and those on any provider (os-traits' standard catalogue is
    not listed: a standard trait is known once a provider has it)."""

    def __init__(self, bus: MessageBus, view: ProviderView) -> None:
        self._bus, self._view = bus, view

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _need_1_6(req)
        found = sorted(_known(self._bus, self._view))
        name = req.get_param("name") or ""
        if name.startswith("startswith:"):
            found = [t for t in found if t.startswith(name.removeprefix("startswith:"))]
        elif name.startswith("in:"):
            wanted = set(name.removeprefix("in:").split(","))
            found = [t for t in found if t in wanted]
        ok(resp, {"traits": found})


class Item:
    """``/placement/traits/{name}``: a custom trait created (PUT: 201, or 204 if it was there),
    looked up (GET: 204 or 404) or deleted (404 unknown, 400 standard, 409 on a provider)."""

    def __init__(self, bus: MessageBus, view: ProviderView) -> None:
        self._bus, self._view = bus, view

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        _need_1_6(req)
        if name not in _known(self._bus, self._view):
            raise PlacementError(404, f"No such trait(s): {name}.")
        resp.status = falcon.HTTP_204

    @placement_call()
    def on_put(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        _need_1_6(req)
        created = self._bus.handle(CreateTrait(name))
        if created:
            resp.set_header("Location", f"/placement/traits/{name}")
        resp.status = falcon.HTTP_201 if created else falcon.HTTP_204

    @placement_call()
    def on_delete(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        _need_1_6(req)

        def in_use(trait: str) -> bool:
            return any(trait in h.traits for h in self._view.refresh().values())

        self._bus.handle(DeleteTrait(name, in_use))
        resp.status = falcon.HTTP_204


class ProviderTraits:
    """``GET``/``PUT``/``DELETE /placement/resource_providers/{uuid}/traits``."""

    def __init__(self, bus: MessageBus, view: ProviderView) -> None:
        self._bus, self._view = bus, view

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        _need_1_6(req)
        ok(resp, traits_doc(provider(self._view, uuid)))

    @placement_call()
    def on_put(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        _need_1_6(req)
        doc = body(req)
        traits = doc.get("traits")
        if not isinstance(traits, list) or not all(isinstance(t, str) for t in traits):
            raise PlacementError(400, "'traits' is a required property (a list of names)")
        host, _ = self._bus.handle(SetTraits(uuid, generation_of(doc), traits))
        ok(resp, traits_doc(host))

    @placement_call()
    def on_delete(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        _need_1_6(req)
        self._bus.handle(SetTraits(uuid, None, []))
        resp.status = falcon.HTTP_204
