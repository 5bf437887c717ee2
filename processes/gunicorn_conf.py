"""gunicorn's settings module for the API (``--config python:processes.gunicorn_conf``).

Its hook forgets a dead worker's live gauges in the metrics directory (prometheus_client's
multiprocess mode); with ``STRATUS_LOG_FORMAT=json`` gunicorn's own lines (a worker booted, one
killed) are JSON too, as the API's.
"""

from __future__ import annotations

import signal
from typing import Any

from processes import memtrace
from processes.logs import JsonFormatter
from stratus import metrics
from stratus.config import Settings

_settings = Settings.from_env()

if _settings.log_format == "json":
    # gunicorn merges this over its own logging configuration (key by key): every line goes to
    # standard error through the root logger, in JSON (its handler "error_console" takes the formatter
    # by the name it uses, "generic"); gunicorn's access lines are left out, the API logs its own,
    # which carry the request id (api.telemetry.RequestMetrics)
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "root": {"level": "INFO", "handlers": ["error_console"]},
        "loggers": {
            "gunicorn.error": {"level": "INFO", "handlers": [], "propagate": True},
            "gunicorn.access": {"level": "WARNING", "handlers": [], "propagate": False},
        },
        "formatters": {"generic": {"()": JsonFormatter}},
    }


def child_exit(server: Any, worker: Any) -> None:
    if _settings.metrics_multiproc_dir is not None:
        metrics.mark_process_dead(worker.pid, _settings.metrics_multiproc_dir)


def post_worker_init(worker: Any) -> None:
    # after gunicorn set the worker's signal handlers (its SIGUSR2 would end the worker otherwise)
    memtrace.install(_settings.memory_trace_dir, "api")
    stop_streams = getattr(worker.wsgi, "stop_streams", None)  # the watch's app (api.watch.WatchApp)
    if stop_streams is not None:
        _before_graceful_stop(stop_streams)


def _before_graceful_stop(stop_streams: Any) -> None:
    """On the worker's SIGTERM, the open event streams end first, then gunicorn's own handler runs:
    a gthread worker waits for its requests to finish, and a stream would otherwise hold it until
    the graceful timeout and a SIGKILL."""
    graceful = signal.getsignal(signal.SIGTERM)

    def stopping(signum: int, frame: Any) -> None:
        stop_streams()
        if callable(graceful):
            graceful(signum, frame)

    signal.signal(signal.SIGTERM, stopping)
