"""The host simulator: hundreds of hypervisor hosts in one process, each on its own libvirt test
driver connection, driven by the real scheduler through the real JetStream."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import libvirt
import pytest

from commands.app import Stratus
from commands.bus import bootstrap
from commands.errors import NotFound
from commands.flavors.create import CreateFlavor
from commands.servers.actions import RequestAction
from commands.servers.create import CreateServer
from commands.servers.delete import DeleteServer
from commands.servers.moves import ResizeDecision, ResizeServer
from commands.states import VmState
from processes.cli import _parser as build_parser
from stratus import hostrpc
from stratus.config import Settings
from stratus.eventstore import NatsBridge
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.lifecycle import LifecycleHandlers
from tests.fixtures.facades.migration import MigrationHandlers
from tests.fixtures.hypervisor import registered
from tests.fixtures.processes import ROOT
from tests.fixtures.workers import Worker, eventually
from workers import simulator
from workers.simulator import HostShape, SimulatedCloud, host_names

HOSTS = 300
SHAPE = HostShape(vcpus=4, memory_mb=8192, disk_gb=100)


@pytest.fixture
def cloud(app: Stratus, settings: Settings, bridge: NatsBridge, tmp_path: Path) -> Iterator[SimulatedCloud]:
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    c = SimulatedCloud(bootstrap(app), tmp_path / "sim", host_names(HOSTS), SHAPE)
    stop = threading.Event()
    worker = threading.Thread(
        target=simulator.run,
        args=(settings, c),
        kwargs={"bridge": bridge, "stop": stop, "poll": 0.1},
        daemon=True,
    )
    worker.start()
    yield c
    stop.set()
    worker.join(30)
    assert not worker.is_alive()
    c.close()


def test_hundreds_of_simulated_hosts_boot_and_delete_servers(
    app: Stratus,
    cloud: SimulatedCloud,
    start_scheduler: Callable[..., Worker],
    tmp_path: Path,
) -> None:
    h = Handlers(app)
    eventually(lambda: all(registered(h, n) for n in ("sim-00001", f"sim-{HOSTS:05d}")), timeout=60)
    host = h.host("sim-00150")
    assert (host.vcpus, host.memory_mb, host.disk_gb, host.hypervisor_type) == (4, 8192, 100, "TEST")

    h.create_flavor(CreateFlavor("big", "m1.big", vcpus=2, ram=6144, disk=10))  # one per host by RAM
    start_scheduler()
    servers = [
        s for i in range(4) for s in h.create_server(CreateServer("vm", f"p{i}", "u", "big", count=8)).ids
    ]

    def active() -> list[str] | None:
        insts = [h.instance(s) for s in servers]
        return [i.host or "" for i in insts] if all(i.vm_state == VmState.ACTIVE for i in insts) else None

    hosts = eventually(active, timeout=90)
    assert len(set(hosts)) == len(servers)  # spread: one per host, as RAM allows
    placed = dict(zip(servers, hosts, strict=True))
    # the domain runs on its host's own libvirt connection, and only there
    first = servers[0]
    conn = cloud.hosts[placed[first]].compute._driver._connection()  # type: ignore[attr-defined]
    assert conn.lookupByUUIDString(first).isActive()
    # the test driver runs nothing: no console log is configured, and no directory made for one
    assert "<log " not in conn.lookupByUUIDString(first).XMLDesc() and "console.log" not in (
        conn.lookupByUUIDString(first).XMLDesc()
    )
    assert not (tmp_path / "sim" / placed[first] / first).exists()

    for s in servers[:5]:
        h.delete_server(DeleteServer(s, None))
    eventually(lambda: all(_gone(h, s) for s in servers[:5]), timeout=60)
    assert all(h.host(placed[s]).claims == {} for s in servers[:5])
    with pytest.raises(libvirt.libvirtError):
        conn.lookupByUUIDString(first)


def test_simulated_hosts_carry_out_actions_and_moves(
    app: Stratus,
    bridge: NatsBridge,
    cloud: SimulatedCloud,
    start_scheduler: Callable[..., Worker],
) -> None:
    """A simulated host is a whole host: a stop, a resize and its confirm end as on a real one,
    never left waiting for a worker that does not listen."""
    h = Handlers(app)
    eventually(lambda: registered(h, f"sim-{HOSTS:05d}"), timeout=60)
    h.create_flavor(CreateFlavor("one", "m1.one", vcpus=1, ram=1024, disk=10))
    h.create_flavor(CreateFlavor("two", "m1.two", vcpus=2, ram=2048, disk=10))
    start_scheduler()
    server = h.create_server(CreateServer("vm", "p1", "u", "one")).id
    eventually(lambda: h.instance(server).vm_state == VmState.ACTIVE, timeout=30)
    source = h.instance(server).host
    # its console, as the API asks a host for it (os-getConsoleOutput), is a simulated boot log
    output = hostrpc.ask(bridge, str(source), hostrpc.CONSOLE, {"server_id": server, "length": 2})["output"]
    assert output.split("\n") == [f"Welcome to a simulated guest ({server})", "login: "]
    with pytest.raises(hostrpc.HostRefused):
        hostrpc.ask(bridge, str(source), hostrpc.CONSOLE, {"server_id": str(uuid.uuid4())})

    LifecycleHandlers(h).request_action(RequestAction(server, "p1", "stop"))
    eventually(
        lambda: (h.instance(server).vm_state, h.instance(server).task_state) == (VmState.STOPPED, None)
    )
    moves = MigrationHandlers(h)
    moves.resize(ResizeServer(server, "p1", "two"))
    inst = eventually(lambda: h.instance(server) if h.instance(server).vm_state == VmState.RESIZED else None)
    assert inst.host != source and inst.flavor["id"] == "two" and inst.task_state is None
    moves.confirm(ResizeDecision(server, "p1"))
    assert h.instance(server).vm_state == VmState.STOPPED and h.host(str(source)).claims == {}


def _gone(h: Handlers, server_id: str) -> bool:
    try:
        h.instance(server_id)
    except NotFound:
        return True
    return False


def test_the_cli_has_a_simulate_command() -> None:
    args = build_parser().parse_args(["simulate", "--hosts", "1000", "--vcpus", "64", "--threads", "4"])
    assert (args.command, args.hosts, args.vcpus, args.memory_mb, args.threads) == (
        "simulate",
        1000,
        64,
        131072,
        4,
    )


def test_stratus_simulate_runs_hosts_of_the_size_asked(
    app: Stratus,
    settings: Settings,
    tmp_path: Path,
) -> None:
    env = {**os.environ, **dataclasses.replace(settings, data_dir=tmp_path).to_env(), "PYTHONPATH": str(ROOT)}
    argv = [
        sys.executable,
        "-m",
        "processes.cli",
        "simulate",
        "--hosts",
        "2",
        "--vcpus",
        "8",
        "--prefix",
        "cli",
    ]
    log = tmp_path / "simulate.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        handlers = Handlers(app)

        def registered() -> bool:
            assert proc.poll() is None, log.read_text()
            try:
                return all(handlers.host(name).vcpus == 8 for name in host_names(2, "cli"))
            except NotFound:
                return False

        eventually(registered, timeout=30)
    finally:
        proc.terminate()
        proc.wait(20)
    assert proc.returncode in (0, -15), log.read_text()
