"""The probes of the parts without HTTP (projector, scheduler, hypervisor worker, notifier) and of
the metadata service (whose port guests call): what their ``/healthz``, ``/readyz`` and ``/metrics``
answer, served on their ``*_METRICS_BIND`` address (``stratus.health.ProbeServer``; "" serves nothing).

The probes read the log on a NATS connection of their own, so that a part busy with a long batch
still answers them, and the projector's on short-lived PostgreSQL connections.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from stratus import metrics
from stratus.config import Settings
from stratus.eventstore import JetStreamApplicationRecorder, NatsBridge
from stratus.eventstore.errors import EventStoreUnavailable
from stratus.health import (
    Check,
    Probes,
    ProbeServer,
    appended_at,
    consumer_pending,
    lag_metrics,
    log_head_check,
)

log = logging.getLogger("stratus.telemetry")

# Seconds a probe waits for JetStream before answering "not ready".
PROBE_TIMEOUT = 3.0


class ProbeLog:
    """The log's head and its events' times, on the probes' own connection (connecting in the
    background: a probe while NATS is away answers at once)."""

    def __init__(self, settings: Settings, name: str) -> None:
        self.bridge = NatsBridge(settings.nats_urls, name=f"{name}-probes", seed_file=settings.nats_seed_file)
        self.bridge.start(wait=0)
        self._recorder = JetStreamApplicationRecorder.from_settings(
            self.bridge, settings, timeout=PROBE_TIMEOUT
        )
        self.appended_at = appended_at(self._recorder.read_envelopes)

    def head(self) -> int | None:
        if not self.bridge.is_connected:
            raise EventStoreUnavailable("the probes are not connected to NATS")
        return self._recorder.max_notification_id()

    def close(self) -> None:
        self.bridge.close()


@contextlib.contextmanager
def projector_probes(settings: Settings) -> Iterator[None]:
    """The projector's probes: ready when JetStream and PostgreSQL answer and the read models are
    within ``ready_max_lag`` positions of the head; the lag on ``/metrics``."""
    bind = settings.projector_metrics_bind
    if not bind:
        yield
        return
    # Imported here: PostgreSQL's client (psycopg and libpq, ~10 MiB of RSS) is the projector's alone;
    # the scheduler and the hypervisor workers import this module for ``worker_probes``.
    from projections.health import connector, readiness
    from stratus.postgres import database_url

    log = ProbeLog(settings, "stratus-projector")
    connect = connector(database_url(settings))  # the read models' (as the projector's runner finds them)

    def checks() -> Sequence[Check]:
        return readiness(log.head, connect, log.appended_at, settings.ready_max_lag)[0]

    def lag() -> list[Any]:
        lagging = readiness(log.head, connect, log.appended_at, settings.ready_max_lag)[1]
        return lag_metrics(lagging) if lagging is not None else []

    try:
        with ProbeServer(bind, Probes(checks, [metrics.Collected(lag)])):
            yield
    finally:
        log.close()


@contextlib.contextmanager
def worker_probes(settings: Settings, bind: str, name: str, durables: Sequence[str] = ()) -> Iterator[None]:
    """A follower's probes (scheduler, hypervisor, notifier): ready when JetStream answers (they hold
    no database access); its durable consumers' pending messages on ``/metrics``."""
    if not bind:
        yield
        return
    log = ProbeLog(settings, name)

    def checks() -> Sequence[Check]:
        return [log_head_check(log.head)[0]]

    try:
        with ProbeServer(bind, Probes(checks, [consumer_pending(log.bridge, settings.stream, durables)])):
            yield
    finally:
        log.close()


def metadata_probes(settings: Settings) -> ProbeServer | None:
    """The metadata service's probes, started in its gunicorn worker (whose counters they read):
    ready when the read models answer; requests by path and status on ``/metrics``. None when
    ``metadata_metrics_bind`` is "" or taken (a worker that gunicorn restarts beside the old one for
    a moment): the service goes on answering guests, and the log says why it has no probes."""
    bind = settings.metadata_metrics_bind
    if not bind:
        return None
    from projections.health import connector, read_model_check  # the projector's reason, above
    from stratus.postgres import database_url

    connect = connector(settings.database_url or database_url(settings))

    def checks() -> Sequence[Check]:
        return [read_model_check(connect)[0]]

    try:
        return ProbeServer(bind, Probes(checks)).start()
    except OSError as e:
        log.error("the metadata service's probes cannot listen on %s: %s", bind, e)
        return None
