"""The scheduler places the requests waiting for it together: one pass over the host view, one
atomic append, each placement filed under the request it answers (real JetStream)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import orjson
import pytest

from commands.app import Stratus
from commands.host import Resources
from commands.hosts.register import RegisterHost
from commands.hosts.services import SetServiceStatus
from commands.instance import Instance
from commands.servers.create import CreateServer
from commands.servers.scheduling import PlaceInstance
from commands.states import VmState
from stratus.config import Settings
from stratus.context import Actor, CommandContext, acting
from stratus.eventstore import Factory, NatsBridge
from stratus.eventstore.envelope import APPEND_ID, decode_message
from tests.fixtures.commands import M1_HUGE, M1_SMALL
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.operations import Operations
from tests.fixtures.scheduler import settled
from tests.fixtures.workers import Worker, eventually
from workers import scheduler
from workers.host_feed import HostFeed
from workers.host_view import HostView
from workers.scheduling import Scheduling, Shard

pytestmark = pytest.mark.flavors(M1_SMALL, M1_HUGE)


@pytest.fixture
def run_scheduler(bridge: NatsBridge, settings: Settings) -> Iterator[None]:
    def target(stop: threading.Event) -> None:
        app = Stratus(Factory(bridge=bridge, settings=settings))
        scheduler.run(settings, bridge=bridge, app=app, stop=stop, poll=0.1)

    worker = Worker(target)
    yield
    worker.close()


def test_waiting_requests_are_placed_in_one_append_each_under_its_own_request(
    handlers: Handlers, app: Stratus, request: pytest.FixtureRequest
) -> None:
    handlers.register_host(RegisterHost("compute-a", vcpus=8, memory_mb=2048, disk_gb=100))
    handlers.register_host(RegisterHost("compute-b", vcpus=8, memory_mb=1024, disk_gb=100))
    Operations(app).set_quota("p1", {"instances": -1, "cores": -1, "ram": -1}, {})
    servers: dict[str, CommandContext] = {}
    for i in range(5):  # five users' requests, all waiting before the scheduler starts
        ctx = CommandContext(actor=Actor(f"user-{i}", "p1"), request_id=f"req-{i}")
        with acting(ctx):
            servers[handlers.create_server(CreateServer(f"vm-{i}", "p1", f"user-{i}", "small")).id] = ctx
    with acting(CommandContext(actor=Actor("user-big", "p1"), request_id="req-big")):
        big = handlers.create_server(CreateServer("vm-big", "p1", "user-big", "huge")).id  # fits nowhere
    start = app.recorder.max_notification_id() or 0

    request.getfixturevalue("run_scheduler")
    done = eventually(
        lambda: (
            [settled(handlers, s) for s in [*servers, big]]
            if all(settled(handlers, s) for s in [*servers, big])
            else None
        )
    )

    # Room for 4 + 2 smalls by RAM: all five placed, spread by the weighers (free RAM, vCPUs and disk,
    # normalized once for the pass): a, a, b, a, b; nothing overcommitted.
    hosts = {s: str(inst.host) for s, inst in zip(servers, done[:-1], strict=True) if inst is not None}
    assert sorted(hosts.values()) == ["compute-a"] * 3 + ["compute-b"] * 2
    used = {name: handlers.host(name).used() for name in ("compute-a", "compute-b")}
    assert used == {"compute-a": Resources(3, 1536, 3), "compute-b": Resources(2, 1024, 2)}
    failed = done[-1]
    assert failed is not None and failed.vm_state == VmState.ERROR and failed.fault is not None
    assert "Requested vcpus=2, memory_mb=49152, disk_gb=10" in failed.fault["details"]

    # One atomic append placed the five; each event names its request and the event it answers.
    requested, placed = {}, []
    for msg in app.recorder.read_messages(start + 1, 1000):  # type: ignore[attr-defined]
        _, envelope = decode_message(msg)
        kind = envelope.type.rsplit(".", 1)[-1]
        if kind in ("instanceclaimed", "scheduled"):
            server = (
                str(envelope.originator_id)
                if kind == "scheduled"
                else orjson.loads(envelope.data)["instance_id"]
            )
            placed.append((server, envelope, (msg.headers or {})[APPEND_ID]))
        elif kind == "faulted":
            assert (envelope.correlationid, envelope.actoruser) == ("req-big", "stratus-scheduler")
    for msg in app.recorder.read_messages(1, 1000):  # type: ignore[attr-defined]
        _, envelope = decode_message(msg)
        if envelope.type.endswith(".requested"):
            requested[str(envelope.originator_id)] = envelope.id
    assert len(placed) == 10 and len({append for _, _, append in placed}) == 1
    for server, envelope, _ in placed:
        assert envelope.correlationid == servers[server].request_id  # the user's request
        assert envelope.causationid == requested[server]  # caused by that server's Requested event
        assert (envelope.actoruser, envelope.actorproject) == ("stratus-scheduler", "service")


def test_a_request_deleted_while_waiting_does_not_hold_up_the_others(
    handlers: Handlers, request: pytest.FixtureRequest
) -> None:
    from commands.servers.delete import DeleteServer

    handlers.register_host(RegisterHost("compute-a", vcpus=8, memory_mb=4096, disk_gb=100))
    first = handlers.create_server(CreateServer("first", "p1", "u1", "small")).id
    gone = handlers.create_server(CreateServer("gone", "p1", "u1", "small")).id
    last = handlers.create_server(CreateServer("last", "p1", "u1", "small")).id
    handlers.delete_server(DeleteServer(gone, "p1"))
    request.getfixturevalue("run_scheduler")
    eventually(lambda: settled(handlers, first) and settled(handlers, last))
    assert set(handlers.host("compute-a").claims) == {first, last}


def test_requests_of_a_multi_create_or_a_group_are_not_batched(handlers: Handlers) -> None:
    """What the request recorded decides: placed alone only when requested alone and in no group;
    a request appended before that was recorded (v3) goes the one-by-one way, which reads it."""
    alone = handlers.instance(handlers.create_server(CreateServer("a", "p1", "u1", "small")).id)
    two = handlers.create_server(CreateServer("b", "p1", "u1", "small", count=2))
    together = handlers.instance(two.ids[0])
    assert alone.scheduling == {"num_instances": 1, "group_id": None} and alone.placed_alone
    assert together.scheduling == {"num_instances": 2, "group_id": None} and not together.placed_alone
    state = {"flavor": {}, "launch_index": 0}
    Instance.Requested.upcast_v3_v4(state)
    assert state["scheduling"] is None


def test_the_standing_ranking_follows_the_hosts_between_batches(
    handlers: Handlers, app: Stratus, bridge: NatsBridge, settings: Settings, request: pytest.FixtureRequest
) -> None:
    """Batches do not filter and weigh every host again: they rank the hosts that changed since the
    last one. A host disabled, filled by another scheduler, or registered in between is seen."""
    handlers.register_host(RegisterHost("compute-a", vcpus=8, memory_mb=4096, disk_gb=100))
    handlers.register_host(RegisterHost("compute-b", vcpus=8, memory_mb=2048, disk_gb=100))
    view = HostView()
    feed = HostFeed(bridge, app, view, stream=settings.stream, subject_filter=scheduler.subjects(settings)[1])
    request.addfinalizer(feed.close)
    placement = Scheduling(handlers.bus, view, feed.open().catch_up)

    def place(name: str) -> str | None:
        inst = handlers.instance(handlers.create_server(CreateServer(name, "p1", "u1", "small")).id)
        assert placement.place_batch([(inst, CommandContext())]) == []
        return handlers.instance(inst.server_id).host

    assert place("first") == "compute-a"  # most free RAM
    Operations(app).set_service_status(SetServiceStatus("compute-a", "nova-compute", disabled=True))
    assert place("second") == "compute-b"  # compute-a left the ranking when it was disabled
    # another scheduler fills compute-b (1536 MB left) behind this one's back
    for i in range(3):
        other = handlers.create_server(CreateServer(f"other-{i}", "p1", "u1", "small")).id
        handlers.place_instance(PlaceInstance(other, "compute-b"))
    assert place("third") is None  # no room left anywhere: faulted, nothing overcommitted
    assert handlers.host("compute-b").used().memory_mb == 2048
    handlers.register_host(RegisterHost("compute-c", vcpus=8, memory_mb=1024, disk_gb=100))
    assert place("fourth") == "compute-c"  # a host registered between batches joins the ranking


def test_schedulers_with_shards_place_on_their_own_hosts_first(
    handlers: Handlers, app: Stratus, bridge: NatsBridge, settings: Settings, request: pytest.FixtureRequest
) -> None:
    names = [f"compute-{i}" for i in range(6)]
    for name in names:
        handlers.register_host(RegisterHost(name, vcpus=8, memory_mb=2048, disk_gb=100))  # 4 smalls each
    Operations(app).set_quota("p1", {"instances": -1, "cores": -1, "ram": -1}, {})
    shards = [Shard(0, 2), Shard(1, 2)]
    owned = [[n for n in names if s.owns(n)] for s in shards]
    assert all(owned) and sorted(owned[0] + owned[1]) == names  # a partition of the hosts

    def scheduler_with(shard: Shard) -> Scheduling:
        view, hosts_filter = HostView(), scheduler.subjects(settings)[1]
        feed = HostFeed(bridge, app, view, stream=settings.stream, subject_filter=hosts_filter)
        request.addfinalizer(feed.close)
        return Scheduling(handlers.bus, view, feed.open().catch_up, shard=shard)

    def place(placement: Scheduling, count: int) -> list[str]:
        created = handlers.create_server(CreateServer("vm", "p1", "u1", "small", count=count)).ids
        assert placement.place_batch([(handlers.instance(s), CommandContext()) for s in created]) == []
        return [str(handlers.instance(s).host) for s in created]

    first, second = scheduler_with(shards[0]), scheduler_with(shards[1])
    assert set(place(first, 2)) <= set(owned[0])
    assert set(place(second, 2)) <= set(owned[1])
    # the first shard fills up: the rest of a batch goes to any host with room
    room = 4 * len(owned[0]) - 2
    hosts = place(first, room + 1)
    assert set(hosts[:room]) <= set(owned[0]) and hosts[room] in owned[1]


def test_a_servers_later_request_in_the_same_batch_as_its_creation_is_handled(
    handlers: Handlers, app: Stratus, request: pytest.FixtureRequest
) -> None:
    """A scheduler that starts with a backlog takes a server's ``Requested`` (placed long ago) and a
    later request of it (here a resize) in one batch. The creation goes to the batch path, finds no
    room (its host is disabled) and is done; the resize must still be handled on its own, not
    acknowledged with it as "placed together" (an unshelve was lost that way while its host was
    disabled: the server stayed SHELVED_OFFLOADED with its task forever)."""
    from commands.servers.moves import ResizeServer
    from commands.servers.spawn import FinishSpawning, StartSpawning
    from tests.fixtures.facades.migration import MigrationHandlers

    handlers.register_host(RegisterHost("compute-a", vcpus=8, memory_mb=4096, disk_gb=100))
    server = handlers.create_server(CreateServer("vm", "p1", "u1", "small")).id
    handlers.place_instance(PlaceInstance(server, "compute-a"))
    handlers.start_spawning(StartSpawning(server, "compute-a"))
    handlers.finish_spawning(FinishSpawning(server, power_state=1))
    Operations(app).set_service_status(SetServiceStatus("compute-a", "nova-compute", disabled=True))
    MigrationHandlers(handlers).resize(ResizeServer(server, "p1", "huge"))
    assert handlers.instance(server).awaiting_move
    request.getfixturevalue("run_scheduler")  # both requests waiting: one batch
    eventually(lambda: not handlers.instance(server).awaiting_move)  # no valid host: the move failed
    inst = handlers.instance(server)
    assert inst.vm_state == VmState.ACTIVE and inst.host == "compute-a" and inst.task_state is None
