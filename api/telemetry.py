"""The API's telemetry: request metrics and access lines, ``/healthz``, ``/readyz`` and ``/metrics``.

These paths are Stratus's, outside Nova's ``/v2.1`` (whose paths and bodies never change), and need
no token, as a load balancer's or Prometheus' probes carry none. ``/healthz`` and ``/metrics`` are
answered by ``Probes`` before the API is composed (``api.app.LazyApp``): a worker that cannot reach
its services yet is alive, and its numbers still count. ``/readyz`` is a route of the composed app:
ready when JetStream and PostgreSQL answer and the projector is within ``STRATUS_READY_MAX_LAG``
positions of the log's head (``projections.health``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import falcon
import psycopg
import psycopg_pool

from api.middleware import UNCONFIRMED
from projections import admin_queries
from projections.health import readiness
from stratus import metrics
from stratus.eventstore.errors import EventStoreUnavailable
from stratus.health import HEALTHZ, LIVE_BODY, METRICS, Check, appended_at, lag_metrics, readiness_body
from stratus.liveness import LivenessReader

access_log = logging.getLogger("stratus.api.access")
# The route label of a request no route matched (a 404): one series, not one per path asked for.
UNMATCHED = "unmatched"
# The labelled series ``RequestMetrics`` keeps at hand, at most: the routes' templates by their methods
# and statuses, which are few; a method label the API does not serve is looked up on each request.
KEPT_SERIES = 1024


class Timed:
    """Middleware's base: notes when a request began (``process_request``); ``elapsed(req)`` is
    how long it has taken since."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.started = self._clock()

    def elapsed(self, req: falcon.Request) -> float:
        started = getattr(req.context, "started", None)
        return self._clock() - started if started is not None else 0.0


class RequestMetrics(Timed):
    """Middleware: counts each request by method, route template and status, times it, and (with
    ``access_lines``) logs one access line carrying its request id (the JSON logs' access log, in
    place of gunicorn's, which knows no request id)."""

    def __init__(self, access_lines: bool = False, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(clock)
        self._access_level = logging.INFO if access_lines else logging.DEBUG
        # (method, route, status) -> its counter and its histogram, labelled once (``labels`` hashes
        # the labels and takes the metric's lock on every call)
        self._series: dict[tuple[str, str, str], tuple[Any, Any]] = {}

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        if req.env.get(UNCONFIRMED):  # dropped: the request is answered again (api/middleware.py)
            return
        elapsed = self.elapsed(req)
        route = (req.uri_template or UNMATCHED) if resource is not None else UNMATCHED
        status = str(falcon.http_status_to_code(resp.status))
        counted, timed = self._labelled(req.method, route, status)
        counted.inc()
        timed.observe(elapsed)
        if access_log.isEnabledFor(self._access_level):
            request_id = str(getattr(req.context, "request_id", "") or "")
            command = getattr(req.context, "command", None)
            access_log.log(
                self._access_level,
                "%s %s %s %.1f ms",
                req.method,
                req.relative_uri,
                status,
                elapsed * 1000,
                extra={
                    "request_id": request_id,
                    "correlation_id": getattr(command, "correlation_id", "") or request_id,
                },
            )

    def _labelled(self, method: str, route: str, status: str) -> tuple[Any, Any]:
        key = (method, route, status)
        series = self._series.get(key)
        if series is None:
            series = (
                metrics.API_REQUESTS.labels(method, route, status),
                metrics.API_LATENCY.labels(method, route),
            )
            if len(self._series) < KEPT_SERIES:
                self._series[key] = series
        return series


class Probes:
    """What ``LazyApp`` answers itself: ``/healthz`` (always, once the process serves) and
    ``/metrics`` (every worker's numbers, in multiprocess mode under ``multiproc_dir``)."""

    paths = frozenset({HEALTHZ, METRICS})

    def __init__(
        self, multiproc_dir: Path | None, collectors: Callable[[], list[metrics.Collector]] = list
    ) -> None:
        self._multiproc_dir = multiproc_dir
        self._collectors = collectors  # what the composed app reads at scrape time (none before)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == HEALTHZ:
            body, content_type = LIVE_BODY, "application/json"
        else:
            body = metrics.scrape(self._collectors(), self._multiproc_dir)
            content_type = metrics.CONTENT_TYPE_LATEST
        start_response("200 OK", [("Content-Type", content_type), ("Content-Length", str(len(body)))])
        return [body]


class Readiness:
    """``GET /readyz``: 200 when ready, 503 with the failed checks otherwise."""

    public = frozenset({"GET", "HEAD"})

    def __init__(self, checks: Callable[[], Sequence[Check]]) -> None:
        self._checks = checks

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        ready, body = readiness_body(self._checks())
        resp.status = falcon.HTTP_200 if ready else falcon.HTTP_503
        resp.content_type = falcon.MEDIA_JSON
        resp.data = body
        if not ready:
            resp.set_header("Retry-After", "5")

    on_head = on_get


class LogHead:
    """The log as the probes read it: its head, when an event was appended."""

    def __init__(
        self,
        head: Callable[[], int | None],
        read_envelopes: Callable[[int, int], Sequence[Any]],
        reachable: Callable[[], bool],
    ) -> None:
        self._head = head
        self._reachable = reachable
        self.appended_at = appended_at(read_envelopes)

    def head(self) -> int | None:
        if not self._reachable():
            raise EventStoreUnavailable("the API is not connected to NATS")
        return self._head()


def readiness_checks(
    log: LogHead, pool: psycopg_pool.ConnectionPool, max_lag: int, timeout: float = 2.0
) -> tuple[Callable[[], Sequence[Check]], metrics.Collector]:
    """The API's readiness checks, and the collector of the projector's lag as the API sees it."""

    def connect() -> Any:
        return pool.connection(timeout=timeout)

    def checks() -> Sequence[Check]:
        return readiness(log.head, connect, log.appended_at, max_lag)[0]

    def lag() -> list[Any]:
        lagging = readiness(log.head, connect, log.appended_at, max_lag)[1]
        return lag_metrics(lagging) if lagging is not None else []

    return checks, metrics.Collected(lag)


def hosts_collector(
    pool: psycopg_pool.ConnectionPool, heartbeats: LivenessReader, down_after: float, timeout: float = 2.0
) -> metrics.Collector:
    """``stratus_hosts{state="up"|"down"}`` and ``stratus_hosts_disabled``, read at scrape time from
    the read models (the registered hosts) and the heartbeats (which of them are up)."""

    def collect() -> list[Any]:
        try:
            with pool.connection(timeout=timeout) as conn:
                rows = admin_queries.list_compute_services(conn)
        except (psycopg.Error, psycopg_pool.PoolTimeout):
            return []  # PostgreSQL away: no count rather than a wrong one (/readyz says why)
        alive = heartbeats.up([r["hostname"] for r in rows], down_after)
        up = sum(1 for r in rows if alive.get(r["hostname"]) and not r["forced_down"])
        family = metrics.GaugeMetricFamily(
            metrics.HOSTS, "Compute hosts, by state (up, down)", labels=["state"]
        )
        family.add_metric(["up"], up)
        family.add_metric(["down"], len(rows) - up)
        disabled = sum(1 for r in rows if r["disabled"])
        return [family, metrics.gauge(metrics.HOSTS_DISABLED, "Compute hosts disabled", disabled)]

    return metrics.Collected(collect)
