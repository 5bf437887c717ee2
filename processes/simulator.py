"""``stratus simulate``: many simulated hosts in one process (the parts are in ``workers.simulator``)."""

from __future__ import annotations

import threading

import libvirt

from commands.app import Stratus
from commands.bus import bootstrap
from stratus.config import Settings
from stratus.eventstore import Factory, NatsBridge
from workers.consumer import stop_on_signals
from workers.simulator import HostShape, SimulatedCloud, host_names, run


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
        bus = bootstrap(Stratus(Factory(bridge=bridge, settings=settings, verify_loads=True)))
        cloud = SimulatedCloud(bus, directory, host_names(hosts, prefix), shape)
        try:
            run(settings, cloud, bridge=bridge, stop=stop, threads=threads)
        finally:
            cloud.close()
    return 0
