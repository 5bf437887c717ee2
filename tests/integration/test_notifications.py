"""Nova's versioned notifications projected from the real log onto their own JetStream stream."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

import schemas
from commands.app import Stratus
from commands.flavors.create import CreateFlavor
from commands.hosts.register import RegisterHost
from commands.servers.create import CreateServer
from commands.servers.delete import DeleteServer, FinishDeletion
from commands.servers.moves import ResizeDecision, ResizeServer
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import FailInstance, FinishSpawning, StartSpawning
from commands.states import PowerState
from projections import notifications
from stratus.config import Settings
from stratus.context import Actor, CommandContext, acting
from stratus.eventstore import EventStoreUnavailable, Factory, NatsBridge
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.migration import MigrationHandlers


@pytest.fixture
def notifier(bridge: NatsBridge, settings: Settings) -> Iterator[notifications.Notifier]:
    factory = Factory(bridge=bridge, settings=settings)
    n = notifications.Notifier(
        Stratus(factory),
        factory.application_recorder(),
        stream=f"{settings.stream}_NOTIFICATIONS",
        prefix=f"{settings.subject_prefix}_vn",
    )
    yield n

    async def delete() -> None:
        await bridge.js.delete_stream(n.stream)

    bridge.run(delete, 5)


def published(n: notifications.Notifier) -> list[tuple[dict[str, Any], dict[str, str]]]:
    async def read() -> list[tuple[dict[str, Any], dict[str, str]]]:
        info = await n.bridge.js.stream_info(n.stream)
        out = []
        for seq in range(1, info.state.last_seq + 1):
            msg = await n.bridge.js.get_msg(n.stream, seq)
            out.append((orjson.loads(msg.data or b"{}"), dict(msg.headers or {})))
        return out

    return n.bridge.run(read, 10)


def follow(n: notifications.Notifier, until: int) -> None:
    """Run the notifier in a thread until it published the notifications up to log position ``until``."""
    stop = threading.Event()
    thread = threading.Thread(target=n.run, args=(stop,), kwargs={"idle_wait": 0.05}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    try:
        while n.position < until:
            assert thread.is_alive(), "the notifier stopped"
            assert time.monotonic() < deadline, "the notifier did not catch up"
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=10)


def test_a_servers_life_as_nova_notifications(
    bridge: NatsBridge, settings: Settings, notifier: notifications.Notifier
) -> None:
    handlers = Handlers(Stratus(Factory(bridge=bridge, settings=settings)))
    with acting(CommandContext(actor=Actor("bob", "p1", ("member",)), request_id="req-notify")):
        handlers.create_flavor(CreateFlavor("1", "m1.tiny", 1, 512, 1))
        handlers.register_host(RegisterHost("cmp-1", 4, 8192, 40))
        ok = handlers.create_server(CreateServer("vm", "p1", "bob", "1"))
        handlers.place_instance(PlaceInstance(ok.id, "cmp-1"))
        handlers.start_spawning(StartSpawning(ok.id, "cmp-1"))
        handlers.finish_spawning(FinishSpawning(ok.id, PowerState.RUNNING))
        handlers.delete_server(DeleteServer(ok.id, "p1"))
        handlers.finish_deletion(FinishDeletion(ok.id))
        bad = handlers.create_server(CreateServer("vm2", "p1", "bob", "1"))
        handlers.place_instance(PlaceInstance(bad.id, "cmp-1"))
        last = handlers.fail_instance(
            FailInstance(bad.id, "compute.spawn_failed", "libvirt said no", "trace")
        ).position

    follow(notifier, last)
    got = published(notifier)
    validator = schemas.validator("notifications/instance.v1.json")
    for body, headers in got:
        errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(body)]
        assert errors == [], (body["event_type"], errors)
        assert (
            headers["Nats-Msg-Id"] == body["message_id"] and int(headers[notifications.SOURCE_POSITION]) > 0
        )
    mine = [b for b, _ in got if b["payload"]["nova_object.data"]["uuid"] == str(ok.id)]
    types = [b["event_type"] for b in mine]
    actions = [t for t in types if t != "instance.update"]
    assert actions == [
        "instance.create.start",
        "instance.create.end",
        "instance.delete.start",
        "instance.delete.end",
    ]
    assert types.count("instance.update") >= 3
    start, end = mine[0], next(b for b in mine if b["event_type"] == "instance.create.end")
    assert start["payload"]["nova_object.name"] == "InstanceCreatePayload"
    assert start["payload"]["nova_object.version"] == "1.11"
    data = end["payload"]["nova_object.data"]
    assert (data["state"], data["power_state"], data["host"], data["tenant_id"]) == (
        "active",
        "running",
        "cmp-1",
        "p1",
    )
    assert data["flavor"]["nova_object.data"]["memory_mb"] == 512 and data["launched_at"] is not None
    assert data["request_id"] == "req-notify" and data["action_initiator_user"] == "bob"
    update = next(b for b in mine if b["event_type"] == "instance.update")
    assert update["payload"]["nova_object.name"] == "InstanceUpdatePayload"
    assert set(update["payload"]["nova_object.data"]["state_update"]["nova_object.data"]) == {
        "old_state",
        "state",
        "old_task_state",
        "new_task_state",
    }
    deleted = next(b for b in mine if b["event_type"] == "instance.delete.end")["payload"]["nova_object.data"]
    assert deleted["state"] == "deleted" and deleted["deleted_at"] is not None
    failed = [b for b, _ in got if b["event_type"] == "instance.create.error"]
    assert len(failed) == 1 and failed[0]["priority"] == "ERROR"
    fault = failed[0]["payload"]["nova_object.data"]["fault"]["nova_object.data"]
    assert fault["exception_message"] == "libvirt said no"

    # restarting publishes nothing twice: it continues after the last source position
    count = len(got)
    again = notifications.Notifier(
        notifier.app, notifier.recorder, stream=notifier.stream, prefix=notifier.prefix
    )
    follow(again, last)
    assert len(published(again)) == count
    # and a crash between publishing and remembering republishes into deduplication: nothing doubles
    again.publish([(int(h[notifications.SOURCE_POSITION]), _note(b)) for b, h in got[-3:]])
    assert len(published(again)) == count


def test_a_resize_and_its_revert_as_nova_notifications(
    bridge: NatsBridge, settings: Settings, notifier: notifications.Notifier
) -> None:
    handlers = Handlers(Stratus(Factory(bridge=bridge, settings=settings)))
    moves = MigrationHandlers(handlers)
    with acting(CommandContext(actor=Actor("bob", "p1", ("member",)), request_id="req-resize")):
        handlers.create_flavor(CreateFlavor("1", "m1.tiny", 1, 512, 1))
        handlers.create_flavor(CreateFlavor("2", "m1.small", 2, 1024, 1))
        for host in ("cmp-1", "cmp-2"):
            handlers.register_host(RegisterHost(host, 4, 8192, 40))
        vm = handlers.create_server(CreateServer("vm", "p1", "bob", "1")).id
        handlers.place_instance(PlaceInstance(vm, "cmp-1"))
        handlers.start_spawning(StartSpawning(vm, "cmp-1"))
        handlers.finish_spawning(FinishSpawning(vm, PowerState.RUNNING))
        moves.resize(ResizeServer(vm, "p1", "2"))
        moves.place(vm, "cmp-2")
        moves.left_source(vm)
        moves.finished(vm, PowerState.RUNNING)
        moves.revert(ResizeDecision(vm, "p1"))
        moves.left_dest(vm)
        last = moves.reverted(vm, PowerState.RUNNING).position

    follow(notifier, last)
    got = [b for b, _ in published(notifier) if b["payload"]["nova_object.data"]["uuid"] == vm]
    validator = schemas.validator("notifications/instance.v1.json")
    for body in got:
        assert [e.message for e in validator.iter_errors(body)] == [], body["event_type"]
    moved = [b["event_type"] for b in got if ".resize" in b["event_type"]]
    assert moved == [
        "instance.resize_prep.start", "instance.resize_prep.end", "instance.resize.start",
        "instance.resize.end", "instance.resize_finish.start", "instance.resize_finish.end",
        "instance.resize_revert.start", "instance.resize_revert.end",
    ]  # fmt: skip
    prep = next(b for b in got if b["event_type"] == "instance.resize_prep.start")["payload"]
    assert prep["nova_object.name"] == "InstanceActionResizePrepPayload"
    assert prep["nova_object.data"]["new_flavor"]["nova_object.data"]["memory_mb"] == 1024
    finished = next(b for b in got if b["event_type"] == "instance.resize_finish.end")["payload"]
    assert (finished["nova_object.data"]["host"], finished["nova_object.data"]["state"]) == (
        "cmp-2",
        "resized",
    )
    reverted = next(b for b in got if b["event_type"] == "instance.resize_revert.end")["payload"]
    data = reverted["nova_object.data"]
    assert (data["host"], data["state"], data["flavor"]["nova_object.data"]["memory_mb"]) == (
        "cmp-1",
        "active",
        512,
    )


def _note(body: dict[str, Any]) -> notifications.Notification:
    return notifications.Notification(body["event_type"], body["priority"], body, body["message_id"])


def test_a_notifier_starting_mid_life_loads_the_instance(
    bridge: NatsBridge, settings: Settings, notifier: notifications.Notifier
) -> None:
    handlers = Handlers(Stratus(Factory(bridge=bridge, settings=settings)))
    handlers.create_flavor(CreateFlavor("1", "m1.tiny", 1, 512, 1))
    handlers.register_host(RegisterHost("cmp-1", 4, 8192, 40))
    ok = handlers.create_server(CreateServer("vm", "p1", "bob", "1"))
    placed = handlers.place_instance(PlaceInstance(ok.id, "cmp-1")).position
    # as if the notifier had published everything up to the placement before a restart
    fresh = notifications.Notifier(
        notifier.app, notifier.recorder, stream=notifier.stream, prefix=notifier.prefix
    )
    fresh.ensure_stream()
    fresh.publish([(placed, notifications.Notification("instance.update", "INFO", {"marker": True}, "m-1"))])
    handlers.start_spawning(StartSpawning(ok.id, "cmp-1"))
    last = handlers.finish_spawning(FinishSpawning(ok.id, PowerState.RUNNING)).position
    follow(fresh, last)
    types = [b["event_type"] for b, _ in published(fresh)[1:]]
    assert "instance.create.end" in types and "instance.create.start" not in types


def test_a_notification_stream_that_does_not_answer_direct_gets_yet_is_waited_for(
    notifier: notifications.Notifier,
) -> None:
    """A stream just made answers direct gets a moment later: ``stratus notifier`` met "no responders"
    at start and exited. It is the event store being away for a moment (the notifier's loop retries),
    shown here by a stream that never answers direct gets."""
    config = dataclasses.replace(notifier.stream_config(), allow_direct=False)

    async def make() -> None:
        await notifier.bridge.js.add_stream(config)

    notifier.bridge.run(make, 5)
    with pytest.raises(EventStoreUnavailable, match="does not answer direct gets yet"):
        notifier.last_source_position()
