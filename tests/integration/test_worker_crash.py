"""``kill -9`` of the hypervisor worker in the middle of a spawn, a delete or a resize, then a restart:
the step completes at once (the restarted worker recovers what its host left under way, without waiting for
JetStream's two-minute redelivery), and nothing stays in a transitional task state."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import libvirt
import pytest

from commands.flavors.create import CreateFlavor
from commands.servers.delete import DeleteServer
from commands.servers.moves import ResizeDecision, ResizeServer
from commands.states import PowerState, TaskState, VmState
from stratus.config import Settings
from stratus.eventstore import NatsBridge
from tests.fixtures.commands import M1_SMALL
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.migration import MigrationHandlers
from tests.fixtures.hypervisor import (
    HOST,
    HOST_XML,
    OTHER,
    SMALL,
    create_and_place,
    gone,
    guest,
    settled,
    verify_resize,
)
from tests.fixtures.workers import Worker, eventually
from workers import scheduler
from workers.consumer import DurableConsumer
from workers.hypervisor import ACK_WAIT, durable_name, subjects
from workers.libvirt_driver import LibvirtDriver

pytestmark = pytest.mark.flavors(M1_SMALL)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def child(
    settings: Settings, tmp_path: Path
) -> Iterator[Callable[[str], tuple[subprocess.Popen[bytes], Path]]]:
    procs: list[subprocess.Popen[bytes]] = []
    host_xml = tmp_path / "child-host.xml"
    host_xml.write_text(HOST_XML)

    def start(mode: str) -> tuple[subprocess.Popen[bytes], Path]:
        flag = tmp_path / f"hanging-{mode}"
        env = {
            **os.environ,
            **settings.to_env(),
            "STRATUS_HOST_NAME": HOST,
            "STRATUS_LIBVIRT_URI": f"test://{host_xml}",
            "STRATUS_DATA_DIR": str(tmp_path / "child-data"),
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.hypervisor_child", mode, str(flag)],
            cwd=ROOT,
            env=env,
            stdout=(tmp_path / f"child-{mode}.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        procs.append(proc)
        return proc, flag

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def kill_when_hanging(proc: subprocess.Popen[bytes], flag: Path) -> None:
    eventually(lambda: flag.exists() or proc.poll() is not None, timeout=30)
    assert proc.poll() is None, "the worker exited instead of hanging"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def test_a_spawn_cut_by_kill_9_completes_after_restart(
    handlers: Handlers,
    driver: LibvirtDriver,
    conn: libvirt.virConnect,
    start_hypervisor: Callable[..., Worker],
    child: Callable[[str], tuple[subprocess.Popen[bytes], Path]],
) -> None:
    proc, flag = child("spawn")
    server = create_and_place(handlers)
    kill_when_hanging(proc, flag)
    inst = handlers.instance(server)
    assert (inst.vm_state, inst.task_state) == (VmState.BUILDING, TaskState.SPAWNING)  # cut mid-step

    start_hypervisor(driver)  # the restart (its hypervisor: a fresh test-driver connection)
    inst = eventually(lambda: settled(handlers, server), timeout=20)  # well before the 120 s ack wait
    assert (inst.vm_state, inst.task_state, inst.power_state) == (VmState.ACTIVE, None, PowerState.RUNNING)
    assert conn.lookupByUUIDString(server).isActive()


def test_a_delete_cut_by_kill_9_completes_after_restart(
    handlers: Handlers,
    driver: LibvirtDriver,
    conn: libvirt.virConnect,
    start_hypervisor: Callable[..., Worker],
    child: Callable[[str], tuple[subprocess.Popen[bytes], Path]],
) -> None:
    proc, flag = child("destroy")
    server = create_and_place(handlers)
    eventually(lambda: settled(handlers, server), timeout=30)
    handlers.delete_server(DeleteServer(server, "p1"))
    kill_when_hanging(proc, flag)
    assert handlers.instance(server).task_state == TaskState.DELETING  # cut mid-step

    start_hypervisor(driver)
    eventually(lambda: gone(handlers, server), timeout=20)
    assert server not in {d.UUIDString() for d in conn.listAllDomains()}
    assert handlers.host(HOST).claims == {}


def test_a_resize_cut_by_kill_9_on_its_source_completes_after_restart(
    bridge: NatsBridge,
    settings: Settings,
    handlers: Handlers,
    driver: LibvirtDriver,
    conn: libvirt.virConnect,
    conn2: libvirt.virConnect,
    tmp_path: Path,
    start_hypervisor: Callable[..., Worker],
    child: Callable[[str], tuple[subprocess.Popen[bytes], Path]],
) -> None:
    """The source is killed while it removes the guest: after the restart the move goes on from
    there (the source's step runs again, the destination starts the guest), and the claims end
    where they belong: the destination's for the instance, the source's held by the migration."""
    proc, flag = child("destroy")  # spawns; hangs at the first guest removal (the resize's)
    server = create_and_place(handlers)
    eventually(lambda: settled(handlers, server), timeout=30)
    handlers.create_flavor(CreateFlavor("medium", "m1.medium", vcpus=2, ram=1024, disk=1))
    start_hypervisor(LibvirtDriver(lambda: conn2, instances_path=tmp_path / "d2"), OTHER)
    sched = Worker(lambda stop: scheduler.run(settings, bridge=bridge, app=handlers.app, stop=stop, poll=0.1))
    try:
        MigrationHandlers(handlers).resize(ResizeServer(server, "p1", "medium"))
        kill_when_hanging(proc, flag)
        inst = handlers.instance(server)
        assert (inst.task_state, inst.host) == (TaskState.RESIZE_MIGRATING, HOST)  # cut mid-step

        start_hypervisor(driver)  # the source again (a fresh test-driver connection)
        inst = eventually(lambda: verify_resize(handlers, server), timeout=20)  # well before the ack wait
        assert (inst.host, inst.task_state, inst.power_state) == (OTHER, None, PowerState.RUNNING)
        assert guest(conn2, server) == (libvirt.VIR_DOMAIN_RUNNING, 2, 1024)
        move_id = (inst.migration or {})["id"]
        assert handlers.host(HOST).claims == {move_id: SMALL}
        assert set(handlers.host(OTHER).claims) == {server}
        MigrationHandlers(handlers).confirm(ResizeDecision(server, "p1"))
        assert handlers.host(HOST).claims == {}
    finally:
        sched.close()


def test_a_placement_received_by_a_worker_killed_before_it_began_the_spawn_completes_after_restart(
    handlers: Handlers,
    driver: LibvirtDriver,
    conn: libvirt.virConnect,
    bridge: NatsBridge,
    settings: Settings,
    start_hypervisor: Callable[..., Worker],
) -> None:
    # The fault campaign's case (docs/reliability.md): the worker took the `Scheduled` message and
    # died before appending `SpawningStarted`, so the server is BUILDING with no task state, its
    # message unacknowledged for the two-minute ack wait.
    start_hypervisor(driver).close()  # registers the host and makes its durable consumer
    server = create_and_place(handlers)
    dead = DurableConsumer(
        bridge, stream=settings.stream, durable=durable_name(HOST), filter_subjects=subjects(settings),
        ack_wait=ACK_WAIT,
    ).open()  # fmt: skip
    taken = eventually(lambda: dead.fetch(10, 1.0), timeout=20)  # received, never acknowledged
    assert server in {str(m.headers.get("ce-subject")) for m in taken if m.headers}
    dead.close()
    inst = handlers.instance(server)
    assert (inst.vm_state, inst.task_state) == (VmState.BUILDING, None)

    start_hypervisor(driver)  # the restart
    inst = eventually(lambda: settled(handlers, server), timeout=20)  # well before the 120 s ack wait
    assert (inst.vm_state, inst.task_state, inst.power_state) == (VmState.ACTIVE, None, PowerState.RUNNING)
    assert conn.lookupByUUIDString(server).isActive()
