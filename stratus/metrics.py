"""The Prometheus metrics every part exports on its ``/metrics`` (docs/operations.md, "Metrics").

The metric families are declared here, once, in prometheus_client's process-wide registry: that
is the library's model (a counter is a thread-safe number, cheap to bump from any layer), and it
holds no connection, so nothing here connects at import time. What is read only when Prometheus
scrapes (a projector's lag, a consumer's pending messages, the hosts up and down) is a ``Collector``
the part's composition root builds around its own collaborators, in a registry of its own
(``scrape``), never registered here.

The API runs under gunicorn with several worker processes: there prometheus_client's multiprocess
mode is on (``processes/api.py`` gives gunicorn ``PROMETHEUS_MULTIPROC_DIR``), each worker writes
its numbers to files in that directory, and ``/metrics`` sums every worker's (``scrape``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["CONTENT_TYPE_LATEST", "Collector", "GaugeMetricFamily"]

# Latencies from a millisecond (an append on a quiet log) to half a minute (a real guest's boot).
_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# -- the API ---------------------------------------------------------------------------------------
API_REQUESTS = Counter(
    "stratus_api_requests",
    "HTTP requests answered, by method, route template and status code",
    ["method", "route", "status"],
)
API_LATENCY = Histogram(
    "stratus_api_request_duration_seconds",
    "Time to answer an HTTP request, by method and route template",
    ["method", "route"],
    buckets=_SECONDS,
)

# -- the domain: commands sent to a message bus (the API's and the workers') ------------------------
COMMANDS = Counter(
    "stratus_commands",
    "Commands handled, by command and outcome (accepted; refused: a domain error; failed: any other)",
    ["command", "outcome"],
)
COMMAND_RETRIES = Counter(
    "stratus_command_concurrency_retries",
    "Decisions taken again because a concurrent writer appended to the same aggregate first",
)

# -- the event log ---------------------------------------------------------------------------------
LOG_APPENDS = Counter(
    "stratus_log_appends", "Atomic appends to the event log, by outcome (ok, conflict, error)", ["outcome"]
)
LOG_APPENDED_EVENTS = Counter("stratus_log_appended_events", "Events appended to the event log")
LOG_APPEND_LATENCY = Histogram(
    "stratus_log_append_duration_seconds", "Time of one atomic append to JetStream", buckets=_SECONDS
)

# -- the projector ---------------------------------------------------------------------------------
PROJECTOR_POSITION = Gauge(
    "stratus_projector_position", "The last log position the read models hold", multiprocess_mode="max"
)
PROJECTOR_EVENTS = Counter("stratus_projector_events", "Log entries the projector went over")

# -- the scheduler ---------------------------------------------------------------------------------
SCHEDULER_PLACEMENTS = Counter(
    "stratus_scheduler_placements",
    "Servers the scheduler settled, by outcome (placed, no_valid_host)",
    ["outcome"],
)
SCHEDULER_DECISION = Histogram(
    "stratus_scheduler_decision_seconds",
    "Time to place a batch of requests (choose hosts and append the claims)",
    buckets=_SECONDS,
)

# -- the hypervisor workers -------------------------------------------------------------------------
HYPERVISOR_ACTIONS = Counter(
    "stratus_hypervisor_actions",
    "Steps a hypervisor worker took on its own servers, by action (the event acted on) and outcome "
    "(done, retry, error)",
    ["action", "outcome"],
)
HYPERVISOR_ACTION_LATENCY = Histogram(
    "stratus_hypervisor_action_duration_seconds",
    "Time of one step on a server, by action",
    ["action"],
    buckets=_SECONDS,
)

# -- the metadata service (guests' requests) --------------------------------------------------------
METADATA_REQUESTS = Counter(
    "stratus_metadata_requests",
    "Guests' requests to the metadata service, by path (its version segment as {version}) and status",
    ["path", "status"],
)
METADATA_LATENCY = Histogram(
    "stratus_metadata_request_duration_seconds",
    "Time to answer a guest's request to the metadata service, by path",
    ["path"],
    buckets=_SECONDS,
)


# -- read at scrape time (``Collector``s of the parts' composition roots) ------------------------------
LOG_HEAD = "stratus_log_head_position"
PROJECTOR_LAG_POSITIONS = "stratus_projector_lag_positions"
PROJECTOR_LAG_SECONDS = "stratus_projector_lag_seconds"
CONSUMER_PENDING = "stratus_consumer_pending"
CONSUMER_ACK_PENDING = "stratus_consumer_ack_pending"
HOSTS = "stratus_hosts"
HOSTS_DISABLED = "stratus_hosts_disabled"
SCRAPE_TIME = (
    LOG_HEAD,
    PROJECTOR_LAG_POSITIONS,
    PROJECTOR_LAG_SECONDS,
    CONSUMER_PENDING,
    CONSUMER_ACK_PENDING,
    HOSTS,
    HOSTS_DISABLED,
)


def exported_names() -> set[str]:
    """Every sample name a part may export (a counter's ``_total``, a histogram's ``_bucket``...)."""
    names = set(SCRAPE_TIME)
    for family in REGISTRY.collect():
        if family.name.startswith("stratus_"):
            names.update(sample.name for sample in family.samples)
            if family.type == "counter":
                names.add(family.name + "_total")
            if family.type == "histogram":
                names.update(family.name + suffix for suffix in ("_bucket", "_count", "_sum"))
    return names


class Timer:
    """Seconds since it was made (``elapsed``), on the monotonic clock."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._start = clock()

    def elapsed(self) -> float:
        return self._clock() - self._start


def gauge(name: str, documentation: str, value: float, labels: dict[str, str] | None = None) -> Any:
    """One gauge read at scrape time, for a ``Collector``."""
    family = GaugeMetricFamily(name, documentation, labels=list(labels or {}))
    family.add_metric(list((labels or {}).values()), value)
    return family


class Collected(Collector):
    """A ``Collector`` from a function that yields metric families when Prometheus scrapes."""

    def __init__(self, collect: Callable[[], Iterable[Any]]) -> None:
        self._collect = collect

    def collect(self) -> Iterator[Any]:
        yield from self._collect()


def scrape(extra: Iterable[Collector] = (), multiproc_dir: Path | None = None) -> bytes:
    """The text a scrape of ``/metrics`` answers: this process's metrics (or, in multiprocess mode,
    every process's under ``multiproc_dir``), then the ``extra`` collectors', read now."""
    if multiproc_dir is not None:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=str(multiproc_dir))
        text = generate_latest(registry)
    else:
        text = generate_latest(REGISTRY)
    own = CollectorRegistry(auto_describe=False)
    for collector in extra:
        own.register(collector)
    return text + generate_latest(own)


def mark_process_dead(pid: int, multiproc_dir: Path) -> None:
    """A gunicorn worker exited: its live gauges no longer count (its counters stay summed in)."""
    multiprocess.mark_process_dead(pid, str(multiproc_dir))
