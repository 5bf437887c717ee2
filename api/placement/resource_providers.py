"""``/placement/resource_providers``: every compute host is one provider (uuid: its Host aggregate's id),
and operators create others (``POST``: sharing pools, bandwidth, nested children), rename and re-parent
them (``PUT``) and delete them (``DELETE``), as Placement does at each microversion.

A compute host's provider is registered by its hypervisor worker and goes with its host: it cannot be
renamed, given a parent or deleted here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID, uuid4

import falcon

from api import error_codes as codes
from api.placement.common import PlacementError, Version, body, link, ok, params, placement_call
from api.placement.view import ProviderView, has_children, root_of
from commands.bus import MessageBus
from commands.provider import MAX_NAME
from commands.providers.manage import CreateProvider, DeleteProvider, UpdateProvider
from commands.resource_provider import Inventory, Provider


def provider_doc(p: Provider, version: Version, providers: Mapping[UUID, Provider]) -> dict[str, Any]:
    uuid = str(p.id)
    base = f"/placement/resource_providers/{uuid}"
    links = [link("self", base), link("inventories", f"{base}/inventories"), link("usages", f"{base}/usages")]
    if version.at_least(1):
        links.append(link("aggregates", f"{base}/aggregates"))
    if version.at_least(6):
        links.append(link("traits", f"{base}/traits"))
    if version.at_least(11):
        links.append(link("allocations", f"{base}/allocations"))
    doc: dict[str, Any] = {"uuid": uuid, "name": p.provider_name, "generation": p.generation, "links": links}
    if version.at_least(14):
        doc["parent_provider_uuid"] = p.parent_provider_uuid
        doc["root_provider_uuid"] = root_of(providers, p)
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
    host: Provider,
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


def _uuid(value: Any, field: str) -> str:
    try:
        return str(UUID(value)) if isinstance(value, str) else str(UUID(""))
    except ValueError:
        raise PlacementError(
            400,
            f"JSON does not validate: {str(value)[:60]!r} is not a 'uuid'. Failed validating 'format' "
            f"in schema['properties']['{field}']",
        ) from None


def _provider_body(req: falcon.Request, *, create: bool) -> dict[str, Any]:
    """Placement's POST/PUT schemas: ``name`` (required, at most 200 characters), ``uuid`` (POST only),
    ``parent_provider_uuid`` (1.14+, a uuid or null); nothing else."""
    doc = body(req)
    allowed = {"name", "uuid"} if create else {"name"}
    if req.context.placement_version.at_least(14):
        allowed.add("parent_provider_uuid")
    extra = sorted(set(doc) - allowed)
    if extra:
        raise PlacementError(
            400,
            f"JSON does not validate: Additional properties are not allowed ({extra[0]!r} was unexpected)",
        )
    name = doc.get("name")
    if not isinstance(name, str):
        raise PlacementError(400, "JSON does not validate: 'name' is a required property (a string)")
    if len(name) > MAX_NAME:
        raise PlacementError(
            400,
            f"JSON does not validate: the name is too long. Failed validating 'maxLength' "
            f"in schema['properties']['name']: {MAX_NAME}",
        )
    out: dict[str, Any] = {"name": name}
    if "uuid" in doc:
        out["uuid"] = _uuid(doc["uuid"], "uuid")
    if "parent_provider_uuid" in doc:
        parent = doc["parent_provider_uuid"]
        out["parent_provider_uuid"] = None if parent is None else _uuid(parent, "parent_provider_uuid")
    return out


class Collection:
    """``GET``/``POST /placement/resource_providers``."""

    def __init__(self, bus: MessageBus, view: ProviderView) -> None:
        self._bus, self._view = bus, view

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        version: Version = req.context.placement_version
        name, uuid = req.get_param("name"), req.get_param("uuid")
        text = req.get_param("resources")
        resources = parse_resources(text) if text else None
        required, forbidden = parse_traits(params(req, "required"), version)
        member_of = parse_member_of(params(req, "member_of"))
        providers = self._view.refresh()
        in_tree = req.get_param("in_tree") if version.at_least(14) else None
        tree = None
        if in_tree is not None:
            try:
                member = providers.get(UUID(in_tree))
            except ValueError:
                detail = f"Invalid query string parameters: {in_tree!r} is not a 'uuid'"
                raise PlacementError(400, detail) from None
            tree = root_of(providers, member) if member is not None else ""
        found = [
            provider_doc(p, version, providers)
            for p in sorted(providers.values(), key=lambda p: p.provider_name)
            if (name is None or p.provider_name == name)
            and (uuid is None or str(p.id) == uuid)
            and (tree is None or root_of(providers, p) == tree)
            and matches(p, resources=resources, required=required, forbidden=forbidden, member_of=member_of)
        ]
        ok(resp, {"resource_providers": found})

    @placement_call()
    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        """201 and a Location before 1.20; from 1.20, 200 with the provider (as Placement)."""
        version: Version = req.context.placement_version
        doc = _provider_body(req, create=True)
        uuid = UUID(doc["uuid"]) if "uuid" in doc else uuid4()
        self._bus.handle(CreateProvider(uuid, doc["name"], doc.get("parent_provider_uuid")))
        resp.set_header("Location", f"/placement/resource_providers/{uuid}")
        if not version.at_least(20):
            resp.status = falcon.HTTP_201
            return
        providers = self._view.refresh()
        ok(resp, provider_doc(providers[uuid], version, providers))


class Item:
    """``GET``/``PUT``/``DELETE /placement/resource_providers/{uuid}``."""

    def __init__(self, bus: MessageBus, view: ProviderView) -> None:
        self._bus, self._view = bus, view

    @placement_call()
    def on_get(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        p = provider(self._view, uuid)
        ok(resp, provider_doc(p, req.context.placement_version, self._view.refresh()))

    @placement_call()
    def on_put(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        """Rename; from 1.14 give a root a parent; from 1.37 re-parent or un-parent too."""
        version: Version = req.context.placement_version
        provider(self._view, uuid)
        doc = _provider_body(req, create=False)
        parent = doc.get("parent_provider_uuid", ...)
        p = self._bus.handle(UpdateProvider(uuid, doc["name"], parent, reparenting=version.at_least(37)))
        ok(resp, provider_doc(p, version, self._view.refresh()))

    @placement_call()
    def on_delete(self, req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
        if self._view.get(uuid) is None:
            raise PlacementError(404, f"No resource provider with uuid {uuid} found for delete")
        self._bus.handle(DeleteProvider(uuid, lambda u: has_children(self._view.refresh(), u)))
        resp.status = falcon.HTTP_204


def provider(view: ProviderView, uuid: str) -> Provider:
    p = view.get(uuid)
    if p is None:
        raise PlacementError(
            404, f"No resource provider with uuid {uuid} found", codes.PLACEMENT_DEFAULT.code
        )
    return p
