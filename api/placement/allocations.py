"""``/placement/allocations/{consumer}`` and ``/placement/resource_providers/{uuid}/allocations``.

An instance of this cloud is a consumer whose allocation is its host claim (written by the
scheduler, read-only here). Any other consumer's allocations are written here, across providers
in one atomic append, under the consumer's generation (1.28+: ``consumer_generation``; null for a
new consumer) and each provider's optimistic-concurrency check.
"""

from __future__ import annotations

from typing import Any

import falcon

from api.placement.common import PlacementError, body, ok, placement_call
from api.placement.resource_providers import provider
from api.placement.view import ProviderView
from commands.host import Host
from commands.placement import PlacementHandlers
from commands.resource_provider import CLAIM_FIELDS


def held_by(host: Host, consumer: str) -> dict[str, int] | None:
    claim = host.claims.get(consumer)
    if claim is not None:
        return {rc: claim[name] for rc, name in CLAIM_FIELDS.items() if claim[name]}
    return host.allocations.get(consumer)


class ProviderAllocations:
    def __init__(self, view: ProviderView) -> None:
        self._view = view

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        host = provider(self._view, uuid)
        consumers = {*host.claims, *host.allocations}
        allocations = {c: {"resources": held_by(host, c)} for c in sorted(consumers)}
        ok(resp, {"resource_provider_generation": host.generation, "allocations": allocations})


class ConsumerAllocations:
    def __init__(self, handlers: PlacementHandlers, view: ProviderView) -> None:
        self._handlers, self._view = handlers, view

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response, consumer: str) -> None:
        version = req.context.placement_version
        allocations: dict[str, Any] = {}
        for host in self._view.refresh().values():
            held = held_by(host, consumer)
            if held:
                allocations[str(host.id)] = {"generation": host.generation, "resources": held}
        doc: dict[str, Any] = {"allocations": allocations}
        record = self._handlers.consumer(consumer)
        if allocations and version.at_least(12):
            doc["project_id"] = record.project_id if record else None
            doc["user_id"] = record.user_id if record else None
        if allocations and version.at_least(28):
            doc["consumer_generation"] = record.generation if record else 1
        if allocations and version.at_least(38):
            doc["consumer_type"] = record.consumer_type if record else "INSTANCE"
        ok(resp, doc)

    @placement_call()
    def on_put(self, req: falcon.Request, resp: falcon.Response, consumer: str) -> None:
        version = req.context.placement_version
        doc = body(req)
        raw = doc.get("allocations")
        wanted: dict[str, dict[str, int]] = {}
        if version.at_least(12):
            if not isinstance(raw, dict):
                raise PlacementError(400, "'allocations' is a required property (an object)")
            for rp, entry in raw.items():
                wanted[rp] = _resources(entry)
        else:
            if not isinstance(raw, list) or not raw:
                raise PlacementError(400, "'allocations' is a required property (a non-empty list)")
            for entry in raw:
                rp = (entry.get("resource_provider") or {}).get("uuid") if isinstance(entry, dict) else None
                if not isinstance(rp, str):
                    raise PlacementError(400, "each allocation names its resource_provider's uuid")
                wanted[rp] = _resources(entry)
        for rp in wanted:
            provider(self._view, rp)  # 400 in Placement for an unknown provider
        project_id, user_id = doc.get("project_id"), doc.get("user_id")
        if version.at_least(8) and not (isinstance(project_id, str) and isinstance(user_id, str)):
            raise PlacementError(400, "'project_id' and 'user_id' are required properties")
        generation = doc.get("consumer_generation") if version.at_least(28) else None
        if version.at_least(28) and "consumer_generation" not in doc:
            raise PlacementError(400, "'consumer_generation' is a required property")
        self._handlers.put_allocations(
            consumer,
            wanted,
            consumer_generation=generation,
            project_id=project_id or "",
            user_id=user_id or "",
            consumer_type=str(doc.get("consumer_type") or "INSTANCE"),
            check_generation=version.at_least(28),
        )
        resp.status = falcon.HTTP_204

    @placement_call()
    def on_delete(self, req: falcon.Request, resp: falcon.Response, consumer: str) -> None:
        self._handlers.delete_allocations(consumer)
        resp.status = falcon.HTTP_204


def _resources(entry: Any) -> dict[str, int]:
    resources = entry.get("resources") if isinstance(entry, dict) else None
    if not isinstance(resources, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in resources.values()
    ):
        raise PlacementError(400, "'resources' must map resource classes to integers >= 1")
    return dict(resources)
