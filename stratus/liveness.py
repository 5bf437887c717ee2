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

Clocks: ``at`` is the worker's clock and the age is computed with the reader's; hosts and API
nodes are expected to run NTP (skew well under ``down_after``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import nats.errors
import nats.js.errors
import orjson
from nats.js.api import KeyValueConfig, StorageType

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


class Heartbeats:
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

    async def _store(self) -> Any:
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
            await (await self._store()).put(encode_token(host), body)

        self._bridge.run(put, _TIMEOUT)

    def beat_service(self, binary: str, host: str) -> None:
        """A control-plane service's beat (``nova-scheduler`` on ``host``): its own key,
        ``<binary>.<host>``, beside the compute hosts' ones."""
        body = orjson.dumps({"binary": binary, "host": host, "at": self._clock()})

        async def put() -> None:
            await (await self._store()).put(f"{binary}.{encode_token(host)}", body)

        self._bridge.run(put, _TIMEOUT)

    def services(self, binary: str, down_after: float = DOWN_AFTER) -> list[dict[str, Any]]:
        """Every ``binary`` that ever beat: ``{"host", "at", "up"}``, by host name."""

        async def read() -> list[dict[str, Any]]:
            kv = await self._store()
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
            kv = await self._store()

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
