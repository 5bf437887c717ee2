"""The projector process: follows the log and keeps the read models in PostgreSQL up to date.

``run`` opens the NATS bridge, the event store and one PostgreSQL
connection, then runs ``Projector.run`` until SIGTERM/SIGINT. Losing PostgreSQL or NATS is
temporary: the runner reconnects with backoff and re-seeks from the tracking row, which the failed
batch (rolled back) never moved; so is any other PostgreSQL error that no event explains (a table
missing, a disk full: logged at ERROR, retried with the same backoff). An event the projector cannot
decode or apply is quarantined on JetStream (``stratus.quarantine``, part ``projector``) and
skipped: no event stops the process.

Back after downtime (more than a batch behind the log's head), the runner first catches up reading
below nats-py, as a rebuild replays (``catch_up``: ``projections.rawlog.replay_log``), with the same
projector (its lock, quarantine, trust check and tracking), then follows live through nats-py.

Run it as ``stratus projector`` (its composition root: ``processes/projector.py``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from uuid import UUID

import psycopg
from eventsourcing.persistence import Mapper

from commands.app import Stratus
from projections.projector import EventLog, Projector
from projections.rawlog import replay_log
from projections.schema import ensure_live_schema
from stratus.config import Settings
from stratus.eventstore import EventStoreUnavailable, Factory, NatsBridge
from stratus.eventstore.signing import Verifier
from stratus.postgres import database_url
from stratus.quarantine import Quarantine, reason

log = logging.getLogger("stratus.projector")

# PostgreSQL or the event store away: reconnect and re-seek from the tracking row.
TEMPORARY: tuple[type[Exception], ...] = (
    psycopg.OperationalError,
    psycopg.InterfaceError,
    EventStoreUnavailable,
    TimeoutError,
)


def read_models_url(settings: Settings) -> str:
    return database_url(settings)


@contextlib.contextmanager
def open_event_log(
    settings: Settings, *, name: str = "projector"
) -> Iterator[tuple[EventLog, Mapper[UUID], Quarantine]]:
    """The event store's recorder, the application's mapper (which decodes and upcasts events) and
    the quarantine that events the projector cannot take go to."""
    bridge = NatsBridge(settings.nats_urls, name=name, seed_file=settings.nats_seed_file)
    bridge.start()
    try:
        factory = Factory(bridge=bridge, settings=settings)
        app = Stratus(factory)
        quarantine = Quarantine(bridge, log_stream=settings.stream, replicas=settings.stream_replicas)
        yield factory.application_recorder(), app.mapper, quarantine
    finally:
        bridge.close()


# Events per batch (one transaction each) while the projector catches up: a rebuild's batch size.
CATCH_UP_BATCH = 2000


def catch_up(
    projector: Projector, events: EventLog, stop: threading.Event, *, batch_size: int = CATCH_UP_BATCH
) -> int:
    """While ``projector`` is more than a batch behind the log's head, apply the log up to the head
    read below nats-py (``replay_log``; through ``events`` where it cannot be) in batches of
    ``batch_size`` (at least the projector's own); the position reached. ``projector`` reads through
    ``events``, in its own batches, again afterwards."""
    position, head, batch = projector.position(), events.max_notification_id() or 0, projector.batch_size
    if head - position <= batch:
        return position
    log.info("projector catching up from position %d to %d", position, head)
    with replay_log(events, part="projector") as source:
        projector.log = source
        # Batches of a rebuild's size while far behind: a batch's statements and its commit cost the
        # same whatever its length (apply ~13 us an event in batches of 500, ~8.5 in 2,000s).
        projector.batch_size = max(batch, batch_size)
        try:
            while head - position > batch and not stop.is_set():
                reached = projector.catch_up(until=head, stop=stop)
                if reached == position:  # nothing more to read (or stopped): follow from here
                    break
                position, head = reached, events.max_notification_id() or 0
        finally:
            projector.log, projector.batch_size = events, batch
    return position


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
    trust = Verifier.load(settings.trust_registry)
    with open_event_log(settings) as (events, mapper, quarantine):
        backoff = 0.2
        while not stop.is_set():
            started = time.monotonic()
            try:
                with psycopg.connect(url, autocommit=True, application_name="stratus-projector") as conn:
                    ensure_live_schema(conn)
                    projector = Projector(
                        events, mapper, conn, batch_size=batch_size, quarantine=quarantine, trust=trust
                    )
                    position = catch_up(projector, events, stop)
                    log.info("projector following the log from position %d", position)
                    projector.run(stop, idle_wait=idle_wait)
            except TEMPORARY as e:
                log.warning("projector: %s; retrying in %.1f s", e, backoff)
            except psycopg.Error as e:  # no event's fault (those are quarantined): the database's
                log.error("projector: PostgreSQL failed a batch (%s: %s); retrying in %.1f s",
                          type(e).__name__, reason(e), backoff)  # fmt: skip
            else:
                continue  # stopped
            if time.monotonic() - started > max_backoff:
                backoff = 0.2  # it ran a while since the last failure: start the backoff over
            stop.wait(backoff)
            backoff = min(backoff * 2, max_backoff)
