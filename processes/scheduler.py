"""``stratus scheduler``: the scheduler's composition root (the loop is ``workers.scheduler.run``)."""

from __future__ import annotations

import threading

from commands.app import Stratus
from processes import logs
from processes.telemetry import worker_probes
from stratus.config import Settings
from stratus.eventstore import Factory, NatsBridge
from workers.consumer import stop_on_signals
from workers.scheduler import DURABLE, run
from workers.scheduling import Shard


def main(settings: Settings) -> int:
    """Schedule until SIGTERM/SIGINT, sharded and batched as ``settings`` say."""
    logs.configure(settings.log_format)  # INFO and above, with time and logger, as the other parts
    shard = Shard.parse(settings.scheduler_shard)  # a bad value stops it here, naming the variable
    stop = threading.Event()
    with (
        stop_on_signals(stop),
        worker_probes(settings, settings.scheduler_metrics_bind, "stratus-scheduler", [DURABLE]),
        NatsBridge(settings.nats_urls, name="stratus-scheduler", seed_file=settings.nats_seed_file) as bridge,
    ):
        app = Stratus(Factory(bridge=bridge, settings=settings, verify_loads=True))  # docs/trust.md
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
