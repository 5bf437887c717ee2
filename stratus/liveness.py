"""Host heartbeats: each hypervisor worker says "alive" every few seconds; a silent host is down.

Heartbeats are not facts worth keeping: recorded as events they would grow the log by one event
per host every interval, forever (8,640 a day per host at 10 s; 8.6 million a day for 1,000 hosts),
for a value only its latest instance matters for. So they live in a JetStream key-value bucket,
``STRATUS_HOSTS`` (``history=1``: one message per host, replaced at every beat), next to the log and
not in it. The worker puts ``{"host", "at", "booted", "load", "ip"}`` under the host's encoded name: its
wall clock (seconds since the epoch), when the machine booted (same clock), its 1/5/15-minute load
averages, which ``os-hypervisors/{id}/uptime`` shows as Nova's libvirt driver shows ``uptime``'s
output, and its address (Nova's ``my_ip``, shown as the hypervisor's ``host_ip``). A reader takes a
host as up while its last beat is younger than ``down_after`` seconds. A host never seen, or whose
entry is older, is down.

Workers beat through ``Heartbeats``. The API reads through a ``LivenessMirror`` around one, built
once by its composition root and given to its resources as a ``LivenessReader``: the bucket's
entries pushed to the process by a watch, so that a page of servers asks NATS nothing (see the
class's docstring for what it keeps and when it reads the bucket directly instead).

Clocks: ``at`` is the worker's clock and the age is computed with the reader's; hosts and API
nodes are expected to run NTP (skew well under ``down_after``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import nats.errors
import nats.js.errors
import orjson
from nats.js.api import KeyValueConfig, StorageType
from nats.js.kv import KeyValue

from stratus.config import Settings
from stratus.eventstore.bridge import NatsBridge
from stratus.eventstore.subjects import encode_token

log = logging.getLogger(__name__)


def bucket_for(stream: str) -> str:
    """The bucket beside a log: ``STRATUS_HOSTS`` for the stream ``STRATUS``."""
    return f"{stream}_HOSTS"


BUCKET = bucket_for("STRATUS")
# The binary a scheduler beats as (Nova's service name, shown by os-services).
SCHEDULER_BINARY = "nova-scheduler"
DOWN_AFTER = 60.0
_TIMEOUT = 5.0


class LivenessReader(Protocol):
    """What a reader of heartbeats asks (the API: hosts' and schedulers' states, a host's uptime)."""

    def up(self, hosts: Iterable[str], down_after: float = DOWN_AFTER) -> dict[str, bool]: ...

    def services(self, binary: str, down_after: float = DOWN_AFTER) -> list[dict[str, Any]]: ...

    def reports(self, hosts: Iterable[str]) -> dict[str, dict[str, Any] | None]: ...

    def states(self, hosts: Iterable[str], down_after: float = DOWN_AFTER) -> dict[str, State]: ...


# A host's state as a reader asks it: whether it is up (``up``) and its last heartbeat as put
# (``reports``; None when it never beat), to be read and not changed.
State = tuple[bool, "dict[str, Any] | None"]


class Heartbeats:
    """The heartbeats bucket beside a log: workers ``beat``, readers ask who is ``up`` (see the
    module's docstring). One per process, on its NATS bridge."""

    def __init__(
        self,
        bridge: NatsBridge,
        *,
        bucket: str = BUCKET,
        replicas: int = 1,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._bridge = bridge
        self._bucket = bucket
        self._replicas = replicas
        self._clock = clock
        self._kv: Any = None

    @classmethod
    def beside(cls, bridge: NatsBridge, settings: Settings) -> Heartbeats:
        """The bucket beside ``settings``' log, replicated as the log is."""
        return cls(bridge, bucket=bucket_for(settings.stream), replicas=settings.stream_replicas)

    async def store(self) -> Any:
        """The bucket (nats-py's ``KeyValue``), created on first use; only on the bridge's loop."""
        if self._kv is None:
            js = self._bridge.js
            try:
                self._kv = await js.key_value(self._bucket)
            except nats.js.errors.BucketNotFoundError:
                config = KeyValueConfig(
                    bucket=self._bucket,
                    description="stratus: last heartbeat of each compute host",
                    history=1,
                    storage=StorageType.FILE,
                    replicas=self._replicas,
                )
                self._kv = await js.create_key_value(config=config)
        return self._kv

    def beat(self, host: str) -> None:
        now = self._clock()
        booted = now - _machine_uptime()
        body = orjson.dumps(
            {"host": host, "at": now, "booted": booted, "load": os.getloadavg(), "ip": my_ip()}
        )

        async def put() -> None:
            await (await self.store()).put(encode_token(host), body)

        self._bridge.run(put, _TIMEOUT)

    def beat_service(self, binary: str, host: str) -> None:
        """A control-plane service's beat (``nova-scheduler`` on ``host``): its own key,
        ``<binary>.<host>``, beside the compute hosts' ones."""
        body = orjson.dumps({"binary": binary, "host": host, "at": self._clock()})

        async def put() -> None:
            await (await self.store()).put(f"{binary}.{encode_token(host)}", body)

        self._bridge.run(put, _TIMEOUT)

    def services(self, binary: str, down_after: float = DOWN_AFTER) -> list[dict[str, Any]]:
        """Every ``binary`` that ever beat: ``{"host", "at", "up"}``, by host name."""

        async def read() -> list[dict[str, Any]]:
            kv = await self.store()
            watcher = await kv.watch(f"{binary}.*", ignore_deletes=True)
            found: list[dict[str, Any]] = []
            try:
                while (entry := await watcher.updates(timeout=_TIMEOUT)) is not None:
                    found.append(dict(orjson.loads(entry.value)))
            finally:
                await watcher.stop()
            return found

        now = self._clock()
        beats = self._bridge.run(read, _TIMEOUT * 2)
        found = [{**b, "up": now - float(b["at"]) < down_after} for b in beats]
        return sorted(found, key=lambda b: str(b["host"]))

    def reports(self, hosts: Iterable[str]) -> dict[str, dict[str, Any] | None]:
        """Each host's last heartbeat as it was put (``at``, ``booted``, ``load``), None when it never
        beat."""
        names = list(hosts)

        async def read() -> dict[str, dict[str, Any] | None]:
            kv = await self.store()

            async def one(host: str) -> dict[str, Any] | None:
                try:
                    entry = await kv.get(encode_token(host))
                except nats.js.errors.KeyNotFoundError:
                    return None
                return dict(orjson.loads(entry.value))

            # all at once: one round trip's wait for a page of servers on many hosts
            found = await asyncio.gather(*(one(host) for host in names))
            return dict(zip(names, found, strict=True))

        return self._bridge.run(read, _TIMEOUT + len(names) * 0.05)

    def last_seen(self, hosts: Iterable[str]) -> dict[str, float | None]:
        """Each host's last heartbeat (seconds since the epoch), None when it never beat."""
        return {h: None if r is None else float(r["at"]) for h, r in self.reports(hosts).items()}

    def now(self) -> float:
        """This reader's clock (a beat's age is measured with it)."""
        return self._clock()

    def states(self, hosts: Iterable[str], down_after: float = DOWN_AFTER) -> dict[str, State]:
        """``up`` and ``reports`` of each host, asked as they are asked alone (the bucket read twice)."""
        names = list(hosts)
        up, reports = self.up(names, down_after), self.reports(names)
        return {host: (up[host], reports[host]) for host in names}

    def up(self, hosts: Iterable[str], down_after: float = DOWN_AFTER) -> dict[str, bool]:
        """Which hosts are up: a heartbeat younger than ``down_after`` seconds. When the bucket
        cannot be read (NATS away), every host is reported down: unknown is not up."""
        names = list(hosts)
        try:
            seen = self.last_seen(names)
        except (nats.errors.Error, TimeoutError):
            return dict.fromkeys(names, False)
        now = self._clock()
        return {h: at is not None and now - at < down_after for h, at in seen.items()}


# A host's key in the bucket, as the mirror looks it up for every host a page shows: hostnames are
# few and asked on every request, so each is encoded once (a regular expression's match, then the
# token) while it is among the most recently asked.
_host_key = functools.lru_cache(maxsize=8192)(encode_token)


class LivenessMirror:
    """The heartbeats bucket mirrored in this process by a watch on it, for readers that ask per
    request (the API's pages of servers): ``up`` then reads a dictionary, not NATS.

    What is mirrored is each key's last beat as put (its ``at``, and the report ``reports`` gives:
    ``booted``, ``load``), never a verdict: a host is judged
    up or down from that beat's age at the moment of the question, as ``Heartbeats.up`` judges it.
    A pushed beat reaches the mirror after it reached the bucket, so the mirror never holds a beat
    younger than the bucket's and never shows a host up longer than a direct read would; a host
    that stops beating is shown down at the same moment.

    The mirror answers only while its watch is known whole: from the end of the watch's initial
    replay (the bucket's last entry per key, up to the bucket's last revision when the watch began)
    until the watch's task ends or the connection is lost
    or re-established (messages could have been missed meanwhile). Otherwise ``up`` and ``reports``
    read the bucket directly, as before, and a new watch is started in the background. ``services``
    (an admin's few calls) always reads the bucket."""

    def __init__(self, heartbeats: Heartbeats, bridge: NatsBridge) -> None:
        self._heartbeats = heartbeats
        self._bridge = bridge
        self._lock = threading.Lock()
        # key -> the beat's ``at`` and its report; replaced whole by each new watch, once its replay
        # is complete
        self._beats: dict[str, Beat] | None = None
        self._generation = 0  # the watch whose entries ``_beats`` holds
        self._watching = False  # a watch task is running (or starting)
        self._reconnects = -1  # the connection's reconnect count when the current watch began

    def up(self, hosts: Iterable[str], down_after: float = DOWN_AFTER) -> dict[str, bool]:
        """As ``Heartbeats.up``, from the mirror when it is whole, else from the bucket."""
        beats = self._whole()
        if beats is None:
            return self._heartbeats.up(hosts, down_after)
        now = self._heartbeats.now()
        found = {host: beats.get(_host_key(host), _NO_BEAT)[0] for host in hosts}
        return {host: at is not None and now - at < down_after for host, at in found.items()}

    def services(self, binary: str, down_after: float = DOWN_AFTER) -> list[dict[str, Any]]:
        return self._heartbeats.services(binary, down_after)

    def states(self, hosts: Iterable[str], down_after: float = DOWN_AFTER) -> dict[str, State]:
        """As ``Heartbeats.states``, from the mirror when it is whole (one look-up a host for both,
        each report the mirror's own: read it, do not change it), else from the bucket."""
        beats = self._whole()
        if beats is None:
            return self._heartbeats.states(hosts, down_after)
        now = self._heartbeats.now()
        found: dict[str, State] = {}
        for host in hosts:
            at, report = beats.get(_host_key(host), _NO_BEAT)
            found[host] = (at is not None and now - at < down_after, report)
        return found

    def reports(self, hosts: Iterable[str]) -> dict[str, dict[str, Any] | None]:
        """As ``Heartbeats.reports``, from the mirror when it is whole, else from the bucket."""
        beats = self._whole()
        if beats is None:
            return self._heartbeats.reports(hosts)
        found = {host: beats.get(_host_key(host), _NO_BEAT)[1] for host in hosts}
        return {host: None if report is None else dict(report) for host, report in found.items()}

    @property
    def whole(self) -> bool:
        """Whether ``up`` answers from the mirror now (tests and benches ask)."""
        return self._whole() is not None

    def _whole(self) -> dict[str, Beat] | None:
        """The mirror if its watch is whole; otherwise None, after starting a new watch."""
        connected = self._bridge.is_connected
        reconnects = self._bridge.nc.stats["reconnects"] if connected else -1
        with self._lock:
            if self._watching and connected and reconnects == self._reconnects:
                return self._beats
            self._beats = None
            if not connected or self._bridge.closed:
                return None
            self._generation += 1
            self._watching = True
            self._reconnects = reconnects
            generation = self._generation
        self._bridge.spawn(lambda: self._watch(generation))
        return None

    async def _watch(self, generation: int) -> None:
        beats: dict[str, Beat] = {}
        try:
            kv = await self._heartbeats.store()
            # The replay is complete once it has delivered the bucket's last revision as it was
            # before the watch began (or a later one: entries come in revision order). nats-py's own
            # end marker (a None from ``updates``) is not trusted: it compares the server's count of
            # entries not yet sent with the entries this client has read, so entries already sent
            # but not yet read let it come before them (nats.py issues 842 and 995).
            bucket = await kv.status()
            replayed_to = 0 if bucket.values == 0 else bucket.stream_info.state.last_seq
            watcher = await kv.watch(">")
            try:
                if replayed_to == 0:  # nothing to replay: the mirror answers at once
                    self._answer_from(beats, generation)
                while self._current(generation):  # a newer watch replaced this one: stop
                    try:
                        entry = await watcher.updates(timeout=_TIMEOUT)
                    except nats.errors.TimeoutError:
                        continue  # no beat for a while: nothing to mirror
                    if entry is None:
                        continue  # nats-py's end marker (see above)
                    if not isinstance(entry, KeyValue.Entry):
                        return  # the watch was stopped
                    if entry.operation in ("DEL", "PURGE") or entry.value is None:
                        beats.pop(entry.key, None)
                    else:
                        beats[entry.key] = _beat(entry.value)
                    if replayed_to and (entry.revision or 0) >= replayed_to:
                        replayed_to = 0  # the replay is complete: from now on the mirror answers
                        self._answer_from(beats, generation)
            finally:
                await watcher.stop()
        except (nats.errors.Error, TimeoutError) as e:
            log.info("watching the heartbeats failed (%s); reading them directly until a new watch", e)
        finally:
            with self._lock:
                if self._generation == generation:
                    self._watching = False
                    self._beats = None

    def _answer_from(self, beats: dict[str, Beat], generation: int) -> None:
        with self._lock:
            if self._generation == generation:
                self._beats = beats

    def _current(self, generation: int) -> bool:
        with self._lock:
            return self._generation == generation


# A mirrored beat: its ``at`` (None: no beat) and the value as put (None: not a JSON object).
Beat = tuple[float | None, dict[str, Any] | None]
_NO_BEAT: Beat = (None, None)


def _beat(value: bytes) -> Beat:
    """A beat's ``at`` and its report; a value that is not a beat counts as none for ``up`` (the key
    shows down), and a value that is not a JSON object has no report."""
    try:
        report = orjson.loads(value)
    except orjson.JSONDecodeError:
        return float("-inf"), None
    if not isinstance(report, dict):
        return float("-inf"), None
    try:
        return float(report["at"]), report
    except (KeyError, TypeError, ValueError):
        return float("-inf"), report


def my_ip() -> str:
    """This machine's address on its default route, found as Nova finds ``my_ip`` (a UDP socket
    "connected" to a public address sends nothing); 127.0.0.1 when there is no route."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: only the routing table is consulted
            return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"


def _machine_uptime() -> float:
    """Seconds since this machine booted (Linux ``/proc/uptime``; 0 where there is none)."""
    try:
        with open("/proc/uptime", encoding="ascii") as f:
            return float(f.read().split()[0])
    except OSError:
        return 0.0


def beat_periodically(
    beat: Callable[[], None], name: str, stop: threading.Event, interval: float
) -> threading.Thread:
    """Call ``beat`` now and every ``interval`` seconds until ``stop``; a missed beat is only logged
    (NATS away): the service shows down until beats get through again, which is the truth."""

    def loop() -> None:
        while True:
            try:
                beat()
            except (TimeoutError, nats.errors.Error) as e:
                log.warning("heartbeat of %s failed: %s", name, e)
            if stop.wait(interval):
                return

    thread = threading.Thread(target=loop, name=f"heartbeat-{name}", daemon=True)
    thread.start()
    return thread
