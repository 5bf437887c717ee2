"""What a server gives back when it is deleted, fails or moves: its claims on hosts, its addresses,
its quota usage and its server group membership. Each function changes the aggregates it returns
(only those that changed), for the caller's one atomic append."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from commands import loaders
from commands.host import Host
from commands.instance import Instance
from commands.network import Network
from commands.server_group import ServerGroup
from commands.unit_of_work import UnitOfWork
from commands.usage import ProjectUsage


def on_host(uow: UnitOfWork, inst: Instance) -> Sequence[Host]:
    """The claims the instance holds: on its host and, while it moves, on the other side too
    (the destination's claim, the source's migration claim)."""
    move = inst.migration or {}
    hosts = []
    for hostname in dict.fromkeys(h for h in (inst.host, move.get("source"), move.get("dest")) if h):
        host = loaders.host(uow, hostname)
        host.release(inst.server_id)
        if move:
            host.release_migration(move["id"])
        if host.pending_events:
            hosts.append(host)
    return hosts


def from_quota(uow: UnitOfWork, inst: Instance, resources_only: bool = False) -> Sequence[ProjectUsage]:
    """The project's usage, giving back what the instance held (only its cores and RAM on a fault)."""
    usage = loaders.usage(uow, inst.project_id)
    held = inst.server_id in usage.holdings
    books = loaders.usage_to_save(usage) if held else [usage]
    current = books[-1]
    server = inst.server_id
    changed = current.release_resources(server) if resources_only else current.release(server)
    return books if changed else ()


def on_networks(uow: UnitOfWork, inst: Instance) -> Sequence[Network]:
    """The networks whose addresses the (deleted) instance gives back."""
    networks = []
    for port in inst.ports:
        network = uow.get(Network, UUID(port["network_id"]), f"Network {port['network_id']}")
        if network.release(inst.server_id):
            networks.append(network)
    return networks


def from_group(uow: UnitOfWork, inst: Instance) -> Sequence[ServerGroup]:
    """The server group the (deleted) instance leaves."""
    group = loaders.server_group_of(uow, inst.server_id)
    if group is None or inst.server_id not in group.members:
        return ()
    group.remove_member(inst.server_id)
    return (group,)
