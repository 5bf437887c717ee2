"""``stratus notifier``: Nova's versioned notifications from the log (``projections.notifications``)."""

from __future__ import annotations

import logging
import threading

from processes import logs
from processes.telemetry import worker_probes
from projections.notifications import open_notifier
from stratus.config import Settings
from stratus.eventstore import EventStoreUnavailable
from workers.consumer import stop_on_signals

log = logging.getLogger("stratus.notifications")


def main(settings: Settings) -> int:
    """Publish until SIGTERM/SIGINT, opening the notifier again after the event store was away."""
    logs.configure(settings.log_format)
    stop = threading.Event()
    with stop_on_signals(stop), worker_probes(settings, settings.notifier_metrics_bind, "stratus-notifier"):
        while not stop.is_set():
            try:
                with open_notifier(settings) as notifier:
                    notifier.run(stop)
            except EventStoreUnavailable as e:
                log.warning("notifier: %s; retrying", e)
                stop.wait(1.0)
    return 0
