"""Readiness against the real servers (docs/operations.md, "Health and metrics"): a part that reads
the read models is ready when JetStream and PostgreSQL answer and the projector is within the
configured lag of the log's head; not ready when either is away or the projector lags."""

from __future__ import annotations

from typing import Any

import psycopg

from commands.app import Stratus
from processes.telemetry import ProbeLog
from projections.health import connector, readiness
from stratus.config import Settings
from stratus.eventstore import JetStreamApplicationRecorder
from stratus.natsserver import NatsServer
from tests.fixtures.deployed import wait_for
from tests.fixtures.nats import unique_settings
from tests.fixtures.processes import free_port
from tests.fixtures.projections import head, make_projector, populate


def _failed(checks: list[Any]) -> dict[str, str]:
    return {c.name: c.detail for c in checks if not c.ok}


def test_not_ready_while_the_projector_lags_and_ready_once_it_caught_up(
    app: Stratus, settings: Settings, database_url: str, rm: psycopg.Connection[Any]
) -> None:
    populate(app, instances=5, hosts=1)
    log = ProbeLog(settings, "test")
    try:
        wait_for("the probes to connect", lambda: log.bridge.is_connected, timeout=10)
        connect = connector(database_url)
        checks, lagging = readiness(log.head, connect, log.appended_at, max_lag=0)
        assert _failed(checks).keys() == {"projector_lag"}, checks
        assert lagging is not None and lagging.positions == head(app) and lagging.seconds > 0
        # within a lag as large as the log, it is ready already
        assert not _failed(readiness(log.head, connect, log.appended_at, max_lag=head(app))[0])

        make_projector(app, rm).catch_up()
        checks, lagging = readiness(log.head, connect, log.appended_at, max_lag=0)
        assert not _failed(checks), checks
        assert lagging is not None and (lagging.positions, lagging.seconds) == (0, 0.0)
    finally:
        log.close()


def test_not_ready_while_postgresql_is_away(
    app: Stratus, settings: Settings, rm: psycopg.Connection[Any]
) -> None:
    log = ProbeLog(settings, "test")
    try:
        wait_for("the probes to connect", lambda: log.bridge.is_connected, timeout=10)
        nowhere = connector(f"postgresql://postgres@127.0.0.1:{free_port()}/postgres", timeout=1)
        checks, lagging = readiness(log.head, nowhere, log.appended_at, max_lag=1000)
        assert _failed(checks).keys() == {"postgresql", "projector_lag"}, checks
        assert "unreachable" in _failed(checks)["postgresql"] and lagging is None
    finally:
        log.close()


def test_not_ready_while_jetstream_is_away_and_ready_when_it_is_back(
    own_nats_server: NatsServer, database_url: str, rm: psycopg.Connection[Any]
) -> None:
    settings = unique_settings(own_nats_server.url)
    log = ProbeLog(settings, "test")
    connect = connector(database_url)
    try:
        wait_for("the probes to connect", lambda: log.bridge.is_connected, timeout=10)
        JetStreamApplicationRecorder.from_settings(log.bridge, settings).ensure_stream()  # the log's
        assert not _failed(readiness(log.head, connect, log.appended_at, max_lag=1000)[0])
        own_nats_server.stop()
        checks, _ = readiness(log.head, connect, log.appended_at, max_lag=1000)
        assert _failed(checks).keys() == {"jetstream", "projector_lag"}, checks
        own_nats_server.start()
        wait_for(
            "ready again",
            lambda: not _failed(readiness(log.head, connect, log.appended_at, max_lag=1000)[0]),
            timeout=30,
        )
    finally:
        log.close()
