"""The Placement API subset under ``/placement``: one handler module per resource, as Placement has.

Providers are the compute hosts (``commands.host.Host``) and the providers operators create
(``commands.provider.ResourceProvider``); reads come from ``ProviderView`` (the
hosts' events folded in this process, caught up with the log before every request), writes are
commands (``commands.providers``) sent to the bus ``create_app`` injects. See docs/placement.md.
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
from api.placement.view import ConsumerOwners, ProviderLog, ProviderView
from commands.bus import MessageBus

PREFIX = "/placement"


def add_routes(app: falcon.App, bus: MessageBus, log: ProviderLog) -> None:
    """Mount Placement under ``/placement``: writes are ``bus``'s commands, reads the providers folded
    from ``log`` (``ProviderView``)."""
    view = ProviderView(bus.app, log)
    p = PREFIX
    rp = f"{p}/resource_providers/{{uuid}}"
    app.add_route(p, root.Root())
    app.add_route(f"{p}/resource_providers", resource_providers.Collection(bus, view))
    app.add_route(rp, resource_providers.Item(bus, view))
    app.add_route(f"{rp}/inventories", inventories.Collection(bus, view))
    app.add_route(f"{rp}/inventories/{{resource_class}}", inventories.Item(bus, view))
    app.add_route(f"{rp}/traits", traits.ProviderTraits(bus, view))
    app.add_route(f"{p}/traits", traits.Collection(bus, view))
    app.add_route(f"{p}/traits/{{name}}", traits.Item(bus, view))
    app.add_route(f"{p}/resource_classes", resource_classes.Collection(bus))
    app.add_route(f"{p}/resource_classes/{{name}}", resource_classes.Item(bus, view))
    app.add_route(f"{rp}/aggregates", aggregates.ProviderAggregates(bus, view))
    app.add_route(f"{rp}/usages", usages.ProviderUsages(view))
    app.add_route(f"{p}/usages", usages.ProjectUsages(view, ConsumerOwners(log)))
    app.add_route(f"{rp}/allocations", allocations.ProviderAllocations(view))
    app.add_route(f"{p}/allocations", allocations.Allocations(bus, view))
    app.add_route(f"{p}/allocations/{{consumer}}", allocations.ConsumerAllocations(bus, view))
    app.add_route(f"{p}/allocation_candidates", allocation_candidates.Candidates(view))
