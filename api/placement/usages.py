"""``/placement/resource_providers/{uuid}/usages``: what is used of each inventory; ``/placement/usages``
(1.9+): what one project (and user) uses across every provider."""

from __future__ import annotations

import falcon

from api.placement.common import PlacementError, ok, placement_call
from api.placement.resource_providers import provider
from api.placement.view import ConsumerOwners, ProviderView


class ProviderUsages:
    """``GET /placement/resource_providers/{uuid}/usages``."""

    def __init__(self, view: ProviderView) -> None:
        self._view = view

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        host = provider(self._view, uuid)
        ok(resp, {"resource_provider_generation": host.generation, "usages": host.usages()})


class ProjectUsages:
    """``GET /placement/usages?project_id=&user_id=`` (1.9; grouped by consumer type from 1.38): the
    sums of every allocation held by the project's consumers (its servers' claims, a moving server's
    migration claim, and Placement's own consumers)."""

    def __init__(self, view: ProviderView, owners: ConsumerOwners) -> None:
        self._view, self._owners = view, owners

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        version = req.context.placement_version
        if not version.at_least(9):
            raise PlacementError(404, "The resource could not be found.")
        project = req.get_param("project_id")
        if not project:
            raise PlacementError(400, "Invalid query string parameters: 'project_id' is a required property")
        user = req.get_param("user_id")
        owners = self._owners.refresh()
        by_type: dict[str, dict[str, int]] = {}
        consumers: dict[str, set[str]] = {}
        for host in self._view.refresh().values():
            for consumer in host.consumers():
                server = host.moving(consumer) or consumer  # a migration belongs to its server
                owner = owners.get(server)
                if owner is None or owner[0] != project or (user and owner[1] != user):
                    continue
                kind = "MIGRATION" if host.moving(consumer) else (owner[2] or "unknown")
                sums = by_type.setdefault(kind, {})
                for rc, amount in (host.held(consumer) or {}).items():
                    sums[rc] = sums.get(rc, 0) + amount
                consumers.setdefault(kind, set()).add(consumer)
        if not version.at_least(38):
            total: dict[str, int] = {}
            for sums in by_type.values():
                for rc, amount in sums.items():
                    total[rc] = total.get(rc, 0) + amount
            ok(resp, {"usages": total})
            return
        ok(resp, {"usages": {
            kind: {**sums, "consumer_count": len(consumers[kind])} for kind, sums in sorted(by_type.items())
        }})  # fmt: skip
