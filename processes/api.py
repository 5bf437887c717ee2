"""``stratus api`` and ``stratus watch``: gunicorn, and the apps it loads in each worker.

``stratus api`` execs gunicorn with ``processes.api:get_app()``; ``stratus watch`` with
``processes.api:get_watch_app()`` under the threaded worker. Both apps are ``api.app.LazyApp``s:
they connect to nothing until a worker, after gunicorn's fork, serves its first request.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import NoReturn

from api.app import LazyApp
from api.watch import WatchApp
from processes import logs
from processes.spawn import child_env, exec_program, version_at_least
from stratus.config import Settings

API_APP = "processes.api:get_app()"
WATCH_APP = "processes.api:get_watch_app()"
# Threaded workers keep connections alive. gunicorn's default closes an idle one after 2 s, which is
# openstacksdk's polling interval: its next request then met a connection being closed ("Remote end
# closed connection without response"). Longer than any client's poll.
API_KEEPALIVE_SECONDS = 75
# ``stratus watch``'s address when it runs alone (``stratus run`` puts it beside the API).
WATCH_BIND = "127.0.0.1:8775"


def get_app() -> LazyApp:
    """gunicorn's entry point: ``gunicorn 'processes.api:get_app()'``."""
    logs.configure()
    return LazyApp()


def get_watch_app() -> WatchApp:
    """gunicorn's entry point for ``stratus watch``:
    ``gunicorn -k gthread 'processes.api:get_watch_app()'``."""
    logs.configure()
    # gunicorn's thread pool, as ``stratus watch`` sized it (its --threads or STRATUS_WATCH_THREADS)
    return WatchApp(Settings.from_env().watch_threads)


def serve(settings: Settings) -> NoReturn:
    """The Compute API: exec gunicorn with ``settings``' address, workers and threads."""
    argv = [
        sys.executable, "-m", "gunicorn",
        "--bind", settings.api_bind,
        "--workers", str(settings.api_workers),
        "--threads", str(settings.api_threads),
        "--keep-alive", str(API_KEEPALIVE_SECONDS),
        "--graceful-timeout", "10",
        "--access-logfile", "-",
        *_no_control_socket(),
        API_APP,
    ]  # fmt: skip
    exec_program(argv, child_env(settings))


def serve_watch(settings: Settings) -> NoReturn:
    """The event stream over HTTP (SSE): the API app under gunicorn's threaded worker, one thread per
    open stream, so long-lived readers never take the API's sync workers (docs/integrators.md)."""
    if settings.watch_bind is None:
        settings = dataclasses.replace(settings, watch_bind=WATCH_BIND)
    argv = [
        sys.executable, "-m", "gunicorn",
        "--bind", str(settings.watch_bind),
        "--worker-class", "gthread",
        "--workers", "1",
        "--threads", str(settings.watch_threads),
        "--timeout", "0",  # a stream is idle between events by design; keep-alives show it is alive
        "--graceful-timeout", "5",
        "--access-logfile", "-",
        *_no_control_socket(),
        WATCH_APP,
    ]  # fmt: skip
    # The app caps its streams under the pool it is served by: it learns its size from the settings.
    exec_program(argv, child_env(settings))


def _no_control_socket() -> list[str]:
    """One API per machine needs no control socket, and two (tests, say) would share its path."""
    return ["--no-control-socket"] if version_at_least("gunicorn", 27) else []
