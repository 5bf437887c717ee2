"""``/placement/traits`` and ``/placement/resource_providers/{uuid}/traits`` (microversion 1.6+)."""

from __future__ import annotations

import falcon

from api.placement.common import PlacementError, body, generation_of, ok, placement_call
from api.placement.resource_providers import provider
from api.placement.view import ProviderView
from commands.host import Host
from commands.placement import PlacementHandlers


def _need_1_6(req: falcon.Request) -> None:
    if not req.context.placement_version.at_least(6):
        raise PlacementError(404, "The resource could not be found.")


def traits_doc(host: Host) -> dict[str, object]:
    return {"traits": list(host.traits), "resource_provider_generation": host.generation}


class Collection:
    """The traits in use on any provider (Stratus keeps no separate trait catalogue)."""

    def __init__(self, view: ProviderView) -> None:
        self._view = view

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        _need_1_6(req)
        found = sorted({t for h in self._view.refresh().values() for t in h.traits})
        name = req.get_param("name") or ""
        if name.startswith("startswith:"):
            found = [t for t in found if t.startswith(name.removeprefix("startswith:"))]
        elif name.startswith("in:"):
            wanted = set(name.removeprefix("in:").split(","))
            found = [t for t in found if t in wanted]
        ok(resp, {"traits": found})


class ProviderTraits:
    def __init__(self, handlers: PlacementHandlers, view: ProviderView) -> None:
        self._handlers, self._view = handlers, view

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
        host, _ = self._handlers.set_traits(uuid, generation_of(doc), traits)
        ok(resp, traits_doc(host))

    @placement_call()
    def on_delete(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        _need_1_6(req)
        self._handlers.set_traits(uuid, None, [])
        resp.status = falcon.HTTP_204
