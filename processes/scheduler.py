"""``stratus scheduler``: the scheduler's composition root (the loop is ``workers.scheduler.run``)."""

from __future__ import annotations

import threading
from typing import Any

from eventsourcing.persistence import InfrastructureFactory

from commands.app import Stratus
from processes import logs, memtrace
from processes.telemetry import worker_probes
from stratus.config import Settings
from stratus.eventstore import Factory, NatsBridge, part_store
from workers.consumer import stop_on_signals
from workers.scheduler import DURABLE, run
from workers.scheduling import Shard


def application(factory: InfrastructureFactory[Any], settings: Settings) -> Stratus:
    """The scheduler's aggregates: its hosts and the servers it places one by one, kept up to
    ``STRATUS_SCHEDULER_AGGREGATE_CACHE`` of them."""
    return Stratus(factory, cache_size=settings.scheduler_aggregate_cache)


def factory(bridge: NatsBridge, settings: Settings) -> Factory:
    """The scheduler's event store: its loads checked as docs/trust.md says, its per-aggregate heads
    kept as its aggregate cache sizes them (``stratus.config.recorder_heads``)."""
    return part_store(bridge, settings, settings.scheduler_aggregate_cache)


def main(settings: Settings) -> int:
    """Schedule until SIGTERM/SIGINT, sharded and batched as ``settings`` say."""
    logs.configure(settings.log_format)  # INFO and above, with time and logger, as the other parts
    memtrace.install(settings.memory_trace_dir, "scheduler")  # off unless STRATUS_MEMORY_TRACE_DIR
    shard = Shard.parse(settings.scheduler_shard)  # a bad value stops it here, naming the variable
    stop = threading.Event()
    with (
        stop_on_signals(stop),
        worker_probes(settings, settings.scheduler_metrics_bind, "stratus-scheduler", [DURABLE]),
        NatsBridge(settings.nats_urls, name="stratus-scheduler", seed_file=settings.nats_seed_file) as bridge,
    ):
        app = application(factory(bridge, settings), settings)
        run(
            settings,
            bridge=bridge,
            app=app,
            stop=stop,
            shard=shard,
            ack_wait=settings.scheduler_ack_wait_seconds,
            batch=settings.scheduler_batch,
        )
    return 0
