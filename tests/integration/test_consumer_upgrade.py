"""A durable consumer left by an older release is brought to today's filter in place (real JetStream,
the real scheduler): it keeps its position, so no event is delivered twice and none after it is
skipped (docs/upgrades.md)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from commands.hosts.register import RegisterHost
from commands.instance import Instance
from commands.servers.create import CreateServer
from commands.servers.moves import MigrateServer
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import FinishSpawning, StartSpawning
from commands.states import PowerState, TaskState
from stratus.config import Settings
from stratus.eventstore import JetStreamApplicationRecorder, NatsBridge
from tests.fixtures.commands import M1_SMALL
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.migration import MigrationHandlers
from tests.fixtures.scheduler import settled
from tests.fixtures.workers import Worker, eventually
from workers import scheduler
from workers.consumer import ConsumerMismatch, Delivery, DurableConsumer, serve
from workers.outcome import DONE, Outcome
from workers.scheduler import SCHEDULER

pytestmark = pytest.mark.flavors(M1_SMALL)


def info(bridge: NatsBridge, settings: Settings, durable: str = scheduler.DURABLE) -> Any:
    return bridge.run(lambda: bridge.js.consumer_info(settings.stream, durable), 10)


def test_an_older_filter_is_updated_in_place_and_the_position_kept(
    handlers: Handlers, bridge: NatsBridge, settings: Settings, start_scheduler: Callable[..., Worker]
) -> None:
    handlers.register_host(RegisterHost("compute-a", vcpus=8, memory_mb=8192, disk_gb=100))
    handlers.register_host(RegisterHost("compute-b", vcpus=8, memory_mb=8192, disk_gb=100))
    requested, _ = scheduler.subjects(settings)
    # The scheduler of an older release placed new servers only: one filter subject, a shorter ack wait.
    old = ConsumerConfig(
        durable_name=scheduler.DURABLE,
        deliver_policy=DeliverPolicy.ALL,
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=30.0,
        max_deliver=-1,
        filter_subject=requested,
    )
    bridge.run(lambda: bridge.js.add_consumer(settings.stream, config=old), 10)
    made = info(bridge, settings).created
    first = handlers.create_server(CreateServer("first", "p1", "u1", "small")).id

    async def take_one() -> int:  # as the old scheduler did: take the request, place it, acknowledge
        sub = await bridge.js.pull_subscribe_bind(durable=scheduler.DURABLE, stream=settings.stream)
        [msg] = await sub.fetch(1, timeout=5)
        await msg.ack_sync()
        await sub.unsubscribe()
        return int(msg.metadata.sequence.stream)

    taken = bridge.run(take_one, 15)
    handlers.place_instance(PlaceInstance(first, "compute-a"))
    handlers.start_spawning(StartSpawning(first, "compute-a"))
    handlers.finish_spawning(FinishSpawning(first, PowerState.RUNNING))
    # The upgrade: while no scheduler runs, a new server and a cold migration (a type the old filter
    # did not take) are asked for.
    second = handlers.create_server(CreateServer("second", "p1", "u1", "small")).id
    MigrationHandlers(handlers).migrate(MigrateServer(first))

    start_scheduler()  # today's scheduler: same durable, today's filter subjects

    assert eventually(lambda: settled(handlers, second)).host in ("compute-a", "compute-b")

    def placed() -> Instance | None:
        inst = handlers.instance(first)
        return inst if inst.task_state != TaskState.RESIZE_PREP else None

    moved = eventually(placed)
    assert moved.migration is not None and moved.migration["dest"] == "compute-b"
    now = eventually(lambda: (i := info(bridge, settings)).num_ack_pending == 0 and i)
    assert sorted(now.config.filter_subjects) == sorted(
        [requested, scheduler.unshelves(settings), scheduler.moves(settings)]
    )
    assert now.config.ack_wait == scheduler.ACK_WAIT
    # Kept its position: one delivery before the upgrade, then exactly the two events after it (the
    # new server's request and the migration), none of them twice, nothing left pending.
    assert now.delivered.consumer_seq == 3
    assert now.num_redelivered == 0 and now.num_pending == 0
    assert now.ack_floor.stream_seq > taken
    assert now.created == made  # the same consumer, not one made again


def test_a_consumer_that_cannot_be_updated_in_place_is_refused(
    recorder: JetStreamApplicationRecorder, bridge: NatsBridge, settings: Settings
) -> None:
    """Delivery and ack policies cannot change on a durable: the part says so rather than deleting it."""
    requested, _ = scheduler.subjects(settings)
    push = ConsumerConfig(
        durable_name="old-push",
        deliver_policy=DeliverPolicy.NEW,
        ack_policy=AckPolicy.EXPLICIT,
        filter_subject=requested,
    )
    bridge.run(lambda: bridge.js.add_consumer(settings.stream, config=push), 10)
    consumer = DurableConsumer(
        bridge, stream=settings.stream, durable="old-push", filter_subjects=[requested]
    )
    with pytest.raises(ConsumerMismatch, match="deliver_policy"):
        consumer.open()
    assert info(bridge, settings, "old-push").config.deliver_policy == DeliverPolicy.NEW


def test_a_stopping_part_hands_back_what_it_took_for_the_next_one_at_once(
    handlers: Handlers, bridge: NatsBridge, settings: Settings
) -> None:
    """On SIGTERM a worker finishes the message in hand and hands back the others it fetched: the part
    started next gets them now, not after the ack wait (a rolling restart delays no step)."""
    requested, _ = scheduler.subjects(settings)
    servers = [handlers.create_server(CreateServer(f"vm-{i}", "p1", "u1", "small")).id for i in range(3)]
    stop = threading.Event()
    handled: list[Delivery] = []

    def handle(d: Delivery) -> Outcome:
        handled.append(d)
        stop.set()  # SIGTERM while the first of three is in hand
        return DONE

    wait = 3600.0  # an ack wait no test would outlast: what comes back, comes back because handed back
    old = DurableConsumer(bridge, stream=settings.stream, durable="stopping", filter_subjects=[requested],
                          ack_wait=wait).open()  # fmt: skip
    serve(old, handle, stop, actor=SCHEDULER, batch=3, poll=1.0)
    old.close()
    assert [d.originator_id for d in handled] == servers[:1]

    new = DurableConsumer(bridge, stream=settings.stream, durable="stopping", filter_subjects=[requested],
                          ack_wait=wait).open()  # fmt: skip
    try:
        msgs = new.fetch(3, 10.0)
        assert [m.metadata.num_delivered for m in msgs] == [2, 2]
        assert [str(m.headers["ce-subject"]) for m in msgs if m.headers] == servers[1:]
    finally:
        new.close()
