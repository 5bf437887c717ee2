"""How the entry points start other programs: the environment they pass on, and ``exec``.

With ``stratus/config.py`` (the one reader of settings), this is where ``os.environ`` is read: a
child inherits the caller's environment (PATH, GUNICORN_CMD_ARGS, ...) with the settings on top.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from typing import NoReturn

from stratus.config import ADMIN_PASSWORD_ENV, MULTIPROC_DIR_ENV, Settings


def inherited() -> dict[str, str]:
    """This process's environment, for a program that is not a Stratus part (nats-server, pytest)."""
    return dict(os.environ)


def child_env(settings: Settings) -> dict[str, str]:
    """The environment of a part started with ``settings``: the caller's, the settings on top, and
    without the admin's password (a secret for the seeding, not for the parts) nor prometheus_client's
    multiprocess directory (which would put a part's metrics in files no one reads)."""
    env = inherited()
    env.pop(ADMIN_PASSWORD_ENV, None)
    env.pop(MULTIPROC_DIR_ENV, None)  # the API's gunicorn workers' alone (``processes.api.serve``)
    env.update(settings.to_env())
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def exec_program(argv: list[str], env: dict[str, str]) -> NoReturn:
    """Become ``argv`` (so that it receives signals directly), after flushing what was printed."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], argv, env)


def version_at_least(distribution: str, major: int) -> bool:
    """Whether the installed ``distribution``'s major version is ``major`` or later."""
    first = importlib.metadata.version(distribution).split(".", 1)[0]
    return first.isdigit() and int(first) >= major
