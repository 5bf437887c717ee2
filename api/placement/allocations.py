"""``/placement/allocations`` (POST), ``/placement/allocations/{consumer}`` and
``/placement/resource_providers/{uuid}/allocations``.

An instance of this cloud is a consumer whose allocation is its host claim (written by the
scheduler, read-only here). Any other consumer's allocations are written here, across providers
in one atomic append, under the consumer's generation (1.28+: ``consumer_generation``; null for a
new consumer) and each provider's optimistic-concurrency check.
"""

from __future__ import annotations

import re
from typing import Any

import falcon

from api.placement.common import PlacementError, Version, body, ok, placement_call
from api.placement.resource_providers import provider
from api.placement.view import ProviderView
from commands.bus import MessageBus
from commands.providers import loaders
from commands.providers.allocations import ConsumerChange, DeleteAllocations, ReplaceAllocations

_UUID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")


class ProviderAllocations:
    """``GET /placement/resource_providers/{uuid}/allocations``."""

    def __init__(self, view: ProviderView) -> None:
        self._view = view

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        host = provider(self._view, uuid)
        allocations = {c: {"resources": host.held(c)} for c in sorted(host.consumers())}
        ok(resp, {"resource_provider_generation": host.generation, "allocations": allocations})


class ConsumerAllocations:
    """``GET``/``PUT``/``DELETE /placement/allocations/{consumer}``."""

    def __init__(self, bus: MessageBus, view: ProviderView) -> None:
        self._bus, self._view = bus, view

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response, consumer: str) -> None:
        version = req.context.placement_version
        allocations: dict[str, Any] = {}
        for host in self._view.refresh().values():
            held = host.held(consumer)
            if held:
                allocations[str(host.id)] = {"generation": host.generation, "resources": held}
        doc: dict[str, Any] = {"allocations": allocations}
        record = loaders.consumer(self._bus.uow, consumer)
        if allocations and version.at_least(12):
            doc["project_id"] = record.project_id if record else None
            doc["user_id"] = record.user_id if record else None
        if allocations and version.at_least(28):
            doc["consumer_generation"] = (
                record.generation if record else self._view.consumer_generation(consumer) or 1
            )
        if allocations and version.at_least(38):
            doc["consumer_type"] = record.consumer_type if record else "INSTANCE"
        ok(resp, doc)

    @placement_call()
    def on_put(self, req: falcon.Request, resp: falcon.Response, consumer: str) -> None:
        version = req.context.placement_version
        doc = body(req)
        if version.at_least(12):
            wanted = _by_provider(doc.get("allocations"), "allocations")
        else:
            raw = doc.get("allocations")
            if not isinstance(raw, list) or not raw:
                raise PlacementError(400, "'allocations' is a required property (a non-empty list)")
            wanted = {}
            for entry in raw:
                rp = (entry.get("resource_provider") or {}).get("uuid") if isinstance(entry, dict) else None
                if not isinstance(rp, str):
                    raise PlacementError(400, "each allocation names its resource_provider's uuid")
                wanted[rp] = _resources(entry)
        self._bus.handle(ReplaceAllocations((_change(self._view, version, consumer, doc, wanted),)))
        resp.status = falcon.HTTP_204

    @placement_call()
    def on_delete(self, req: falcon.Request, resp: falcon.Response, consumer: str) -> None:
        self._bus.handle(DeleteAllocations(consumer))
        resp.status = falcon.HTTP_204


class Allocations:
    """``POST /placement/allocations`` (1.13+): several consumers' allocations replaced at once, all
    or none (an empty ``allocations`` removes a consumer's). What Nova uses to move allocations
    from one consumer to another in a single step."""

    def __init__(self, bus: MessageBus, view: ProviderView) -> None:
        self._bus, self._view = bus, view

    @placement_call()
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        version = req.context.placement_version
        if not version.at_least(13):
            raise PlacementError(405, "The method specified is not allowed for this resource.")
        doc = body(req)
        if not isinstance(doc, dict) or not doc:
            raise PlacementError(400, "The request body must map consumer uuids to their allocations")
        changes = []
        for consumer, entry in doc.items():
            if not _UUID.match(consumer) or not isinstance(entry, dict):
                raise PlacementError(400, f"Invalid consumer {consumer[:60]!r}: a uuid mapped to an object")
            wanted = _by_provider(entry.get("allocations"), f"{consumer}.allocations")
            changes.append(_change(self._view, version, consumer, entry, wanted))
        self._bus.handle(ReplaceAllocations(tuple(changes)))
        resp.status = falcon.HTTP_204


def _by_provider(raw: Any, where: str) -> dict[str, dict[str, int]]:
    if not isinstance(raw, dict):
        raise PlacementError(400, f"'{where}' is a required property (an object)")
    return {rp: _resources(entry) for rp, entry in raw.items()}


def _change(
    view: ProviderView,
    version: Version,
    consumer: str,
    doc: dict[str, Any],
    wanted: dict[str, dict[str, int]],
) -> ConsumerChange:
    for rp in wanted:
        provider(view, rp)  # 400 in Placement for an unknown provider
    project_id, user_id = doc.get("project_id"), doc.get("user_id")
    if version.at_least(8) and not (isinstance(project_id, str) and isinstance(user_id, str)):
        raise PlacementError(400, f"'project_id' and 'user_id' are required properties (consumer {consumer})")
    if version.at_least(28) and "consumer_generation" not in doc:
        raise PlacementError(400, f"'consumer_generation' is a required property (consumer {consumer})")
    return ConsumerChange(
        consumer,
        wanted,
        doc.get("consumer_generation") if version.at_least(28) else None,
        project_id or "",
        user_id or "",
        str(doc.get("consumer_type") or "INSTANCE"),
        check_generation=version.at_least(28),
    )


def _resources(entry: Any) -> dict[str, int]:
    resources = entry.get("resources") if isinstance(entry, dict) else None
    if not isinstance(resources, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in resources.values()
    ):
        raise PlacementError(400, "'resources' must map resource classes to integers >= 1")
    return dict(resources)
