# ruff: noqa: F811  (the fixtures of test_hypervisor are imported, then requested by name)
"""``kill -9`` of the hypervisor worker in the middle of a spawn or a delete, then a restart: the step
completes at once (the restarted worker recovers what its host left under way, without waiting for
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

from commands.handlers import DeleteServer, Handlers
from commands.states import PowerState, TaskState, VmState
from stratus.config import Settings
from tests.test_hypervisor import (  # noqa: F401  (fixtures)
    HOST,
    HOST_XML,
    Worker,
    app,
    conn,
    create_and_place,
    driver,
    eventually,
    gone,
    handlers,
    settled,
    start_hypervisor,
)
from workers.libvirt_driver import LibvirtDriver

ROOT = Path(__file__).resolve().parent.parent


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
            [sys.executable, "-m", "tests.hypervisor_child", mode, str(flag)],
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
