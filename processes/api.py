"""``stratus api`` and ``stratus watch``: gunicorn, and the apps it loads in each worker.

``stratus api`` execs gunicorn with ``processes.api:get_app()``; ``stratus watch`` with
``processes.api:get_watch_app()`` under the threaded worker. Both apps are ``api.app.LazyApp``s:
they connect to nothing until a worker, after gunicorn's fork, serves its first request.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from processes import logs
from processes.spawn import child_env, exec_program, version_at_least
from stratus.config import MULTIPROC_DIR_ENV, Settings

if TYPE_CHECKING:  # imported where gunicorn loads the app, not by ``stratus api`` before its exec
    from api.app import LazyApp
    from api.watch import WatchApp

API_APP = "processes.api:get_app()"
# gunicorn's settings module: its hooks (a worker's metrics files) and, for JSON logs, its log format.
GUNICORN_CONFIG = "python:processes.gunicorn_conf"
WATCH_APP = "processes.api:get_watch_app()"
# Threaded workers keep connections alive. gunicorn's default closes an idle one after 2 s, which is
# openstacksdk's polling interval: its next request then met a connection being closed ("Remote end
# closed connection without response"). Longer than any client's poll.
API_KEEPALIVE_SECONDS = 75
# glibc's bound on malloc arenas, set in gunicorn's environment before it starts (``serve``).
MALLOC_ARENA_MAX_ENV = "MALLOC_ARENA_MAX"
API_MALLOC_ARENAS = "2"
# ``stratus watch``'s address when it runs alone (``stratus run`` puts it beside the API).
WATCH_BIND = "127.0.0.1:8775"


def get_app() -> LazyApp:
    """gunicorn's entry point: ``gunicorn 'processes.api:get_app()'``."""
    from api.app import LazyApp

    logs.configure(Settings.from_env().log_format)
    return LazyApp()


def get_watch_app() -> WatchApp:
    """gunicorn's entry point for ``stratus watch``:
    ``gunicorn -k gthread 'processes.api:get_watch_app()'``."""
    from api.watch import WatchApp

    settings = Settings.from_env()
    logs.configure(settings.log_format)
    # gunicorn's thread pool, as ``stratus watch`` sized it (its --threads or STRATUS_WATCH_THREADS)
    return WatchApp(settings.watch_threads)


def serve(settings: Settings) -> NoReturn:
    """The Compute API: exec gunicorn with ``settings``' address, workers and threads; its workers
    keep their metrics in one directory, emptied here, which ``/metrics`` sums (multiprocess mode)."""
    exec_program(api_argv(settings), gunicorn_env(settings, metrics_dir(settings)))


def api_argv(settings: Settings, app: str = API_APP) -> list[str]:
    """gunicorn's command line for the API (``app``: another WSGI app served the same way, a bench's)."""
    return [
        sys.executable, "-m", "gunicorn",
        "--config", GUNICORN_CONFIG,
        "--bind", settings.api_bind,
        "--workers", str(settings.api_workers),
        "--threads", str(settings.api_threads),
        "--keep-alive", str(API_KEEPALIVE_SECONDS),
        "--graceful-timeout", "10",
        *_preload(settings),
        *_access_log(settings),
        *_no_control_socket(),
        app,
    ]  # fmt: skip


def _preload(settings: Settings) -> list[str]:
    """With several workers, the master imports the app's modules once and each worker is forked
    with them (~1.3 s of CPU a worker, and their pages shared until written), instead of each
    importing them again: safe because the app (``LazyApp``) connects to nothing until a worker
    serves its first request. With one worker there is nothing to share, and the master stays
    small (~29 MiB, not the app's ~70 MiB of modules counted twice in the parts' RSS)."""
    return ["--preload"] if settings.api_workers > 1 else []


def gunicorn_env(settings: Settings, multiproc_dir: Path) -> dict[str, str]:
    """The API's gunicorn environment: a part's (``child_env``), its workers' metrics directory, and
    glibc's malloc arenas bounded. glibc gives each thread that allocates an arena of its own (up to 8
    per core): a worker's 16 threads then hold memory freed in one arena that another cannot reuse.
    Two arenas measured 4 MiB less RSS after 2,000 servers and less growth under load
    (docs/performance.md, "Memory"); an operator's own ``MALLOC_ARENA_MAX`` is kept."""
    env = child_env(settings)
    env[MULTIPROC_DIR_ENV] = str(multiproc_dir)
    env.setdefault(MALLOC_ARENA_MAX_ENV, API_MALLOC_ARENAS)
    return env


def metrics_dir(settings: Settings) -> Path:
    """The API's metrics directory (``PROMETHEUS_MULTIPROC_DIR``, or one per port under the data
    directory), emptied: the files of an earlier run's workers would be summed in."""
    port = settings.api_bind.rpartition(":")[2]
    path = settings.metrics_multiproc_dir or settings.data_dir.absolute() / "metrics" / f"api-{port}"
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def _access_log(settings: Settings) -> list[str]:
    """gunicorn's access log, for text logs; JSON logs have the API's own access lines, which carry
    the request id (``api.telemetry.RequestMetrics``)."""
    return ["--access-logfile", "-"] if settings.log_format == "text" else []


def serve_watch(settings: Settings) -> NoReturn:
    """The event stream over HTTP (SSE): the API app under gunicorn's threaded worker, one thread per
    open stream, so long-lived readers never take the API's sync workers (docs/integrators.md)."""
    if settings.watch_bind is None:
        settings = dataclasses.replace(settings, watch_bind=WATCH_BIND)
    argv = [
        sys.executable, "-m", "gunicorn",
        "--config", GUNICORN_CONFIG,
        "--bind", str(settings.watch_bind),
        "--worker-class", "gthread",
        "--workers", "1",
        "--threads", str(settings.watch_threads),
        "--timeout", "0",  # a stream is idle between events by design; keep-alives show it is alive
        "--graceful-timeout", "5",
        *_access_log(settings),
        *_no_control_socket(),
        WATCH_APP,
    ]  # fmt: skip
    # The app caps its streams under the pool it is served by: it learns its size from the settings.
    exec_program(argv, child_env(settings))


def _no_control_socket() -> list[str]:
    """One API per machine needs no control socket, and two (tests, say) would share its path."""
    return ["--no-control-socket"] if version_at_least("gunicorn", 27) else []
