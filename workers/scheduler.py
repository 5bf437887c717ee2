"""The scheduler: places every requested instance on a host with room, or faults it with "No valid host".

Consumes ``<prefix>.instance.*.requested`` with the durable pull consumer ``scheduler`` (shared by
every scheduler process: each request goes to one of them), keeps an advisory view of the hosts
from ``<prefix>.host.>``, and appends through ``Handlers.place_instance`` / ``fail_instance``.
Several schedulers may run at once; the Host aggregate's optimistic concurrency keeps them from
overcommitting a host.

``main(settings)`` is the composition root; ``run`` takes its collaborators, for tests.
"""

from __future__ import annotations

import functools
import logging
import socket
import threading
from collections.abc import Callable
from uuid import UUID

import orjson
from eventsourcing.application import AggregateNotFoundError
from eventsourcing.utils import get_topic

from commands.app import Stratus
from commands.handlers import Handlers
from commands.host import Host
from commands.instance import Instance
from stratus.config import Settings
from stratus.context import Actor
from stratus.eventstore import Factory, NatsBridge
from stratus.eventstore.envelope import decode_message
from stratus.eventstore.subjects import SubjectLayout
from stratus.liveness import SCHEDULER_BINARY, Heartbeats, beat_periodically, bucket_for
from workers.consumer import Delivery, DurableConsumer, serve, stop_on_signals
from workers.host_feed import HostFeed
from workers.host_view import HostView
from workers.outcome import Outcome, RetryPolicy
from workers.placement import Placement
from workers.weighers import Multipliers

log = logging.getLogger(__name__)

SCHEDULER = Actor(user_id="stratus-scheduler", project_id="service", roles=("service",))
DURABLE = "scheduler"


def subjects(settings: Settings) -> tuple[str, str]:
    """(new servers to place, what feeds its host view)."""
    layout = SubjectLayout(settings.subject_prefix)
    return layout.topic_filter(get_topic(Instance.Requested)), layout.kind_filter("host")  # type: ignore[attr-defined]


def unshelves(settings: Settings) -> str:
    """Shelved servers to place again."""
    return SubjectLayout(settings.subject_prefix).topic_filter(get_topic(Instance.UnshelveRequested))  # type: ignore[attr-defined]


def moves(settings: Settings) -> str:
    """Servers to resize or migrate."""
    return SubjectLayout(settings.subject_prefix).topic_filter(get_topic(Instance.MigrationRequested))  # type: ignore[attr-defined]


def run(
    settings: Settings,
    *,
    bridge: NatsBridge,
    app: Stratus,
    stop: threading.Event,
    retry: RetryPolicy | None = None,
    poll: float = 1.0,
    durable: str = DURABLE,
) -> None:
    """Schedule until ``stop`` is set (``durable``: every scheduler shares the default one)."""
    requested, hosts = subjects(settings)

    def reload(host_id: UUID) -> Host | None:
        try:
            host: object = app.repository.get(host_id)
        except AggregateNotFoundError:
            return None
        return host if isinstance(host, Host) else None

    view = HostView(reload)
    feed = HostFeed(bridge, app, view, stream=settings.stream, subject_filter=hosts).open()
    placement = Placement(
        Handlers(app),
        view,
        feed.catch_up,
        retry=retry,
        multipliers=Multipliers.from_env(),
        siblings=siblings_reader(app, requested),
    )
    consumer = DurableConsumer(
        bridge,
        stream=settings.stream,
        durable=durable,
        filter_subjects=[requested, unshelves(settings), moves(settings)],
    )
    consumer.open()

    def handle(d: Delivery) -> Outcome:
        return placement.handle(d.originator_id, d.attempt, d.notification.id)

    # os-services shows the schedulers that beat (one row per machine, as Nova's per host)
    heartbeats = Heartbeats(bridge, bucket=bucket_for(settings.stream), replicas=settings.stream_replicas)
    me = socket.gethostname()
    beat = functools.partial(heartbeats.beat_service, SCHEDULER_BINARY, me)
    beating = beat_periodically(beat, f"scheduler-{me}", stop, settings.heartbeat_interval_seconds)
    log.info("scheduler consuming %s (durable %s)", requested, durable)
    try:
        serve(consumer, handle, stop, actor=SCHEDULER, poll=poll)
    finally:
        consumer.close()
        feed.close()
        beating.join(timeout=15)


def siblings_reader(app: Stratus, requested: str, window: int = 64) -> Callable[[str, int], list[str]]:
    """Reads the servers requested together with the one at ``position``: the following ``Requested``
    events of the same request and reservation (a multi-create appends them in one batch)."""

    def siblings(reservation_id: str, position: int) -> list[str]:
        found: list[str] = []
        request_id = None
        for msg in app.recorder.read_messages(position, window, subject_filter=requested):  # type: ignore[attr-defined]
            notification, envelope = decode_message(msg)
            payload = orjson.loads(notification.state)
            if payload.get("reservation_id") != reservation_id:
                break
            if request_id is not None and envelope.requestid != request_id:
                break
            request_id = envelope.requestid
            found.append(str(envelope.originator_id))
        return found

    return siblings


def main(settings: Settings) -> int:
    stop = threading.Event()
    with stop_on_signals(stop), NatsBridge(settings.nats_urls, name="stratus-scheduler") as bridge:
        app = Stratus(Factory(bridge=bridge, settings=settings))
        run(settings, bridge=bridge, app=app, stop=stop)
    return 0
