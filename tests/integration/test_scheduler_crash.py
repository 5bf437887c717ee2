"""``kill -9`` of a scheduler process while it places a backlog in batches, then another scheduler:
every request is placed exactly once, no host holds a claim twice or a claim without its server, and
no server is left waiting (real JetStream, a real ``stratus scheduler`` process)."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import orjson
import pytest

from commands.app import Stratus
from commands.flavors.create import CreateFlavor
from commands.host import Resources
from commands.hosts.register import RegisterHost
from commands.servers.create import CreateServer
from commands.states import TaskState, VmState
from stratus.config import Settings
from stratus.eventstore import Factory, NatsBridge
from stratus.eventstore.envelope import decode_message
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.operations import Operations
from tests.fixtures.workers import Worker, eventually
from workers import scheduler

ROOT = Path(__file__).resolve().parents[2]
SERVERS = 300


@pytest.mark.timeout(120)
def test_a_scheduler_killed_mid_backlog_loses_and_doubles_nothing(
    bridge: NatsBridge, settings: Settings, recorder: object, tmp_path: Path
) -> None:
    app = Stratus(Factory(bridge=bridge, settings=settings))
    h = Handlers(app)
    h.create_flavor(CreateFlavor("small", "m1.small", vcpus=1, ram=512, disk=1))
    Operations(app).set_quota("p1", {"instances": -1, "cores": -1, "ram": -1}, {})
    hosts = [f"compute-{i}" for i in range(20)]
    for name in hosts:
        h.register_host(RegisterHost(name, vcpus=16, memory_mb=16384, disk_gb=100))  # room for all
    servers = [h.create_server(CreateServer(f"vm-{i}", "p1", "u1", "small")).id for i in range(SERVERS)]

    # small batches, so that the kill finds some placed and some not; a short ack wait for the rescue
    quick = dataclasses.replace(settings, scheduler_ack_wait_seconds=2, scheduler_batch=10)
    env = {**os.environ, **quick.to_env()}
    with (tmp_path / "scheduler.log").open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "processes.cli", "scheduler"], cwd=ROOT, env=env, stdout=out, stderr=out
        )
    try:
        eventually(lambda: h.instance(servers[0]).host, timeout=60)
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # mid-backlog: some batches appended, others taken, not settled
        proc.wait()
    waiting = sum(1 for s in servers if h.instance(s).task_state == TaskState.SCHEDULING)
    assert 0 < waiting < SERVERS  # cut mid-backlog

    def rescue(stop: threading.Event) -> None:
        scheduler.run(settings, bridge=bridge, app=Stratus(Factory(bridge=bridge, settings=settings)),
                      stop=stop, poll=0.1, ack_wait=2)  # fmt: skip

    worker = Worker(rescue)
    try:
        done = eventually(
            lambda: (
                [h.instance(s) for s in servers]
                if all(h.instance(s).task_state != TaskState.SCHEDULING for s in servers)
                else None
            ),
            timeout=60,
        )
    finally:
        worker.close()

    assert all(inst.vm_state == VmState.BUILDING and inst.host in hosts for inst in done), waiting
    claims: Counter[str] = Counter()
    for msg in app.recorder.read_messages(1, 100_000):  # type: ignore[attr-defined]
        _, envelope = decode_message(msg)
        if envelope.type.endswith(".instanceclaimed"):
            claims[orjson.loads(envelope.data)["instance_id"]] += 1
    assert set(claims) == set(servers) and set(claims.values()) == {1}  # each placed exactly once
    held = {name: h.host(name) for name in hosts}
    assert sorted(s for host in held.values() for s in host.claims) == sorted(servers)
    for inst in done:
        assert inst.server_id in held[str(inst.host)].claims  # the claim is on the host it was placed on
    used = [host.used() for host in held.values()]
    total = Resources(*(sum(getattr(u, f) for u in used) for f in ("vcpus", "memory_mb", "disk_gb")))
    assert total == Resources(SERVERS, SERVERS * 512, SERVERS)
