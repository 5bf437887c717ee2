"""Liveness, readiness and metrics of a part, and the small HTTP server that answers them.

Every part answers three paths (docs/operations.md, "Health and metrics"): ``/healthz`` (alive:
the process answers), ``/readyz`` (ready: what it depends on is reachable and, where it reads the
read models, the projector is caught up within ``STRATUS_READY_MAX_LAG`` positions) and
``/metrics`` (Prometheus' text format). The API answers them on its own port; the parts without
HTTP (projector, scheduler, hypervisor worker) on the address their ``STRATUS_<PART>_METRICS_BIND``
setting names, served here by the standard library's WSGI server on a thread of its own.

A readiness check is a function returning a ``Check``; each is built where its library is known
(JetStream's here, PostgreSQL's in ``projections.health``) and catches only what that library
raises when its server is away.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import nats.errors
import orjson

from stratus import metrics
from stratus.eventstore.bridge import NatsBridge
from stratus.eventstore.errors import EventStoreUnavailable

log = logging.getLogger(__name__)

HEALTHZ = "/healthz"
READYZ = "/readyz"
METRICS = "/metrics"
# What JetStream raises (through the event store) while it is away or slow.
_LOG_AWAY: tuple[type[Exception], ...] = (EventStoreUnavailable, TimeoutError, nats.errors.Error)


@dataclass(frozen=True)
class Check:
    """One readiness condition: its name, whether it holds, and what was seen."""

    name: str
    ok: bool
    detail: str = ""


def readiness_body(checks: Sequence[Check]) -> tuple[bool, bytes]:
    """Whether every check holds, and the JSON body ``/readyz`` answers."""
    ready = all(c.ok for c in checks)
    body = {
        "status": "ready" if ready else "not ready",
        "checks": {c.name: {"ok": c.ok, "detail": c.detail} for c in checks},
    }
    return ready, orjson.dumps(body)


LIVE_BODY = orjson.dumps({"status": "alive"})


@dataclass(frozen=True)
class LogLag:
    """How far the read models are behind the log: positions, and the age of the oldest event they
    do not hold yet (0 when caught up)."""

    head: int
    position: int
    seconds: float

    @property
    def positions(self) -> int:
        return max(0, self.head - self.position)


def log_head_check(head: Callable[[], int | None]) -> tuple[Check, int | None]:
    """JetStream reachable: the log's head position, or why it could not be read."""
    try:
        at = head() or 0
    except _LOG_AWAY as e:
        return Check("jetstream", False, f"cannot read the log: {type(e).__name__}: {e}"[:200]), None
    return Check("jetstream", True, f"log head at {at}"), at


def appended_at(read_envelopes: Callable[[int, int], Sequence[Any]]) -> Callable[[int], float | None]:
    """When the event at a position was appended (seconds since the epoch), read off the log."""

    def at(position: int) -> float | None:
        try:
            found = read_envelopes(position, 1)
        except _LOG_AWAY:
            return None  # unknown: the lag in positions still shows
        if not found:
            return None
        return datetime.fromisoformat(str(found[0].time).replace("Z", "+00:00")).timestamp()

    return at


def lag(
    head: int, position: int, when: Callable[[int], float | None], clock: Callable[[], float] = time.time
) -> LogLag:
    """The read models' lag: ``when`` tells when the first event they lack was appended."""
    if position >= head:
        return LogLag(head, position, 0.0)
    first = when(position + 1)
    return LogLag(head, position, 0.0 if first is None else max(0.0, clock() - first))


def lag_check(lagging: LogLag, max_lag: int) -> Check:
    ok = lagging.positions <= max_lag
    detail = f"read models at {lagging.position}, log at {lagging.head} ({lagging.positions} behind, "
    return Check("projector_lag", ok, detail + f"at most {max_lag})")


def lag_metrics(lagging: LogLag) -> list[Any]:
    """The projector's lag as gauges (read at scrape time)."""
    return [
        metrics.gauge(metrics.LOG_HEAD, "The event log's last position", lagging.head),
        metrics.gauge(
            metrics.PROJECTOR_LAG_POSITIONS, "Log positions the read models lack", lagging.positions
        ),
        metrics.gauge(
            metrics.PROJECTOR_LAG_SECONDS,
            "Age of the oldest event the read models lack (0 when caught up)",
            lagging.seconds,
        ),
    ]


def consumer_pending(bridge: NatsBridge, stream: str, durables: Sequence[str]) -> metrics.Collector:
    """``stratus_consumer_pending`` (messages not yet delivered) and ``stratus_consumer_ack_pending``
    (delivered, not yet acknowledged) of each durable consumer, asked of JetStream at scrape time; a
    consumer JetStream does not answer for is left out of that scrape."""

    def collect() -> list[Any]:
        pending = metrics.GaugeMetricFamily(
            metrics.CONSUMER_PENDING, "Messages a durable consumer has yet to deliver", labels=["durable"]
        )
        unacked = metrics.GaugeMetricFamily(
            metrics.CONSUMER_ACK_PENDING,
            "Messages a durable consumer delivered and awaits the acknowledgement of",
            labels=["durable"],
        )
        for durable in durables:
            try:
                info = bridge.run(lambda d=durable: bridge.js.consumer_info(stream, d), 3.0)  # type: ignore[misc]
            except _LOG_AWAY:
                continue
            pending.add_metric([durable], float(info.num_pending or 0))
            unacked.add_metric([durable], float(info.num_ack_pending or 0))
        return [pending, unacked]

    return metrics.Collected(collect)


# -- the small server of the parts without HTTP ----------------------------------------------------
StartResponse = Callable[..., Any]


class Probes:
    """The WSGI app of ``/healthz``, ``/readyz`` and ``/metrics`` for one part.

    ``ready``: the part's readiness checks, run at each request; ``collectors``: what ``/metrics``
    reads at scrape time besides the process's counters."""

    def __init__(
        self,
        ready: Callable[[], Sequence[Check]],
        collectors: Iterable[metrics.Collector] = (),
    ) -> None:
        self._ready = ready
        self._collectors = list(collectors)

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == HEALTHZ:
            return _answer(start_response, "200 OK", "application/json", LIVE_BODY)
        if path == READYZ:
            ready, body = readiness_body(self._ready())
            status = "200 OK" if ready else "503 Service Unavailable"
            return _answer(start_response, status, "application/json", body)
        if path == METRICS:
            return _answer(
                start_response, "200 OK", metrics.CONTENT_TYPE_LATEST, metrics.scrape(self._collectors)
            )
        return _answer(start_response, "404 Not Found", "application/json", b'{"status": "not found"}')


def _answer(start_response: StartResponse, status: str, content_type: str, body: bytes) -> list[bytes]:
    start_response(status, [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes and probes every few seconds are not worth a log line each."""


class ProbeServer:
    """``Probes`` served on ``bind`` (``host:port``) from a daemon thread until ``close``."""

    def __init__(self, bind: str, app: Probes) -> None:
        host, _, port = bind.rpartition(":")
        self._server = make_server(
            host or "0.0.0.0", int(port), app, server_class=_ThreadingServer, handler_class=_QuietHandler
        )
        self.address = f"{host}:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="probes", daemon=True)

    def start(self) -> ProbeServer:
        self._thread.start()
        log.info("health and metrics on http://%s (/healthz, /readyz, /metrics)", self.address)
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ProbeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
