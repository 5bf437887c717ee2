"""The hypervisor worker against a real JetStream and libvirt's test driver.

Spawn, delete, faults on permanent errors, retries of temporary ones, a spawn that loses a race
with a delete, and redelivery. Failures libvirt's test driver cannot produce are simulated by
drivers implementing our own port (``workers.virt.VirtDriver``) around the real libvirt driver.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import TypeVar

import libvirt
import pytest

from commands.app import Stratus
from commands.hosts.register import RegisterHost
from commands.servers.create import CreateServer
from commands.servers.delete import DeleteServer
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import StartSpawning
from commands.states import PowerState, TaskState, VmState
from stratus.config import Settings
from stratus.eventstore import JetStreamApplicationRecorder, NatsBridge
from tests.fixtures.commands import M1_SMALL
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.hypervisor import (
    FAST_RETRY,
    HOST,
    FlakyDriver,
    GatedDriver,
    Hosted,
    StuckDestroyDriver,
    create_and_place,
    gone,
    in_error,
    registered,
    settled,
)
from tests.fixtures.workers import Worker, eventually
from workers import hypervisor, scheduler
from workers.compute import DELETE_FAILED, SCHEDULED, SPAWN_FAILED, Compute
from workers.libvirt_driver import LibvirtDriver, domain_xml
from workers.outcome import DONE
from workers.virt import GuestSpec, VirtDriver

pytestmark = pytest.mark.flavors(M1_SMALL)

T = TypeVar("T")


# -- drivers implementing our port, to produce failures the test driver cannot -------------------


# -- fixtures -------------------------------------------------------------------------------------


def domain_uuids(conn: libvirt.virConnect) -> set[str]:
    return {d.UUIDString() for d in conn.listAllDomains()}


# -- tests ----------------------------------------------------------------------------------------
def test_registers_the_host_with_libvirts_inventory(
    handlers: Handlers, driver: LibvirtDriver, start_hypervisor: Callable[..., Worker]
) -> None:
    start_hypervisor(driver)
    eventually(lambda: registered(handlers, HOST))
    host = handlers.host(HOST)
    assert (host.vcpus, host.memory_mb, host.disk_gb, host.hypervisor_type) == (4, 8192, 100, "TEST")


def test_spawns_a_scheduled_instance(
    handlers: Handlers,
    driver: LibvirtDriver,
    conn: libvirt.virConnect,
    hosted: Hosted,
) -> None:
    server, _ = hosted(driver)
    inst = eventually(lambda: settled(handlers, server))
    assert (inst.vm_state, inst.task_state, inst.power_state) == (VmState.ACTIVE, None, PowerState.RUNNING)
    dom = conn.lookupByUUIDString(server)
    assert dom.name() == f"instance-{server}"
    assert dom.isActive()
    assert dom.info()[1] == 512 * 1024  # KiB
    assert driver.power_state(server) == PowerState.RUNNING


def test_records_causation_on_what_it_appends(
    recorder: JetStreamApplicationRecorder, active: tuple[str, Worker]
) -> None:
    server, _ = active
    envelopes = {e.type: e for e in recorder.read_envelopes(1, 100) if e.subject == server}
    started = envelopes["stratus.instance.spawningstarted"]
    assert started.causationid == envelopes["stratus.instance.scheduled"].id
    assert started.correlationid == envelopes["stratus.instance.scheduled"].correlationid
    assert started.actoruser == hypervisor.HYPERVISOR.user_id


def test_deletes_the_domain_and_releases_the_claim(
    handlers: Handlers, conn: libvirt.virConnect, active: tuple[str, Worker]
) -> None:
    server, _ = active
    handlers.delete_server(DeleteServer(server, "p1"))
    eventually(lambda: gone(handlers, server))
    assert server not in domain_uuids(conn)
    assert handlers.host(HOST).claims == {}


def test_ignores_instances_of_other_hosts(
    handlers: Handlers,
    driver: LibvirtDriver,
    conn: libvirt.virConnect,
    start_hypervisor: Callable[..., Worker],
) -> None:
    handlers.register_host(RegisterHost("compute-2", vcpus=4, memory_mb=4096, disk_gb=10))
    start_hypervisor(driver)
    elsewhere = create_and_place(handlers, host="compute-2", name="elsewhere")
    here = create_and_place(handlers, name="here")
    eventually(lambda: settled(handlers, here))  # messages are handled in order: `elsewhere` was seen
    inst = handlers.instance(elsewhere)
    assert (inst.vm_state, inst.task_state, inst.host) == (VmState.BUILDING, None, "compute-2")
    assert domain_uuids(conn) == {here}


def test_keeps_no_other_hosts_server_in_its_cache(
    handlers: Handlers, app: Stratus, driver: LibvirtDriver, start_hypervisor: Callable[..., Worker]
) -> None:
    """A deletion (or power action) elsewhere reaches every worker, which loads the server to learn
    its host; the server is then dropped from the cache, which keeps this host's servers rather than
    the cloud's churn (docs/performance.md, "Memory"). The worker shares the test's application."""
    handlers.register_host(RegisterHost("compute-2", vcpus=4, memory_mb=4096, disk_gb=10))
    start_hypervisor(driver)
    elsewhere = create_and_place(handlers, host="compute-2", name="elsewhere")
    here = create_and_place(handlers, name="here")
    eventually(lambda: settled(handlers, here))
    cache = app.repository.cache
    assert cache is not None
    handlers.delete_server(DeleteServer(elsewhere, "p1"))  # cached by the command, which appends to it
    eventually(lambda: uuid.UUID(elsewhere) not in cache.cache)  # the worker met it, and let it go


def test_a_permanent_error_records_a_fault_and_releases_the_claim(
    handlers: Handlers,
    driver: LibvirtDriver,
    conn: libvirt.virConnect,
    start_hypervisor: Callable[..., Worker],
) -> None:
    start_hypervisor(driver)
    eventually(lambda: registered(handlers, HOST))
    server = handlers.create_server(CreateServer("clash", "p1", "u1", "small")).id
    # Another domain already holds the name this instance's domain must have.
    squatter = GuestSpec(uuid=str(uuid.uuid4()), vcpus=1, memory_mb=128)
    conn.defineXML(domain_xml(squatter).replace(squatter.name, f"instance-{server}"))
    handlers.place_instance(PlaceInstance(server, HOST))

    inst = eventually(lambda: settled(handlers, server))
    assert (inst.vm_state, inst.task_state) == (VmState.ERROR, None)
    assert inst.fault is not None
    assert inst.fault["code"] == SPAWN_FAILED
    assert "already exists" in inst.fault["message"]
    assert "permanent" in inst.fault["details"]
    assert handlers.host(HOST).claims == {}
    assert server not in domain_uuids(conn)


def test_a_temporary_error_is_retried(
    handlers: Handlers,
    driver: LibvirtDriver,
    conn: libvirt.virConnect,
    hosted: Hosted,
) -> None:
    flaky = FlakyDriver(driver, failures=2)
    server, _ = hosted(flaky)
    inst = eventually(lambda: settled(handlers, server))
    assert (inst.vm_state, inst.power_state) == (VmState.ACTIVE, PowerState.RUNNING)
    assert flaky.spawn_calls == 3
    assert conn.lookupByUUIDString(server).isActive()


def test_a_temporary_error_that_outlasts_the_retries_records_a_fault(
    handlers: Handlers, driver: LibvirtDriver, hosted: Hosted
) -> None:
    flaky = FlakyDriver(driver, failures=1000)
    server, _ = hosted(flaky)
    inst = eventually(lambda: settled(handlers, server))
    assert inst.vm_state == VmState.ERROR
    assert inst.fault is not None and inst.fault["code"] == SPAWN_FAILED
    assert "out of retries" in inst.fault["details"]
    assert flaky.spawn_calls == FAST_RETRY.attempts
    assert handlers.host(HOST).claims == {}


def test_a_spawn_that_loses_a_race_with_a_delete_finishes_as_a_delete(
    handlers: Handlers,
    driver: LibvirtDriver,
    conn: libvirt.virConnect,
    hosted: Hosted,
) -> None:
    gated = GatedDriver(driver)
    server, _ = hosted(gated)
    assert gated.spawning.wait(15)
    assert server in domain_uuids(conn)  # the guest runs, the worker has not recorded it yet
    handlers.delete_server(DeleteServer(server, "p1"))
    assert handlers.instance(server).task_state == TaskState.DELETING
    gated.gate.set()

    eventually(lambda: gone(handlers, server))
    assert server not in domain_uuids(conn)
    assert handlers.host(HOST).claims == {}


def test_a_failed_teardown_records_a_fault(handlers: Handlers, driver: LibvirtDriver, hosted: Hosted) -> None:
    server, _ = hosted(StuckDestroyDriver(driver, failures=0))
    eventually(lambda: settled(handlers, server))
    handlers.delete_server(DeleteServer(server, "p1"))
    inst = eventually(lambda: in_error(handlers, server))
    assert inst.fault is not None and inst.fault["code"] == DELETE_FAILED
    assert inst.task_state is None  # the user may delete it again


def test_redelivered_events_change_nothing(
    handlers: Handlers, conn: libvirt.virConnect, app: Stratus, compute_steps: Compute
) -> None:
    """Each step checks the instance's state first, so handling an event twice is harmless."""
    server = create_and_place(handlers)

    assert compute_steps.handle(SCHEDULED, server, attempt=1) == DONE
    spawned = handlers.instance(server)
    assert spawned.vm_state == VmState.ACTIVE
    assert compute_steps.handle(SCHEDULED, server, attempt=2) == DONE
    assert handlers.instance(server).version == spawned.version

    handlers.delete_server(DeleteServer(server, "p1"))
    assert compute_steps.handle("deletionrequested", server, attempt=1) == DONE
    assert gone(handlers, server) and server not in domain_uuids(conn)
    position = app.recorder.max_notification_id()
    assert compute_steps.handle("deletionrequested", server, attempt=2) == DONE
    assert compute_steps.handle(SCHEDULED, server, attempt=3) == DONE
    assert app.recorder.max_notification_id() == position


def test_a_crash_mid_spawn_is_completed_on_redelivery(
    handlers: Handlers, conn: libvirt.virConnect, compute_steps: Compute
) -> None:
    """SpawningStarted recorded and the domain defined, then the worker died: the replay finishes."""
    server = create_and_place(handlers)
    handlers.start_spawning(StartSpawning(server, HOST))
    conn.defineXML(domain_xml(compute_steps.guest(handlers.instance(server))))

    assert compute_steps.handle(SCHEDULED, server, attempt=2) == DONE
    inst = handlers.instance(server)
    assert (inst.vm_state, inst.power_state) == (VmState.ACTIVE, PowerState.RUNNING)
    assert conn.lookupByUUIDString(server).isActive()


def test_scheduler_and_hypervisor_together(
    bridge: NatsBridge,
    settings: Settings,
    app: Stratus,
    handlers: Handlers,
    driver: LibvirtDriver,
    conn: libvirt.virConnect,
    start_hypervisor: Callable[..., Worker],
) -> None:
    start_hypervisor(driver)
    sched = Worker(lambda stop: scheduler.run(settings, bridge=bridge, app=app, stop=stop, poll=0.1))
    try:
        eventually(lambda: registered(handlers, HOST))
        servers = [handlers.create_server(CreateServer(f"vm-{i}", "p1", "u1", "small")).id for i in range(3)]
        for s in servers:
            inst = eventually(lambda s=s: settled(handlers, s))  # type: ignore[misc]
            assert (inst.vm_state, inst.host, inst.power_state) == (VmState.ACTIVE, HOST, PowerState.RUNNING)
        assert set(servers) <= domain_uuids(conn)
        for s in servers:
            handlers.delete_server(DeleteServer(s, "p1"))
        for s in servers:
            eventually(lambda s=s: gone(handlers, s))  # type: ignore[misc]
        assert domain_uuids(conn).isdisjoint(servers)
        assert handlers.host(HOST).claims == {}
    finally:
        sched.close()


def test_a_message_that_keeps_coming_back_becomes_a_fault(handlers: Handlers, compute_steps: Compute) -> None:
    """Past our own retries plus a few crashes, a delivery is poison: no instance waits forever."""
    server = create_and_place(handlers)
    handlers.start_spawning(StartSpawning(server, HOST))  # then the worker died, again and again

    assert compute_steps.handle(SCHEDULED, server, attempt=FAST_RETRY.give_up_after + 1) == DONE
    inst = handlers.instance(server)
    assert inst.vm_state == VmState.ERROR
    assert inst.fault is not None and inst.fault["code"] == SPAWN_FAILED
    assert "gave up after" in inst.fault["message"]
    assert handlers.host(HOST).claims == {}


class BarrierDriver:
    """Each spawn waits until ``parties`` spawns are under way at once (a serial worker never gets there)."""

    def __init__(self, inner: VirtDriver, parties: int) -> None:
        self.inner = inner
        self.barrier = threading.Barrier(parties, timeout=10)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def spawn(self, guest: GuestSpec) -> int:
        self.barrier.wait()
        return self.inner.spawn(guest)


def test_a_host_boots_several_servers_at_once(
    handlers: Handlers, driver: LibvirtDriver, start_hypervisor: Callable[..., Worker]
) -> None:
    """Nova's max_concurrent_builds: a slow boot does not hold up the host's other servers."""
    start_hypervisor(BarrierDriver(driver, parties=3))
    servers = [create_and_place(handlers, name=f"vm-{i}") for i in range(3)]
    for s in servers:
        inst = eventually(lambda s=s: settled(handlers, s))  # type: ignore[misc]
        assert inst.vm_state == VmState.ACTIVE, inst.fault
