"""Resize and cold migration end to end below the API: the scheduler and two hypervisor workers,
each on its own libvirt test-driver connection, on a real JetStream.

The move is placed by the scheduler, the source's claim is held by the migration until confirm or
revert, libvirt's view agrees with the log at each end, the quota follows the flavor, and nothing
is left claimed or defined on either host whatever way the move ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import libvirt
import pytest

from commands.app import Stratus
from commands.errors import InstanceLocked, InvalidInput, InvalidState, QuotaExceeded
from commands.flavors.create import CreateFlavor
from commands.instance import Instance
from commands.quota import ProjectQuota
from commands.servers.actions import LockServer, RequestAction
from commands.servers.delete import DeleteServer
from commands.servers.moves import MigrateServer, ResizeDecision, ResizeServer
from commands.states import PowerState, TaskState, VmState
from stratus.config import Settings
from stratus.eventstore import NatsBridge
from tests.fixtures.commands import M1_SMALL
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.lifecycle import LifecycleHandlers
from tests.fixtures.facades.migration import MigrationHandlers
from tests.fixtures.hypervisor import (
    HOST,
    OTHER,
    SMALL,
    create_and_place,
    gone,
    guest,
    registered,
    settled,
    verify_resize,
)
from tests.fixtures.workers import Worker, eventually
from workers import scheduler
from workers.libvirt_driver import LibvirtDriver
from workers.migration import MIGRATION_FAILED
from workers.virt import GuestSpec, PermanentVirtError

pytestmark = pytest.mark.flavors(M1_SMALL)

MEDIUM = {"vcpus": 2, "memory_mb": 1024, "disk_gb": 1}


@dataclass
class Cloud:
    handlers: Handlers
    moves: MigrationHandlers
    source: libvirt.virConnect
    dest: libvirt.virConnect
    server: str


@pytest.fixture
def start_cloud(
    bridge: NatsBridge,
    settings: Settings,
    app: Stratus,
    handlers: Handlers,
    conn: libvirt.virConnect,
    conn2: libvirt.virConnect,
    driver: LibvirtDriver,
    tmp_path: Path,
    start_hypervisor: Callable[..., Worker],
) -> Iterator[Callable[..., Cloud]]:
    """Two hosts and the scheduler; a server ACTIVE on the first (``dest_driver``: the second's)."""
    workers: list[Worker] = []

    def start(dest_driver: object = None) -> Cloud:
        handlers.create_flavor(CreateFlavor("medium", "m1.medium", vcpus=2, ram=1024, disk=1))
        handlers.create_flavor(CreateFlavor("huge", "m1.huge", vcpus=2, ram=16384, disk=1))
        start_hypervisor(driver)
        start_hypervisor(dest_driver or LibvirtDriver(lambda: conn2, instances_path=tmp_path / "d2"), OTHER)
        server = create_and_place(handlers)
        eventually(lambda: settled(handlers, server))
        eventually(lambda: registered(handlers, OTHER))
        workers.append(
            Worker(lambda stop: scheduler.run(settings, bridge=bridge, app=app, stop=stop, poll=0.1))
        )
        return Cloud(handlers, MigrationHandlers(handlers), conn, conn2, server)

    yield start
    for w in workers:
        w.close()


def idle(handlers: Handlers, server: str) -> Instance | None:
    inst = handlers.instance(server)
    return inst if inst.task_state is None and inst.migration is None else None


def claims(handlers: Handlers, host: str) -> dict[str, dict[str, int]]:
    return handlers.host(host).claims


def holding(handlers: Handlers, server: str) -> dict[str, int]:
    return handlers.usage("p1").holdings[server]


def test_a_resize_moves_the_server_and_confirm_frees_the_source(start_cloud: Callable[..., Cloud]) -> None:
    c = start_cloud()
    h, server = c.handlers, c.server
    c.moves.resize(ResizeServer(server, "p1", "medium"))
    assert h.instance(server).task_state == TaskState.RESIZE_PREP
    assert holding(h, server) == {"cores": 2, "ram": 1024}  # the larger flavor, held from the request

    inst = eventually(lambda: verify_resize(h, server))
    move = inst.migration or {}
    assert (inst.host, inst.task_state, inst.power_state) == (OTHER, None, PowerState.RUNNING)
    assert inst.flavor["id"] == "medium"
    assert guest(c.dest, server) == (libvirt.VIR_DOMAIN_RUNNING, 2, 1024)
    assert guest(c.source, server) is None
    assert claims(h, OTHER) == {server: MEDIUM}
    assert claims(h, HOST) == {move["id"]: SMALL}  # the migration holds the source until confirm

    c.moves.confirm(ResizeDecision(server, "p1"))
    inst = h.instance(server)
    assert (inst.vm_state, inst.task_state, inst.migration) == (VmState.ACTIVE, None, None)
    assert claims(h, HOST) == {}
    assert claims(h, OTHER) == {server: MEDIUM}
    assert holding(h, server) == {"cores": 2, "ram": 1024}


def test_a_revert_brings_the_server_back_with_its_old_flavor(start_cloud: Callable[..., Cloud]) -> None:
    c = start_cloud()
    h, server = c.handlers, c.server
    c.moves.resize(ResizeServer(server, "p1", "medium"))
    eventually(lambda: verify_resize(h, server))

    c.moves.revert(ResizeDecision(server, "p1"))
    inst = eventually(lambda: idle(h, server))
    assert (inst.vm_state, inst.host, inst.power_state) == (VmState.ACTIVE, HOST, PowerState.RUNNING)
    assert inst.flavor["id"] == "small"
    assert guest(c.source, server) == (libvirt.VIR_DOMAIN_RUNNING, 1, 512)
    assert guest(c.dest, server) is None
    assert claims(h, HOST) == {server: SMALL}
    assert claims(h, OTHER) == {}
    assert holding(h, server) == {"cores": 1, "ram": 512}


def test_a_stopped_server_migrates_stopped_and_stays_stopped(start_cloud: Callable[..., Cloud]) -> None:
    c = start_cloud()
    h, server = c.handlers, c.server
    LifecycleHandlers(h).request_action(RequestAction(server, "p1", "stop"))
    eventually(lambda: idle(h, server) if h.instance(server).vm_state == VmState.STOPPED else None)

    c.moves.migrate(MigrateServer(server))
    inst = eventually(lambda: verify_resize(h, server))
    assert (inst.host, inst.power_state, inst.flavor["id"]) == (OTHER, PowerState.SHUTDOWN, "small")
    assert guest(c.dest, server) == (libvirt.VIR_DOMAIN_SHUTOFF, 1, 512)
    c.moves.confirm(ResizeDecision(server, None, admin=True))
    assert h.instance(server).vm_state == VmState.STOPPED


def test_no_host_with_room_leaves_the_server_where_it_was_with_a_fault(
    start_cloud: Callable[..., Cloud],
) -> None:
    c = start_cloud()
    h, server = c.handlers, c.server
    c.moves.resize(ResizeServer(server, "p1", "huge"))
    inst = eventually(lambda: idle(h, server))
    assert (inst.vm_state, inst.host, inst.flavor["id"]) == (VmState.ACTIVE, HOST, "small")
    assert inst.fault is not None and inst.fault["message"].startswith("No valid host was found.")
    assert "short of memory_mb" in inst.fault["details"]  # the source itself was never a candidate
    assert claims(h, HOST) == {server: SMALL}
    assert claims(h, OTHER) == {}
    assert holding(h, server) == {"cores": 1, "ram": 512}
    assert guest(c.source, server) == (libvirt.VIR_DOMAIN_RUNNING, 1, 512)


def test_a_resize_is_refused_at_once_when_it_cannot_be_done(start_cloud: Callable[..., Cloud]) -> None:
    c = start_cloud()
    h, server = c.handlers, c.server
    with pytest.raises(InvalidInput, match="When resizing, instances must change flavor!"):
        c.moves.resize(ResizeServer(server, "p1", "small"))
    with pytest.raises(InvalidState, match=r"Cannot 'confirmResize' instance .* vm_state active"):
        c.moves.confirm(ResizeDecision(server, "p1"))
    with pytest.raises(InvalidState, match="Cannot 'revertResize' instance"):
        c.moves.revert(ResizeDecision(server, "p1"))
    with pytest.raises(InvalidInput, match="can't be the same one"):
        c.moves.migrate(MigrateServer(server, HOST))
    LifecycleHandlers(h).lock(LockServer(server, None, admin=True))
    with pytest.raises(InstanceLocked):
        c.moves.resize(ResizeServer(server, "p1", "medium"))
    assert h.instance(server).task_state is None  # nothing was recorded


def test_an_upsize_over_quota_is_refused_at_once(start_cloud: Callable[..., Cloud], app: Stratus) -> None:
    c = start_cloud()
    h, server = c.handlers, c.server
    quota = ProjectQuota(project_id="p1")  # type: ignore[call-arg]
    quota.set_limits({"cores": 1}, h.usage("p1").used())
    app.save(quota)
    with pytest.raises(QuotaExceeded, match="Quota exceeded for cores"):
        c.moves.resize(ResizeServer(server, "p1", "medium"))
    assert (h.instance(server).task_state, holding(h, server)) == (None, {"cores": 1, "ram": 512})


def test_deleting_a_resized_server_frees_both_hosts(start_cloud: Callable[..., Cloud]) -> None:
    c = start_cloud()
    h, server = c.handlers, c.server
    c.moves.resize(ResizeServer(server, "p1", "medium"))
    eventually(lambda: verify_resize(h, server))
    h.delete_server(DeleteServer(server, "p1"))
    eventually(lambda: gone(h, server))
    assert (claims(h, HOST), claims(h, OTHER)) == ({}, {})
    assert guest(c.dest, server) is None and guest(c.source, server) is None
    assert server not in h.usage("p1").holdings


class BrokenSpawn:
    """The destination's hypervisor: every spawn fails for good."""

    def __init__(self, inner: LibvirtDriver) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def spawn(self, guest: GuestSpec) -> int:
        raise PermanentVirtError("internal error: no room for the guest's memory", code=1)


def test_a_failure_on_the_destination_returns_the_server_to_its_source_in_error(
    start_cloud: Callable[..., Cloud], conn2: libvirt.virConnect, tmp_path: Path
) -> None:
    c = start_cloud(BrokenSpawn(LibvirtDriver(lambda: conn2, instances_path=tmp_path / "d2")))
    h, server = c.handlers, c.server
    c.moves.resize(ResizeServer(server, "p1", "medium"))
    inst = eventually(lambda: idle(h, server))
    assert (inst.vm_state, inst.host, inst.flavor["id"]) == (VmState.ERROR, HOST, "small")
    assert inst.fault is not None and inst.fault["code"] == MIGRATION_FAILED
    assert "no room for the guest's memory" in inst.fault["message"]
    assert claims(h, HOST) == {server: SMALL} and claims(h, OTHER) == {}
    assert guest(c.dest, server) is None
    assert holding(h, server) == {"cores": 1, "ram": 512}
