"""The scheduler against a real JetStream: placement, "No valid host", racing schedulers, redelivery."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

from commands.app import Stratus
from commands.errors import NotFound, NoValidHost
from commands.flavors.create import CreateFlavor
from commands.host import Resources
from commands.hosts.register import RegisterHost
from commands.servers.create import CreateServer
from commands.servers.delete import DeleteServer
from commands.states import VmState
from stratus.eventstore import Factory, NatsBridge
from stratus.natsserver import NatsServer
from tests.fixtures.commands import M1_HUGE, M1_SMALL
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.nats import unique_settings
from tests.fixtures.scheduler import settled
from tests.fixtures.workers import Worker, eventually
from workers import scheduler
from workers.host_selection import NO_VALID_HOST
from workers.host_view import HostView
from workers.outcome import DONE, RetryPolicy
from workers.scheduling import Scheduling

pytestmark = pytest.mark.flavors(M1_SMALL, M1_HUGE)

T = TypeVar("T")


def create(handlers: Handlers, flavor: str = "small", name: str = "vm") -> str:
    return handlers.create_server(CreateServer(name, "p1", "u1", flavor)).id


def test_places_on_the_host_with_most_free_ram(
    handlers: Handlers, start_scheduler: Callable[..., Worker]
) -> None:
    handlers.register_host(RegisterHost("compute-a", vcpus=4, memory_mb=2048, disk_gb=50))
    handlers.register_host(RegisterHost("compute-b", vcpus=4, memory_mb=4096, disk_gb=50))
    start_scheduler()
    server = create(handlers)
    inst = eventually(lambda: settled(handlers, server))
    assert (inst.vm_state, inst.task_state, inst.host) == (VmState.BUILDING, None, "compute-b")
    assert handlers.host("compute-b").claims == {server: {"vcpus": 1, "memory_mb": 512, "disk_gb": 1}}
    assert handlers.host("compute-a").claims == {}


def test_no_room_anywhere_faults_with_no_valid_host(
    handlers: Handlers, start_scheduler: Callable[..., Worker]
) -> None:
    handlers.register_host(RegisterHost("compute-a", vcpus=4, memory_mb=2048, disk_gb=50))
    start_scheduler()
    server = create(handlers, "huge")
    inst = eventually(lambda: settled(handlers, server))
    assert (inst.vm_state, inst.host) == (VmState.ERROR, None)
    assert inst.fault is not None
    assert inst.fault["code"] == NoValidHost.code
    assert inst.fault["message"] == NO_VALID_HOST
    assert "memory_mb=49152" in inst.fault["details"]
    assert "1 short of memory_mb (most free: 2048)" in inst.fault["details"]
    assert handlers.host("compute-a").claims == {}


def test_hosts_registered_after_start_are_seen(
    handlers: Handlers, start_scheduler: Callable[..., Worker]
) -> None:
    start_scheduler()
    first = create(handlers, name="first")
    assert eventually(lambda: settled(handlers, first)).vm_state == VmState.ERROR  # no hosts yet
    handlers.register_host(RegisterHost("compute-late", vcpus=1, memory_mb=1024, disk_gb=10))
    second = create(handlers, name="second")
    assert eventually(lambda: settled(handlers, second)).host == "compute-late"


def test_a_request_deleted_before_scheduling_is_skipped(
    handlers: Handlers, start_scheduler: Callable[..., Worker]
) -> None:
    handlers.register_host(RegisterHost("compute-a", vcpus=4, memory_mb=2048, disk_gb=50))
    gone = create(handlers, name="gone")
    handlers.delete_server(DeleteServer(gone, "p1"))
    start_scheduler()
    later = create(handlers, name="later")
    eventually(lambda: settled(handlers, later))  # in stream order: `gone` was dealt with first
    with pytest.raises(NotFound):
        handlers.instance(gone)
    assert set(handlers.host("compute-a").claims) == {later}


@pytest.mark.parametrize(
    "shared_consumer", [True, False], ids=["shared-consumer", "every-scheduler-sees-all"]
)
def test_racing_schedulers_never_overcommit(
    handlers: Handlers, start_scheduler: Callable[..., Worker], shared_consumer: bool
) -> None:
    # Room for exactly three m1.small by RAM on one host, and for nothing on the other.
    handlers.register_host(RegisterHost("compute-a", vcpus=8, memory_mb=1536, disk_gb=100))
    handlers.register_host(RegisterHost("compute-b", vcpus=8, memory_mb=256, disk_gb=100))
    servers = [create(handlers, name=f"vm-{i}") for i in range(8)]
    for i in range(2):
        start_scheduler(durable=scheduler.DURABLE if shared_consumer else f"scheduler-{i}", own_bridge=True)
    done = eventually(
        lambda: (
            [settled(handlers, s) for s in servers] if all(settled(handlers, s) for s in servers) else None
        ),
        timeout=30,
    )

    placed = {
        s for s, inst in zip(servers, done, strict=True) if inst is not None and inst.host == "compute-a"
    }
    failed = [inst for inst in done if inst is not None and inst.vm_state == VmState.ERROR]
    assert len(placed) == 3 and len(failed) == 5
    assert all(inst.fault is not None and inst.fault["code"] == NoValidHost.code for inst in failed)
    host = handlers.host("compute-a")
    assert set(host.claims) == placed
    assert host.used() == Resources(3, 1536, 3)
    assert handlers.host("compute-b").claims == {}


def test_redelivery_changes_nothing(handlers: Handlers, start_scheduler: Callable[..., Worker]) -> None:
    handlers.register_host(RegisterHost("compute-a", vcpus=1, memory_mb=512, disk_gb=10))
    first = start_scheduler()
    placed = create(handlers, name="placed")
    failed = create(handlers, name="failed")
    eventually(lambda: settled(handlers, placed) and settled(handlers, failed))
    first.close()
    versions = {s: handlers.instance(s).version for s in (placed, failed)}
    host_version = handlers.host("compute-a").version

    # A scheduler that never acknowledged anything sees every request again, as after a crash.
    replay = start_scheduler(durable="scheduler-replay")
    marker = create(handlers, name="marker")
    eventually(lambda: settled(handlers, marker))  # the replay got past the earlier requests
    replay.close()
    assert {s: handlers.instance(s).version for s in (placed, failed)} == versions
    assert handlers.instance(placed).host == "compute-a"
    assert handlers.host("compute-a").version == host_version


def test_a_request_that_keeps_coming_back_becomes_a_fault(handlers: Handlers, app: Stratus) -> None:
    handlers.register_host(RegisterHost("compute-a", vcpus=4, memory_mb=2048, disk_gb=50))
    retry = RetryPolicy(delays=(0.1,), crash_allowance=2)
    placement = Scheduling(handlers.bus, HostView(), catch_up=lambda: None, retry=retry)
    server = create(handlers)
    assert placement.handle(server, attempt=retry.give_up_after + 1) == DONE
    inst = handlers.instance(server)
    assert inst.vm_state == VmState.ERROR
    assert inst.fault is not None and "Gave up after 5 deliveries" in inst.fault["details"]


def test_keeps_scheduling_across_a_nats_restart(own_nats_server: NatsServer) -> None:
    """The durable consumer survives a restart; the host view's ephemeral consumer is rebuilt."""
    s = unique_settings(own_nats_server.url)
    with NatsBridge(s.nats_urls, name="test-restart").start() as b:
        app = Stratus(Factory(bridge=b, settings=s))
        h = Handlers(app)
        h.create_flavor(CreateFlavor("small", "m1.small", vcpus=1, ram=512, disk=1))
        h.register_host(RegisterHost("compute-a", vcpus=4, memory_mb=512, disk_gb=50))
        worker = Worker(lambda stop: scheduler.run(s, bridge=b, app=app, stop=stop, poll=0.1))
        try:
            before = create(h, name="before")
            assert eventually(lambda: settled(h, before)).host == "compute-a"

            own_nats_server.restart(kill=True)
            h.register_host(RegisterHost("compute-b", vcpus=4, memory_mb=4096, disk_gb=50))
            after = create(h, name="after")
            assert eventually(lambda: settled(h, after), timeout=60).host == "compute-b"
        finally:
            worker.close()
