"""``/v2.1/os-networks``: Nova's network proxy, until microversion 2.35 (404 from 2.36).

Nova answers it from Neutron with two fields of nova-network's thirty filled in (``id`` and
``label``; the others ``null``, and the administrative ones only for admins); Stratus answers it the
same way from its fixed network (``commands/network.py``). Creating, deleting and associating
networks went with nova-network: Nova's 410 Gone.
"""

from __future__ import annotations

from typing import Any

import falcon

from api import auth
from api.errors import Gone, ItemNotFound
from api.versions import at_least
from commands.network import FixedNetwork

LAST_MICROVERSION = 35
_FIELDS = ("id", "cidr", "netmask", "gateway", "broadcast", "dns1", "dns2", "cidr_v6", "gateway_v6",
           "label", "netmask_v6")  # fmt: skip
_ADMIN_FIELDS = ("created_at", "updated_at", "deleted_at", "deleted", "injected", "bridge", "vlan",
                 "vpn_public_address", "vpn_public_port", "vpn_private_address", "dhcp_start", "project_id",
                 "host", "bridge_interface", "multi_host", "priority", "rxtx_base", "mtu", "dhcp_server",
                 "enable_dhcp", "share_address")  # fmt: skip


def _proxy(req: falcon.Request, resp: falcon.Response, resource: object, params: dict[str, Any]) -> None:
    if at_least(req, LAST_MICROVERSION + 1):
        raise ItemNotFound("The resource could not be found.")


def network_view(network: FixedNetwork, admin: bool) -> dict[str, Any]:
    fields = _FIELDS + (_ADMIN_FIELDS if admin else ())
    known = {"id": str(network.id), "label": network.name}
    return {field: known.get(field) for field in fields}


@falcon.before(_proxy)
class NetworkCollection:
    """``GET /v2.1/os-networks``; ``POST`` (and ``/add``) are gone, as nova-network."""

    def __init__(self, network: FixedNetwork | None) -> None:
        self._network = network

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        admin, network = auth.is_admin(req.context.actor), self._network
        resp.media = {"networks": [network_view(network, admin)] if network else []}

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        raise Gone("Creating networks went with nova-network (removed in Nova 21.0.0).")


@falcon.before(_proxy)
class NetworkItem:
    """``GET /v2.1/os-networks/{id}``; ``DELETE`` is gone, as nova-network."""

    def __init__(self, network: FixedNetwork | None) -> None:
        self._network = network

    def on_get(self, req: falcon.Request, resp: falcon.Response, network_id: str) -> None:
        network = self._network
        if network is None or network_id != str(network.id):
            raise ItemNotFound("Network not found")
        resp.media = {"network": network_view(network, auth.is_admin(req.context.actor))}

    def on_delete(self, req: falcon.Request, resp: falcon.Response, network_id: str) -> None:
        raise Gone("Deleting networks went with nova-network (removed in Nova 21.0.0).")


def add_routes(app: falcon.App, network: FixedNetwork | None) -> None:
    """``network``: the fixed network the bus gives servers addresses on (None: none)."""
    app.add_route("/v2.1/os-networks", NetworkCollection(network))
    app.add_route("/v2.1/os-networks/{network_id}", NetworkItem(network))
