"""Reconciliation against libvirt's test driver: guests that stopped, crashed or vanished behind
Stratus's back, and stray guests (orphans of deleted instances are destroyed, unknown ones kept)."""

from __future__ import annotations

import dataclasses
import threading
import uuid
from pathlib import Path

import libvirt
import pytest

from commands.census import DESTROYED, LEFT_ALONE, GuestCensus, census_id
from commands.servers.actions import RequestAction
from commands.servers.delete import DeleteServer
from commands.states import PowerState, VmState
from tests.fixtures.commands import M1_SMALL
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.lifecycle import LifecycleHandlers
from tests.fixtures.hypervisor import HOST, HOST_XML, Hosted, gone, settled
from tests.fixtures.workers import Worker, eventually
from workers.hypervisor import HYPERVISOR
from workers.libvirt_driver import EventLoop, LibvirtDriver, domain_xml
from workers.reconcile import Reconciler, run_periodically
from workers.virt import DomainInfo, DomainNotFound, GuestSpec

pytestmark = pytest.mark.flavors(M1_SMALL)


def census(handlers: Handlers) -> GuestCensus:
    agg: object = handlers.app.repository.get(census_id(HOST))
    assert isinstance(agg, GuestCensus)
    return agg


def test_a_guest_that_stopped_on_its_own_is_recorded_shutoff(
    handlers: Handlers, driver: LibvirtDriver, conn: libvirt.virConnect, active: tuple[str, Worker]
) -> None:
    server, _ = active
    reconciler = Reconciler(handlers.bus, driver, HOST)
    assert reconciler.once() == 0  # nothing to say: no event
    version = handlers.instance(server).version
    conn.lookupByUUIDString(server).destroy()  # the guest powered off behind our back
    # This reconciler records it, unless the host's own worker did first: woken by libvirt's
    # lifecycle event where this process runs an event loop (an earlier test's), it reconciles at
    # once. Either way it is recorded, and once.
    if reconciler.once() == 0:  # the worker was first
        eventually(lambda: handlers.instance(server).version == version + 1)
    inst = handlers.instance(server)
    assert (inst.vm_state, inst.power_state, inst.task_state) == (VmState.STOPPED, PowerState.SHUTDOWN, None)
    assert reconciler.once() == 0 and handlers.instance(server).version == version + 1  # recorded once
    # SHUTOFF now, so the user may start it again through the usual action.
    LifecycleHandlers(handlers).request_action(RequestAction(server, "p1", "start"))
    eventually(lambda: handlers.instance(server).task_state is None)
    inst = handlers.instance(server)
    assert inst.vm_state == VmState.ACTIVE and conn.lookupByUUIDString(server).isActive()


class ListedMidSpawn(LibvirtDriver):
    """A listing taken while a spawn was between ``defineXML`` and ``create``: every guest it shows
    is shut off, whatever libvirt says a moment later."""

    def list_domains(self) -> list[DomainInfo]:
        return [dataclasses.replace(d, power_state=PowerState.SHUTDOWN) for d in super().list_domains()]


def test_a_listing_older_than_the_server_it_is_compared_with_records_nothing(
    handlers: Handlers, conn: libvirt.virConnect, active: tuple[str, Worker]
) -> None:
    server, _ = active
    version = handlers.instance(server).version
    stale = ListedMidSpawn(lambda: conn, instances_path=Path("/nonexistent"))
    assert Reconciler(handlers.bus, stale, HOST).once() == 0  # the guest runs now: nothing to record
    inst = handlers.instance(server)
    assert (inst.vm_state, inst.power_state, inst.version) == (VmState.ACTIVE, PowerState.RUNNING, version)


def test_a_guest_that_vanished_puts_its_server_in_error(
    handlers: Handlers, driver: LibvirtDriver, conn: libvirt.virConnect, active: tuple[str, Worker]
) -> None:
    server, _ = active
    dom = conn.lookupByUUIDString(server)
    dom.destroy()
    dom.undefine()
    reconciler = Reconciler(handlers.bus, driver, HOST)
    # This reconciler records it, unless the host's own worker did first (woken by libvirt's
    # lifecycle events, as in the first test; seen under load): either way it is recorded.
    reconciler.once()

    def in_error() -> bool:
        inst = handlers.instance(server)
        return (inst.vm_state, inst.power_state) == (VmState.ERROR, PowerState.NOSTATE)

    eventually(in_error)
    assert reconciler.once() == 0  # recorded: nothing more to say
    handlers.delete_server(DeleteServer(server, "p1"))
    eventually(lambda: gone(handlers, server))


def test_strays_orphans_are_destroyed_and_unknown_guests_left_alone(
    handlers: Handlers, driver: LibvirtDriver, conn: libvirt.virConnect, active: tuple[str, Worker]
) -> None:
    server, worker = active
    handlers.delete_server(DeleteServer(server, "p1"))
    eventually(lambda: gone(handlers, server))
    # The host's own worker stops: its reconciler, woken by libvirt's lifecycle events where this
    # process runs an event loop, would otherwise see the guests below one at a time.
    worker.close()
    # The teardown "never happened": the guest is back, its instance deleted in the log.
    orphan = conn.defineXML(domain_xml(GuestSpec(server, 1, 128)))
    orphan.create()
    unknown = str(uuid.uuid4())
    conn.defineXML(domain_xml(GuestSpec(unknown, 1, 128))).create()
    reconciler = Reconciler(handlers.bus, driver, HOST)
    assert reconciler.once() == 2
    assert census(handlers).strays == {server: DESTROYED, unknown: LEFT_ALONE}
    assert {d.UUIDString() for d in conn.listAllDomains()} == {unknown}
    version = census(handlers).version
    assert reconciler.once() == 0 or census(handlers).strays == {unknown: LEFT_ALONE}
    assert reconciler.once() == 0 and census(handlers).version <= version + 1  # a quiet host: no events
    conn.lookupByUUIDString(unknown).destroy()
    conn.lookupByUUIDString(unknown).undefine()
    reconciler.once()
    assert census(handlers).strays == {}


def test_a_lifecycle_event_triggers_reconciliation_at_once(
    handlers: Handlers, hosted: Hosted, tmp_path: Path
) -> None:
    EventLoop.start()  # before the connection opens, as the worker's main does
    host_xml = tmp_path / "events-host.xml"
    host_xml.write_text(HOST_XML)
    events_conn = libvirt.open(f"test://{host_xml}")
    try:
        server, _ = hosted(LibvirtDriver(lambda: events_conn, instances_path=tmp_path))
        eventually(lambda: settled(handlers, server))
        events_conn.lookupByUUIDString(server).destroy()  # it "crashed"
        # Well within the 30 s period: the STOPPED event woke the reconciliation.
        eventually(lambda: handlers.instance(server).vm_state == VmState.STOPPED, timeout=8)
    finally:
        events_conn.close()


class FailsOnce:
    """A reconciler whose first pass fails with an error that is not temporary."""

    def __init__(self, inner: Reconciler) -> None:
        self.inner = inner
        self.hostname = inner.hostname
        self.passes = 0

    def once(self) -> None:
        self.passes += 1
        if self.passes == 1:
            raise DomainNotFound("list domains: Domain not found (removed while listed)", 42)
        self.inner.once()


def test_a_failed_pass_never_stops_the_hosts_reconciliation(
    handlers: Handlers, driver: LibvirtDriver, conn: libvirt.virConnect, active: tuple[str, Worker]
) -> None:
    server, _ = active
    reconciler = FailsOnce(Reconciler(handlers.bus, driver, HOST))
    stop, wake = threading.Event(), threading.Event()
    thread = run_periodically(reconciler, stop, 0.05, HYPERVISOR, wake)  # type: ignore[arg-type]
    try:
        eventually(lambda: reconciler.passes >= 3)  # the passes after the failed one ran
        assert thread.is_alive()
        conn.lookupByUUIDString(server).destroy()  # and they still do their work
        eventually(lambda: handlers.instance(server).vm_state == VmState.STOPPED)
    finally:
        stop.set()
        wake.set()
        thread.join(timeout=5)
