"""``stratus simulate``: many simulated hosts in one process (the parts are in ``workers.simulator``)."""

from __future__ import annotations

import threading
from typing import Any

import libvirt
from eventsourcing.persistence import InfrastructureFactory

from commands.app import Stratus
from commands.bus import bootstrap
from stratus.config import Settings
from stratus.eventstore import Factory, NatsBridge, part_store
from workers.consumer import stop_on_signals
from workers.simulator import HostShape, SimulatedCloud, host_names, run


def application(factory: InfrastructureFactory[Any], settings: Settings) -> Stratus:
    """The simulated hosts' aggregates, kept up to ``STRATUS_HYPERVISOR_AGGREGATE_CACHE`` as a
    hypervisor worker's (the process stands for many of them)."""
    return Stratus(factory, cache_size=settings.hypervisor_aggregate_cache)


def factory(bridge: NatsBridge, settings: Settings) -> Factory:
    """The simulated hosts' event store: their loads checked as docs/trust.md says, the per-aggregate
    heads kept as their aggregate cache sizes them (``stratus.config.recorder_heads``)."""
    return part_store(bridge, settings, settings.hypervisor_aggregate_cache)


def main(
    settings: Settings,
    hosts: int,
    vcpus: int = HostShape.vcpus,
    memory_mb: int = HostShape.memory_mb,
    disk_gb: int = HostShape.disk_gb,
    threads: int = 8,
    prefix: str = "sim",
) -> int:
    """``hosts`` hosts of the given size until SIGTERM/SIGINT."""
    shape = HostShape(vcpus=vcpus, memory_mb=memory_mb, disk_gb=disk_gb)
    stop = threading.Event()
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    directory = settings.data_dir / "simulator"
    with (
        stop_on_signals(stop),
        NatsBridge(settings.nats_urls, name="stratus-simulator", seed_file=settings.nats_seed_file) as bridge,
    ):
        bus = bootstrap(application(factory(bridge, settings), settings))
        cloud = SimulatedCloud(bus, directory, host_names(hosts, prefix), shape)
        try:
            run(settings, cloud, bridge=bridge, stop=stop, threads=threads)
        finally:
            cloud.close()
    return 0
