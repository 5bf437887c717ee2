"""``stratus projector``: the read models' composition root (the loop is ``projections.runner.run``)."""

from __future__ import annotations

import logging
import threading

from processes import logs, memtrace
from processes.telemetry import projector_probes
from projections.rebuild import SpareKeeper
from projections.runner import read_models_url, run
from stratus import collector
from stratus.config import Settings
from workers.consumer import stop_on_signals

log = logging.getLogger("stratus.projector")


def main(settings: Settings, *, batch_size: int = 500) -> int:
    """Follow the log until SIGTERM/SIGINT (the batch under way is finished), then close cleanly;
    meanwhile keep a spare generation of the read models' tables ready for the next rebuild."""
    logs.configure(settings.log_format)
    memtrace.install(settings.memory_trace_dir, "projector")  # off unless STRATUS_MEMORY_TRACE_DIR
    stop = threading.Event()
    spare = SpareKeeper(read_models_url(settings), stop)  # started with the rest, below
    with stop_on_signals(stop), projector_probes(settings), collector.frozen(), spare:
        run(settings, stop, batch_size=batch_size)
    log.info("projector stopped")
    return 0
