"""The Placement API subset under ``/placement``: one handler module per resource, as Placement has.

Providers are the compute hosts (``commands.host.Host``) and the providers operators create
(``commands.provider.ResourceProvider``); reads come from ``ProviderView`` (the
hosts' events folded in this process, caught up with the log before every request), writes from
``commands.placement_handlers.PlacementHandlers``. See docs/placement.md.
"""

from __future__ import annotations

import falcon

from api.placement import (
    aggregates,
    allocation_candidates,
    allocations,
    inventories,
    resource_classes,
    resource_providers,
    root,
    traits,
    usages,
)
from api.placement.view import ConsumerOwners, ProviderView
from commands.placement_handlers import PlacementHandlers

PREFIX = "/placement"


def add_routes(app: falcon.App, handlers: PlacementHandlers, view: ProviderView) -> None:
    p = PREFIX
    rp = f"{p}/resource_providers/{{uuid}}"
    app.add_route(p, root.Root())
    app.add_route(f"{p}/resource_providers", resource_providers.Collection(handlers, view))
    app.add_route(rp, resource_providers.Item(handlers, view))
    app.add_route(f"{rp}/inventories", inventories.Collection(handlers, view))
    app.add_route(f"{rp}/inventories/{{resource_class}}", inventories.Item(handlers, view))
    app.add_route(f"{rp}/traits", traits.ProviderTraits(handlers, view))
    app.add_route(f"{p}/traits", traits.Collection(handlers, view))
    app.add_route(f"{p}/traits/{{name}}", traits.Item(handlers, view))
    app.add_route(f"{p}/resource_classes", resource_classes.Collection(handlers))
    app.add_route(f"{p}/resource_classes/{{name}}", resource_classes.Item(handlers, view))
    app.add_route(f"{rp}/aggregates", aggregates.ProviderAggregates(handlers, view))
    app.add_route(f"{rp}/usages", usages.ProviderUsages(view))
    app.add_route(f"{p}/usages", usages.ProjectUsages(view, ConsumerOwners(handlers.app)))
    app.add_route(f"{rp}/allocations", allocations.ProviderAllocations(view))
    app.add_route(f"{p}/allocations", allocations.Allocations(handlers, view))
    app.add_route(f"{p}/allocations/{{consumer}}", allocations.ConsumerAllocations(handlers, view))
    app.add_route(f"{p}/allocation_candidates", allocation_candidates.Candidates(view))
