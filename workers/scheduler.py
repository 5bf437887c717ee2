"""The scheduler: places every requested instance on a host with room, or faults it with "No valid host".

Consumes ``<prefix>.instance.*.requested`` with the durable pull consumer ``scheduler`` (shared by
every scheduler process: each request goes to one of them), keeps an advisory view of the hosts
from ``<prefix>.host.>``, and sends ``PlaceInstance`` / ``FailInstance`` (and their kin) to its bus.
Several schedulers may run at once; the Host aggregate's optimistic concurrency keeps them from
overcommitting a host.

``run`` takes its collaborators; the process's composition root is ``processes/scheduler.py``. Besides
the bus, the scheduler reads the log raw (``RequestLog``): the requests of a multi-create that follow
one another, and the delivered request as the head of its server (so placing it needs no read).
"""

from __future__ import annotations

import functools
import logging
import socket
import threading
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable
from uuid import UUID

import orjson
from eventsourcing.application import AggregateNotFoundError
from eventsourcing.utils import get_topic
from nats.aio.msg import Msg

from commands.app import Stratus
from commands.bus import bootstrap
from commands.host import Host
from commands.instance import Instance
from stratus import metrics
from stratus.config import SCHEDULER_MAX_BATCH, Settings
from stratus.context import Actor, CommandContext, acting
from stratus.eventstore import NatsBridge
from stratus.eventstore.envelope import decode_message
from stratus.eventstore.signing import UntrustedEvent, Verifier
from stratus.eventstore.subjects import SubjectLayout
from stratus.liveness import SCHEDULER_BINARY, Heartbeats, beat_periodically, bucket_for
from workers.consumer import STORE_TEMPORARY, Delivery, DurableConsumer, serve_batches, when_ready
from workers.host_feed import HostFeed
from workers.host_view import HostView
from workers.outcome import DONE, Outcome, RetryLater, RetryPolicy
from workers.scheduling import EVERY_HOST, Scheduling, Shard
from workers.weighers import Multipliers

log = logging.getLogger(__name__)

SCHEDULER = Actor(user_id="stratus-scheduler", project_id="service", roles=("service",))
DURABLE = "scheduler"
# Requests placed in one pass at most: one atomic append carries their claims and their servers'
# hosts (two events each; a JetStream atomic batch takes at most 1000 messages).
BATCH = SCHEDULER_MAX_BATCH
# Seconds before requests a scheduler took and did not settle (it died) go to another scheduler.
ACK_WAIT = Settings.scheduler_ack_wait_seconds


@runtime_checkable
class RequestLog(Protocol):
    """What the scheduler reads of the event log besides the bus's loads: stored messages by position,
    and a delivered message noted as its aggregate's head. The JetStream recorder
    (``stratus.eventstore.JetStreamApplicationRecorder``) is one; ``request_log`` finds it on an app."""

    def read_messages(self, start: int, limit: int) -> Sequence[Msg]:
        """The stored messages from position ``start`` (inclusive), ``limit`` at most."""
        ...

    def observe(self, msg: Msg) -> None:
        """Note a stored event read off a consumer as its aggregate's head, if it is the newest seen."""
        ...


def request_log(app: Stratus) -> RequestLog:
    """The app's recorder as the scheduler reads it (a TypeError, at start, for one that cannot be)."""
    recorder = app.recorder
    if not isinstance(recorder, RequestLog):
        raise TypeError(f"the scheduler cannot read requests off a {type(recorder).__name__}")
    return recorder


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
    batch: int = BATCH,
    shard: Shard = EVERY_HOST,
    ack_wait: float = ACK_WAIT,
) -> None:
    """Schedule until ``stop`` is set (``durable``: every scheduler shares the default one; ``batch``:
    the most requests taken off the log and placed in one pass)."""
    requested, hosts = subjects(settings)
    requests = request_log(app)
    view = HostView(host_reader(app))
    trust = Verifier.load(settings.trust_registry)
    feed = when_ready(
        "opening the host feed",
        HostFeed(bridge, app, view, stream=settings.stream, subject_filter=hosts, trust=trust).open,
        stop,
    )
    if feed is None:
        return
    scheduling = Scheduling(
        bootstrap(app),
        view,
        feed.catch_up,
        retry=retry,
        multipliers=Multipliers.of(settings),
        siblings=siblings_reader(requests),
        shard=shard,
    )
    consumer = DurableConsumer(
        bridge,
        stream=settings.stream,
        durable=durable,
        filter_subjects=[requested, unshelves(settings), moves(settings)],
        ack_wait=ack_wait,
        heads=requests,
        trust=trust,
    )
    if when_ready(f"opening consumer {durable}", consumer.open, stop) is None:
        return

    def handle(d: Delivery) -> Outcome:
        created = d.event_type == "requested"
        return scheduling.handle(d.originator_id, d.attempt, d.notification.id, created=created)

    def handle_batch(deliveries: list[Delivery]) -> list[Outcome]:
        with metrics.SCHEDULER_DECISION.time():
            return decide(deliveries)

    def decide(deliveries: list[Delivery]) -> list[Outcome]:
        """Plain new servers go together (``Scheduling.place_batch``); the rest one by one, in order."""
        alone: dict[str, tuple[Instance, CommandContext]] = {}
        batched: set[int] = set()  # the deliveries placed together (a server's later requests are not)
        for i, d in enumerate(deliveries):
            inst = requested_alone(app, requests, d)
            if inst is not None:
                alone[inst.server_id] = (inst, d.context(SCHEDULER))
                batched.add(i)
        left = (
            {inst.server_id for inst, _ in scheduling.place_batch(list(alone.values()))} if alone else set()
        )
        scheduling.settled.clear()
        outcomes: list[Outcome] = []
        for i, d in enumerate(deliveries):
            if i in batched and d.originator_id not in left:
                outcomes.append(DONE)
                continue
            if d.event_type == "requested" and d.originator_id in scheduling.settled:
                outcomes.append(DONE)  # placed (or failed) with the first server of its multi-create
                continue
            try:
                with acting(d.context(SCHEDULER)):
                    outcomes.append(handle(d))
            except STORE_TEMPORARY as e:
                outcomes.append(RetryLater(2.0, f"event store unavailable: {e}"))
        return outcomes

    def settle(d: Delivery, error: Exception) -> None:
        """A request quarantined: its server gets a fault rather than waiting for a host forever."""
        details = (
            f"The scheduler could not handle this request ({type(error).__name__}); the event at log "
            f"position {d.notification.id} was quarantined."
        )
        scheduling.give_up(d.originator_id, details, created=d.event_type == "requested")

    # os-services shows the schedulers that beat (one row per machine, as Nova's per host)
    heartbeats = Heartbeats(bridge, bucket=bucket_for(settings.stream), replicas=settings.stream_replicas)
    me = socket.gethostname()
    beat = functools.partial(heartbeats.beat_service, SCHEDULER_BINARY, me)
    beating = beat_periodically(beat, f"scheduler-{me}", stop, settings.heartbeat_interval_seconds)
    log.info("scheduler consuming %s (durable %s)", requested, durable)
    try:
        serve_batches(
            consumer, handle_batch, stop, actor=SCHEDULER, batch=batch, poll=poll, settle=settle,
            idle=feed.fold_arrived,  # the host view kept current while there is nothing to place
        )  # fmt: skip
    finally:
        consumer.close()
        feed.close()
        beating.join(timeout=15)


def host_reader(app: Stratus) -> Callable[[UUID], Host | None]:
    """How the host view reads one host again after a gap in its feed: None for a host that is not
    there, or whose history holds an event the trust check refuses (logged: the host is left out of
    the view, so nothing is placed on it, until an operator excludes that event)."""

    def reload(host_id: UUID) -> Host | None:
        try:
            host: object = app.repository.get(host_id)
        except AggregateNotFoundError:
            return None
        except UntrustedEvent as e:
            log.error("host %s left out of the scheduler's view: %s", host_id, e)
            return None
        return host if isinstance(host, Host) else None

    return reload


def requested_alone(app: Stratus, requests: RequestLog, d: Delivery) -> Instance | None:
    """The server a first delivery of ``Instance.Requested`` asks for, rebuilt from the delivered
    event itself when its request placed it alone and in no group (no read: the append that places it
    checks it is still at that version); else None."""
    if d.event_type != "requested" or d.attempt != 1 or d.message is None:
        return None
    event = app.mapper.to_domain_event(d.notification)
    inst = event.mutate(None) if isinstance(event, Instance.Requested) else None
    if not isinstance(inst, Instance) or not inst.placed_alone:
        return None
    return inst


def siblings_reader(
    requests: RequestLog, window: int = 100, chunk: int = 16
) -> Callable[[str, int], list[str]]:
    """Reads the servers requested together with the one at ``position``: the ``Requested`` events
    that follow it in the same request and reservation (a create appends its servers' requests one
    after another in one atomic append, ``window`` at most: the API's max_count). The log is read
    unfiltered, ``chunk`` events at a time: a filtered read would make nats-server match every
    instance's subjects to count what remains."""

    def siblings(reservation_id: str, position: int) -> list[str]:
        found: list[str] = []
        request_id = None
        while len(found) < window:
            msgs = requests.read_messages(position + len(found), chunk)
            for msg in msgs:
                try:
                    notification, envelope = decode_message(msg)
                    payload = orjson.loads(notification.state) if envelope.topic == _REQUESTED else None
                except (KeyError, ValueError):  # an event that is not a sibling's request ends them
                    return found
                if not isinstance(payload, dict) or len(found) == window:
                    return found
                if payload.get("reservation_id") != reservation_id:
                    return found
                if request_id is not None and envelope.requestid != request_id:
                    return found
                request_id = envelope.requestid
                found.append(str(envelope.originator_id))
            if len(msgs) < chunk:
                return found
        return found

    return siblings


_REQUESTED = get_topic(Instance.Requested)
