"""``stratus hypervisor``: one compute host's composition root (the loop is ``workers.hypervisor.run``)."""

from __future__ import annotations

import threading
from typing import Any

from eventsourcing.persistence import InfrastructureFactory

from commands.app import Stratus
from processes import logs, memtrace
from processes.telemetry import worker_probes
from stratus.config import Settings
from stratus.eventstore import Factory, NatsBridge, part_store
from stratus.eventstore.subjects import encode_token
from workers.consumer import stop_on_signals
from workers.hypervisor import durable_name, run
from workers.libvirt_driver import EventLoop, LibvirtDriver


def application(factory: InfrastructureFactory[Any], settings: Settings) -> Stratus:
    """A host's aggregates: its servers (and itself), kept up to ``STRATUS_HYPERVISOR_AGGREGATE_CACHE``."""
    return Stratus(factory, cache_size=settings.hypervisor_aggregate_cache)


def factory(bridge: NatsBridge, settings: Settings) -> Factory:
    """The host's event store: its loads checked as docs/trust.md says, its per-aggregate heads kept
    as its aggregate cache sizes them (``stratus.config.recorder_heads``)."""
    return part_store(bridge, settings, settings.hypervisor_aggregate_cache)


def main(settings: Settings) -> int:
    """Serve the host ``settings.host_name`` on ``settings.libvirt_uri`` until SIGTERM/SIGINT."""
    logs.configure(settings.log_format)  # INFO and above, with time and logger, as the other parts
    memtrace.install(settings.memory_trace_dir, "hypervisor")  # off unless STRATUS_MEMORY_TRACE_DIR
    stop = threading.Event()
    instances_path = settings.data_dir / "instances" / encode_token(settings.host_name)
    instances_path.mkdir(parents=True, exist_ok=True)
    EventLoop.start()  # before the connection opens, so that it delivers domain events
    timeout = settings.shutdown_timeout_seconds
    driver = LibvirtDriver.open(settings.libvirt_uri, instances_path=instances_path, shutdown_timeout=timeout)
    try:
        with (
            stop_on_signals(stop),
            worker_probes(
                settings,
                settings.hypervisor_metrics_bind,
                f"stratus-hypervisor-{settings.host_name}",
                [durable_name(settings.host_name)],
            ),
            NatsBridge(
                settings.nats_urls,
                name=f"stratus-hypervisor-{settings.host_name}",
                seed_file=settings.nats_seed_file,
            ) as bridge,
        ):
            app = application(factory(bridge, settings), settings)
            run(
                settings,
                bridge=bridge,
                app=app,
                driver=driver,
                stop=stop,
                instances_path=instances_path,
            )
    finally:
        driver.close()
    return 0
