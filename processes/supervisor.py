"""Runs a group of processes as one: starts them in order, watches them, stops them in reverse.

``stratus run`` is the whole control plane on one machine: a JetStream server, PostgreSQL, the API,
the projector, the scheduler and a hypervisor worker. An operator needs it to behave like one program:
one Ctrl-C stops everything cleanly. When one part dies, the group says which part and how (its exit
status, the end of its output) and, under a ``RestartPolicy``, starts it again after a backoff that
doubles with each death: on one machine that is the difference between a blip and an outage. Only a
crash loop (too many deaths of one part within a window) stops the others and exits non-zero, rather
than restarting forever or leaving half a control plane running. Without a policy, the first death
stops the group.

A ``Part`` is anything with that lifecycle. ``ChildProcess`` is a command the supervisor starts
itself, in its own process group (so a terminal's Ctrl-C reaches the supervisor only, which then
stops the parts in reverse order) and with a parent-death signal (so a supervisor killed outright
does not leave orphans behind). ``ServicePart`` adapts a server object that manages its own process.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO

from stratus.parentdeath import die_with_parent

TAIL_LINES = 30
# Lines kept per child, searched for the first error when the tail alone would not show it.
KEPT_LINES = 500
# A Python exception line, e.g. `ModuleNotFoundError: No module named 'api.app'`.
_ERROR_LINE = re.compile(r"^\s*[A-Za-z_][\w.]*(Error|Exception): ")


class PartFailed(Exception):
    """A part could not start, or stopped while it should have been running."""

    def __init__(self, name: str, reason: str, tail: str = "") -> None:
        super().__init__(f"{name}: {reason}")
        self.name = name
        self.reason = reason
        self.tail = tail


@dataclass(frozen=True)
class RestartPolicy:
    """How a group treats a part that dies once started: start it again after ``backoff`` seconds,
    doubling with each of its recent deaths up to ``max_backoff``; but stop the group when the part has
    died ``crash_loop_deaths`` times within ``crash_loop_window`` seconds (a crash loop: restarting
    again would only hide a part that cannot run). ``crash_loop_deaths=1``: the first death stops it."""

    backoff: float = 1.0
    max_backoff: float = 30.0
    crash_loop_deaths: int = 5
    crash_loop_window: float = 60.0

    def __post_init__(self) -> None:
        if self.crash_loop_deaths < 1:
            raise ValueError("crash_loop_deaths must be at least 1")
        if self.backoff < 0 or self.max_backoff < self.backoff or self.crash_loop_window < 0:
            raise ValueError(f"an impossible restart policy: {self}")

    def delay(self, recent_deaths: int) -> float:
        """The wait before the restart that follows the ``recent_deaths``-th death in the window."""
        return min(self.backoff * 2 ** max(recent_deaths - 1, 0), self.max_backoff)


# The first death of a part stops the group (a Supervisor's default).
NO_RESTARTS = RestartPolicy(crash_loop_deaths=1)


def describe_status(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


class Part(ABC):
    """One member of a supervised group."""

    name: str
    # Where the part can be reached once started ("" if it listens nowhere).
    address: str = ""

    @abstractmethod
    def start(self, abandon: threading.Event) -> None:
        """Start and return once ready; raise ``PartFailed`` if it cannot, or once ``abandon`` is set."""

    @abstractmethod
    def exit_status(self) -> int | None:
        """None while running; the exit status once it has stopped."""

    @abstractmethod
    def stop(self, grace: float, hurry: threading.Event) -> None:
        """Ask the part to stop, wait up to ``grace`` seconds (less once ``hurry`` is set), then kill it."""

    def output_tail(self) -> str:
        return ""


class _OutputPump:
    """Copies a child's output, line by line and prefixed with its name, and keeps the last lines."""

    def __init__(self, name: str, stream: IO[bytes], sink: IO[str] | None, lock: threading.Lock) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=KEPT_LINES)
        self._name = name
        self._stream = stream
        self._sink = sink
        self._lock = lock
        self._thread = threading.Thread(target=self._pump, name=f"output-{name}", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        with self._stream:
            for raw in iter(self._stream.readline, b""):
                line = raw.decode(errors="replace").rstrip("\r\n")
                self.lines.append(line)
                if self._sink is not None:
                    with self._lock:
                        self._sink.write(f"{self._name} | {line}\n")
                        self._sink.flush()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


class ChildProcess(Part):
    """A command run as a child process in its own process group."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | Callable[[], Mapping[str, str]] | None = None,
        cwd: Path | None = None,
        address: str = "",
        ready: Callable[[], bool] | None = None,
        ready_timeout: float = 30.0,
        output: IO[str] | None = None,
        output_lock: threading.Lock | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        # A callable is evaluated at start, once the parts before this one know their addresses.
        self.env = env
        self.cwd = cwd
        self.address = address
        self.ready = ready
        self.ready_timeout = ready_timeout
        self._output = output
        self._output_lock = output_lock or threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._pump: _OutputPump | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self, abandon: threading.Event) -> None:
        env = self.env() if callable(self.env) else self.env
        try:
            self._proc = subprocess.Popen(
                self.argv,
                env=env,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent(),
            )
        except OSError as e:
            raise PartFailed(self.name, f"could not be started ({e})") from e
        assert self._proc.stdout is not None
        self._pump = _OutputPump(self.name, self._proc.stdout, self._output, self._output_lock)
        if self.ready is None:
            return
        deadline = time.monotonic() + self.ready_timeout
        # Probe often at first, then back off: a probe is a request the part has to answer.
        delay = 0.05
        while not self.ready():
            status = self._proc.poll()
            if status is not None:
                self._pump.join(1.0)
                raise PartFailed(self.name, f"{describe_status(status)} while starting", self.output_tail())
            if abandon.is_set():
                raise PartFailed(self.name, "start abandoned")
            if time.monotonic() > deadline:
                raise PartFailed(
                    self.name, f"was not ready after {self.ready_timeout:g} s", self.output_tail()
                )
            abandon.wait(delay)
            delay = min(delay * 1.5, 1.0)

    def exit_status(self) -> int | None:
        return self._proc.poll() if self._proc is not None else None

    def stop(self, grace: float, hurry: threading.Event) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            self._signal_group(signal.SIGTERM)
            deadline = time.monotonic() + grace
            while proc.poll() is None and time.monotonic() < deadline and not hurry.is_set():
                hurry.wait(0.05)
        # Kill what is left: the child if it ignored SIGTERM, and any process it left in its group.
        self._signal_group(signal.SIGKILL)
        proc.wait()
        if self._pump is not None:
            self._pump.join(1.0)

    def output_tail(self) -> str:
        if self._pump is None:
            return ""
        lines = list(self._pump.lines)
        tail = lines[-TAIL_LINES:]
        first_error = next((line for line in lines if _ERROR_LINE.match(line)), None)
        if first_error is not None and first_error not in tail:
            tail = [f"(first error: {first_error.strip()})", "...", *tail]
        return "\n".join(tail)

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)


class ServicePart(Part):
    """Adapts a server object that runs its own process (a JetStream or PostgreSQL server)."""

    def __init__(
        self,
        name: str,
        *,
        start: Callable[[], object],
        stop: Callable[[], object],
        exit_status: Callable[[], int | None],
        address: Callable[[], str] | str = "",
        output_tail: Callable[[], str] | None = None,
        errors: tuple[type[Exception], ...] = (OSError,),
    ) -> None:
        self.name = name
        self._errors = errors
        self._start = start
        self._stop = stop
        self._exit_status = exit_status
        self._address = address
        self._output_tail = output_tail
        self._started = False

    def start(self, abandon: threading.Event) -> None:
        try:
            self._start()
        except self._errors as e:
            raise PartFailed(self.name, f"could not be started: {e}") from e
        self._started = True
        self.address = self._address() if callable(self._address) else self._address

    def exit_status(self) -> int | None:
        return self._exit_status() if self._started else None

    def stop(self, grace: float, hurry: threading.Event) -> None:
        if not self._started:
            return
        self._started = False
        try:
            self._stop()
        except self._errors as e:
            raise PartFailed(self.name, f"could not be stopped: {e}") from e

    def output_tail(self) -> str:
        return self._output_tail() if self._output_tail is not None else ""


def tcp_listening(address: str) -> Callable[[], bool]:
    """A readiness check: true once something accepts connections at ``host:port``."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")

    def check() -> bool:
        try:
            with socket.create_connection((host or "127.0.0.1", int(port)), timeout=0.5):
                return True
        except OSError:
            return False

    return check


def http_responding(url: str) -> Callable[[], bool]:
    """A readiness check: true once ``url`` answers HTTP with a status below 500.

    (A listening port is not enough: gunicorn listens before its workers have loaded the app.)
    """

    def check() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2.0) as response:
                return int(response.status) < 500
        except urllib.error.HTTPError as e:
            return e.code < 500
        except (urllib.error.URLError, OSError):
            return False

    return check


class Supervisor:
    """Starts parts in order, watches them, restarts those that die, and stops them in reverse order.

    ``run`` returns 0 after a clean stop on SIGINT/SIGTERM, and 1 when a part failed to start, died
    in a crash loop (``restart``; by default its first death is one), or could not be stopped. Each
    death is logged with the part's name, its exit status and the end of its output. Parts without a
    readiness check count as started once they have stayed up for ``settle`` seconds; only then is
    ``on_ready`` called. A second signal during shutdown skips the remaining grace periods.
    Must run in the main thread (it installs signal handlers, and restores them on return).
    """

    def __init__(
        self,
        parts: Sequence[Part],
        *,
        grace: float = 10.0,
        settle: float = 0.0,
        poll_interval: float = 0.2,
        log: IO[str] | None = None,
        on_ready: Callable[[Sequence[Part]], None] | None = None,
        restart: RestartPolicy = NO_RESTARTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        names = [p.name for p in parts]
        if len(set(names)) != len(names):
            raise ValueError(f"part names must be unique: {names}")
        self.parts = list(parts)
        self.grace = grace
        self.settle = settle
        self.poll_interval = poll_interval
        self.log = log if log is not None else sys.stderr
        self.on_ready = on_ready
        self.restart = restart
        self.failure: PartFailed | None = None
        self.stop_failures: list[PartFailed] = []
        # Each part's restarts so far, for whoever watches the group (tests, a status line).
        self.restarts: collections.Counter[str] = collections.Counter()
        self._clock = clock
        self._started: list[Part] = []
        self._deaths: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)
        self._restart_at: dict[str, float] = {}  # dead parts waiting out their backoff
        self._stop_requested = threading.Event()
        self._hurry = threading.Event()

    def request_stop(self, signum: int | None = None) -> None:
        if self._stop_requested.is_set():
            self._hurry.set()
        self._stop_requested.set()

    def run(self) -> int:
        with self._signals_handled():
            try:
                self._start_all()
                if not self._stop_requested.is_set():
                    if self.on_ready is not None:
                        self.on_ready(self._started)
                    self._watch()
            except PartFailed as failure:
                if not (self._stop_requested.is_set() and failure.reason == "start abandoned"):
                    self.failure = failure
            finally:
                if self.failure is not None:
                    self._report(self.failure)
                self._stop_all()
        return 1 if self.failure is not None or self.stop_failures else 0

    def _start_all(self) -> None:
        for part in self.parts:
            if self._stop_requested.is_set():
                return
            self._started.append(part)
            part.start(self._stop_requested)
            # A part that started earlier may have died while this one was starting.
            self._check()
        settled = self._clock() + self.settle
        # Until every part has settled, and none is waiting out a restart's backoff.
        while (self._clock() < settled or self._restart_at) and not self._stopping():
            self._check()

    def _watch(self) -> None:
        while not self._stopping():
            self._check()

    def _stopping(self) -> bool:
        """Wait one poll interval; true once a stop was asked for."""
        return self._stop_requested.wait(self.poll_interval)

    def _check(self) -> None:
        for part in self._started:
            if part.name in self._restart_at:
                continue
            status = part.exit_status()
            if status is not None:
                self._died(part, f"{describe_status(status)} unexpectedly", part.output_tail())
        for part in self._started:
            due = self._restart_at.get(part.name)
            if due is not None and self._clock() >= due and not self._stop_requested.is_set():
                self._start_again(part)

    def _died(self, part: Part, reason: str, tail: str) -> None:
        """Count a death; schedule the part's restart, or raise ``PartFailed`` on a crash loop."""
        now = self._clock()
        deaths = self._deaths[part.name]
        deaths.append(now)
        while deaths and deaths[0] < now - self.restart.crash_loop_window:
            deaths.popleft()
        if len(deaths) >= self.restart.crash_loop_deaths:
            if self.restart.crash_loop_deaths > 1:
                reason = (
                    f"{reason}: {len(deaths)} deaths within {self.restart.crash_loop_window:g} s, "
                    "a crash loop"
                )
            raise PartFailed(part.name, reason, tail)
        delay = self.restart.delay(len(deaths))
        self._restart_at[part.name] = now + delay
        self._write(
            f"stratus: {part.name} {reason}; restarting it in {delay:g} s "
            f"(death {len(deaths)} of {self.restart.crash_loop_deaths} allowed within "
            f"{self.restart.crash_loop_window:g} s).",
            part.name,
            tail,
        )

    def _start_again(self, part: Part) -> None:
        del self._restart_at[part.name]
        try:
            part.stop(self.grace, self._hurry)  # reap what is left of it (its group, a pid file)
        except PartFailed as failure:
            self._write(f"stratus: {failure.name} {failure.reason}; starting it again anyway.")
        try:
            part.start(self._stop_requested)
        except PartFailed as failure:
            if self._stop_requested.is_set():
                return
            self._died(part, failure.reason, failure.tail)
            return
        self.restarts[part.name] += 1
        self._write(f"stratus: {part.name} restarted (restart {self.restarts[part.name]}).")

    def _write(self, message: str, name: str = "", tail: str = "") -> None:
        lines = [message]
        if tail:
            lines += [f"--- last lines of {name}'s output ---", tail, "---"]
        self.log.write("\n".join(lines) + "\n")
        self.log.flush()

    def _report(self, failure: PartFailed) -> None:
        message = f"stratus: {failure.name} {failure.reason}; stopping the other parts."
        self._write(message, failure.name, failure.tail)

    def _stop_all(self) -> None:
        # One part that cannot be stopped must not keep the others running.
        for part in reversed(self._started):
            try:
                part.stop(self.grace, self._hurry)
            except PartFailed as failure:
                self.stop_failures.append(failure)
                self.log.write(f"stratus: {failure.name} {failure.reason}\n")
                self.log.flush()
        self._started.clear()

    @contextlib.contextmanager
    def _signals_handled(self) -> Iterator[None]:
        def handler(signum: int, frame: FrameType | None) -> None:
            self.request_stop(signum)

        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)
