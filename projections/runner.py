"""The projector process: follows the log and keeps the read models in PostgreSQL up to date.

This is its composition root: it opens the NATS bridge, the event store and one PostgreSQL
connection, then runs ``Projector.run`` until SIGTERM/SIGINT. Losing PostgreSQL or NATS is
temporary: the runner reconnects with backoff and re-seeks from the tracking row, which the failed
batch (rolled back) never moved. An event that fails to apply for any other reason is poison: it is
quarantined (``stratus/quarantine.py``, listed by ``stratus quarantine list``) and skipped, so the
projector never dies on it, nor on a restart.

Run it as ``stratus projector`` or ``python -m projections.runner [--batch-size N]``.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from uuid import UUID

import psycopg
from eventsourcing.persistence import Mapper, Notification

from commands.app import Stratus
from projections.projection import EventLog, Projector, Quarantine
from projections.schema import ensure_live_schema
from stratus.config import Settings
from stratus.eventstore import EventStoreUnavailable, Factory, NatsBridge
from stratus.postgres import database_url
from stratus.quarantine import QuarantineLog

log = logging.getLogger("stratus.projector")


def read_models_url(settings: Settings) -> str:
    return database_url(settings)


@contextlib.contextmanager
def open_event_log(
    settings: Settings, *, name: str = "projector"
) -> Iterator[tuple[EventLog, Mapper[UUID], Quarantine]]:
    """The event store's recorder, the application's mapper (which decodes and upcasts events), and
    where a poison event is recorded by the part ``name``."""
    bridge = NatsBridge(settings.nats_urls, name=name)
    bridge.start()
    try:
        factory = Factory(bridge=bridge, settings=settings)
        app = Stratus(factory)
        quarantine = quarantine_to(QuarantineLog(bridge, settings.stream), name)
        yield factory.application_recorder(), app.mapper, quarantine
    finally:
        bridge.close()


def quarantine_to(quarantine: QuarantineLog, part: str) -> Quarantine:
    """The projector's ``quarantine``: record the skipped entry under ``part``."""

    def record(n: Notification, error: Exception) -> None:
        quarantine.record(part, n.id, error, event_type=n.topic, originator_id=str(n.originator_id))

    return record


@contextlib.contextmanager
def _stopped_by_signals(stop: threading.Event) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        log.info("signal %s: stopping after the current batch", signum)
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run(
    settings: Settings,
    stop: threading.Event,
    *,
    batch_size: int = 500,
    idle_wait: float = 0.5,
    max_backoff: float = 10.0,
) -> None:
    """Follow the log until ``stop`` is set, reconnecting after temporary failures."""
    url = read_models_url(settings)
    with open_event_log(settings) as (events, mapper, quarantine):
        backoff = 0.2
        while not stop.is_set():
            try:
                with psycopg.connect(url, autocommit=True, application_name="stratus-projector") as conn:
                    ensure_live_schema(conn)
                    projector = Projector(events, mapper, conn, batch_size=batch_size, quarantine=quarantine)
                    log.info("projector following the log from position %d", projector.position())
                    backoff = 0.2
                    projector.run(stop, idle_wait=idle_wait)
            except (psycopg.OperationalError, EventStoreUnavailable) as e:
                log.warning("projector: %s; retrying in %.1f s", e, backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, max_backoff)


def main(settings: Settings, *, batch_size: int = 500) -> int:
    """Entry point of ``stratus projector``: runs until SIGTERM/SIGINT, then closes cleanly."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stop = threading.Event()
    with _stopped_by_signals(stop):
        run(settings, stop, batch_size=batch_size)
    log.info("projector stopped")
    return 0


def _cli(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m projections.runner", description=__doc__)
    parser.add_argument("--batch-size", type=int, default=500, help="log entries per transaction")
    args = parser.parse_args(argv)
    return main(Settings.from_env(), batch_size=args.batch_size)


if __name__ == "__main__":
    sys.exit(_cli())
