"""``/placement/resource_providers``: every compute host is one provider (uuid: its Host aggregate's id).

Providers are not created or deleted through this API: a hypervisor worker registers its host,
which makes it a provider with VCPU, MEMORY_MB and DISK_GB inventories.
"""

from __future__ import annotations

from typing import Any

import falcon

from api.placement.common import PlacementError, Version, link, ok, params, placement_call
from api.placement.view import ProviderView
from commands.host import Host
from commands.resource_provider import Inventory


def provider_doc(host: Host, version: Version) -> dict[str, Any]:
    uuid = str(host.id)
    base = f"/placement/resource_providers/{uuid}"
    links = [link("self", base), link("inventories", f"{base}/inventories"), link("usages", f"{base}/usages")]
    if version.at_least(1):
        links.append(link("aggregates", f"{base}/aggregates"))
    if version.at_least(6):
        links.append(link("traits", f"{base}/traits"))
    if version.at_least(11):
        links.append(link("allocations", f"{base}/allocations"))
    doc: dict[str, Any] = {"uuid": uuid, "name": host.hostname, "generation": host.generation, "links": links}
    if version.at_least(14):
        doc["parent_provider_uuid"] = None
        doc["root_provider_uuid"] = uuid
    return doc


def parse_resources(text: str) -> dict[str, int]:
    """``VCPU:2,MEMORY_MB:512`` -> {"VCPU": 2, "MEMORY_MB": 512}."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        rc, _, amount = part.partition(":")
        if not amount.isdigit() or rc in out:
            raise PlacementError(
                400,
                "Badly formed resources parameter. Expected resources query string parameter in form: "
                f"?resources=VCPU:2,MEMORY_MB:1024. Got: {text}.",
            )
        out[rc] = int(amount)
    if not out:
        raise PlacementError(400, "Badly formed resources parameter: empty")
    return out


def parse_traits(values: list[str], version: Version) -> tuple[set[str], set[str]]:
    """``required=A,!B`` -> (required, forbidden); forbidden traits from 1.22."""
    required: set[str] = set()
    forbidden: set[str] = set()
    for value in values:
        for t in filter(None, (p.strip() for p in value.split(","))):
            if t.startswith("!"):
                if not version.at_least(22):
                    raise PlacementError(400, f"Invalid query string parameters: forbidden trait {t}")
                forbidden.add(t[1:])
            else:
                required.add(t)
    return required, forbidden


def parse_member_of(values: list[str]) -> list[set[str]]:
    """Each ``member_of`` (``in:a,b`` or ``a``) is a set the provider must share an aggregate with."""
    out = []
    for value in values:
        out.append({a for a in value.removeprefix("in:").split(",") if a})
    return out


def matches(
    host: Host,
    *,
    resources: dict[str, int] | None = None,
    required: set[str] = frozenset(),  # type: ignore[assignment]
    forbidden: set[str] = frozenset(),  # type: ignore[assignment]
    member_of: list[set[str]] = (),  # type: ignore[assignment]
) -> bool:
    traits = set(host.traits)
    if not required <= traits or forbidden & traits:
        return False
    aggregates = set(host.provider_aggregates)
    if any(not group & aggregates for group in member_of):
        return False
    if resources:
        usages = host.usages()
        for rc, amount in resources.items():
            raw = host.inventories.get(rc)
            if raw is None:
                return False
            inv = Inventory(**raw)
            if amount and (amount < inv.min_unit or amount > inv.max_unit or amount % inv.step_size):
                return False
            if usages.get(rc, 0) + amount > inv.capacity:
                return False
    return True


class Collection:
    def __init__(self, view: ProviderView) -> None:
        self._view = view

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        version: Version = req.context.placement_version
        name, uuid = req.get_param("name"), req.get_param("uuid")
        text = req.get_param("resources")
        resources = parse_resources(text) if text else None
        required, forbidden = parse_traits(params(req, "required"), version)
        member_of = parse_member_of(params(req, "member_of"))
        found = [
            provider_doc(h, version)
            for h in sorted(self._view.refresh().values(), key=lambda h: h.hostname)
            if (name is None or h.hostname == name)
            and (uuid is None or str(h.id) == uuid)
            and matches(h, resources=resources, required=required, forbidden=forbidden, member_of=member_of)
        ]
        ok(resp, {"resource_providers": found})

    @placement_call()
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        raise PlacementError(
            405, "Resource providers are the compute hosts: a hypervisor worker registers its host."
        )


class Item:
    def __init__(self, view: ProviderView) -> None:
        self._view = view

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        ok(resp, provider_doc(provider(self._view, uuid), req.context.placement_version))


def provider(view: ProviderView, uuid: str) -> Host:
    host = view.get(uuid)
    if host is None:
        raise PlacementError(404, f"No resource provider with uuid {uuid} found", "placement.undefined_code")
    return host
