"""``stratus nats``: the pinned JetStream server in the foreground (exec'd, so it receives signals)."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

from processes.spawn import exec_program, inherited
from stratus import natsserver


def serve(
    *,
    config: Path | None,
    store_dir: Path,
    address: str,
    port: int,
    monitor_port: int | None,
    extra: list[str],
) -> NoReturn:
    """Exec nats-server with ``config``, or with JetStream on ``store_dir`` at ``address:port``."""
    binary = str(natsserver.binary())
    if config:
        exec_program([binary, "-c", str(config), *extra], inherited())
    store_dir.mkdir(parents=True, exist_ok=True)
    argv = [binary, "-js", "-sd", str(store_dir), "-a", address, "-p", str(port)]
    if monitor_port:
        argv += ["-m", str(monitor_port)]
    exec_program([*argv, *extra], inherited())
