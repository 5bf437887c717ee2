"""``stratus metadata``: the metadata service (docs/metadata.md) under gunicorn's threaded worker.

It reads the read models and the user-data store only, so it needs neither JetStream nor libvirt:
any machine that reaches PostgreSQL and shares the data directory can serve it, one per network
that guests reach 169.254.169.254 from.
"""

from __future__ import annotations

import io
import sys
from typing import TYPE_CHECKING, NoReturn, cast

from processes import logs
from processes.spawn import child_env, exec_program, version_at_least
from stratus.config import Settings

if TYPE_CHECKING:  # imported where gunicorn loads the app, not by ``stratus metadata`` before its exec
    from api.metadata.app import MetadataApp

METADATA_APP = "processes.metadata:get_app()"
# ``stratus metadata``'s address when it runs alone (``stratus run`` puts it at the API's port + 2).
METADATA_BIND = "127.0.0.1:8780"


def get_app() -> MetadataApp:
    """gunicorn's entry point: ``gunicorn 'processes.metadata:get_app()'``; in the worker, so that its
    probes (``STRATUS_METADATA_METRICS_BIND``) read the worker's counters."""
    from api.metadata.app import MetadataApp
    from processes.telemetry import metadata_probes

    settings = Settings.from_env()
    logs.configure(settings.log_format)
    metadata_probes(settings)  # a daemon thread, for as long as the worker lives
    return MetadataApp()


def serve(settings: Settings) -> NoReturn:
    """Exec gunicorn on ``settings.metadata_bind``, one worker of ``metadata_threads`` threads."""
    argv = [
        sys.executable, "-m", "gunicorn",
        "--bind", settings.metadata_bind or METADATA_BIND,
        "--worker-class", "gthread",
        "--workers", "1",
        "--threads", str(settings.metadata_threads),
        "--graceful-timeout", "5",
        "--access-logfile", "-",
        # one per machine needs no control socket (gunicorn 27+ makes one)
        *(["--no-control-socket"] if version_at_least("gunicorn", 27) else []),
        METADATA_APP,
    ]  # fmt: skip
    exec_program(argv, child_env(settings))


def proxy(settings: Settings, instance_id: str, project_id: str, service: str | None) -> int:
    """``stratus metadata-proxy``: relay the one guest connection on stdin/stdout to the service at
    ``service`` (default: ``settings.metadata_bind``), signed for ``instance_id`` of ``project_id``."""
    if settings.metadata_proxy_key_file is None:
        print("stratus metadata-proxy: STRATUS_METADATA_PROXY_KEY_FILE is not set", file=sys.stderr)
        return 2
    try:
        key = settings.metadata_proxy_key_file.read_bytes().strip()
    except OSError as e:
        print(f"stratus metadata-proxy: cannot read the proxy key: {e}", file=sys.stderr)
        return 2
    host, _, port = (service or settings.metadata_bind or METADATA_BIND).rpartition(":")
    host = "127.0.0.1" if host in ("", "0.0.0.0") else host.strip("[]")
    from api.metadata.relay import relay

    guest_in = cast(io.BufferedIOBase, sys.stdin.buffer)
    guest_out = cast(io.BufferedIOBase, sys.stdout.buffer)
    relay(guest_in, guest_out, (host, int(port)), instance_id, project_id, key)
    return 0
