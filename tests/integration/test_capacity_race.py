"""Concurrent boots at a small cloud with several schedulers: no host is ever overcommitted.

Clients on their own NATS connections create servers at once while three schedulers (each with its
own connection, sharing the durable consumer as in production) place them. Afterwards every host's
usage is checked three ways: replaying the log event by event (usage after *every* claim within
capacity, not only at the end), the Host aggregates, and the read model in PostgreSQL.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from commands.app import Stratus
from commands.errors import NoValidHost
from commands.flavors.create import CreateFlavor
from commands.host import Host, Resources
from commands.hosts.register import RegisterHost
from commands.instance import Instance
from commands.servers.create import CreateServer
from commands.states import VmState
from stratus.config import Settings
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.projections import make_projector, read_models
from tests.fixtures.quotas import race
from tests.fixtures.scheduler import settled
from tests.fixtures.workers import Worker, eventually

HOSTS = {  # small hosts: (vcpus, memory_mb, disk_gb); CPU overcommit 4x, RAM and disk none
    "c1": (2, 4096, 40),
    "c2": (4, 3072, 40),
    "c3": (1, 8192, 20),
    "c4": (2, 2048, 80),
}
FLAVORS = {"s": (1, 512, 5), "m": (2, 1024, 10), "l": (4, 2048, 20)}


def test_concurrent_boots_with_several_schedulers_never_overcommit(
    app: Stratus,
    settings: Settings,
    database_url: str,
    start_scheduler: Callable[..., Worker],
) -> None:
    handlers = Handlers(app)
    for name, (vcpus, ram, disk) in FLAVORS.items():
        handlers.create_flavor(CreateFlavor(name, f"m1.{name}", vcpus=vcpus, ram=ram, disk=disk))
    for name, (vcpus, ram, disk) in HOSTS.items():
        handlers.register_host(RegisterHost(name, vcpus=vcpus, memory_mb=ram, disk_gb=disk))
    for _ in range(3):
        start_scheduler(own_bridge=True)

    rng = random.Random(4)
    wanted = [rng.choice(list(FLAVORS)) for _ in range(48)]

    def boot(h: Handlers, i: int) -> list[str]:
        ids: list[str] = []
        for j in range(4):  # 12 clients x 4 boots, spread over 6 projects (quota: 10 instances each)
            n = i * 4 + j
            cmd = CreateServer(f"vm-{n}", f"p{n % 6}", "u1", wanted[n])
            ids += h.create_server(cmd).ids
        return ids

    results = race(settings, 12, boot)
    assert not [r for r in results if isinstance(r, Exception)], results
    servers = [s for r in results for s in r]

    def all_settled() -> list[Instance] | None:
        found = [settled(handlers, s) for s in servers]
        return [i for i in found if i is not None] if all(found) else None

    done = eventually(all_settled, timeout=90)
    placed = [i for i in done if i.host is not None]
    failed = [i for i in done if i.vm_state == VmState.ERROR]
    assert len(placed) + len(failed) == len(servers)
    assert placed and failed, "the cloud should have filled up"
    assert all(i.fault is not None and i.fault["code"] == NoValidHost.code for i in failed)

    # 1. The log, event by event: usage after every claim is within capacity.
    hosts: dict[Any, Host] = {}
    for n in app.recorder.select_notifications(start=1, limit=100_000):
        event = app.mapper.to_domain_event(n)
        if isinstance(event, Host.Event):
            hosts[event.originator_id] = event.mutate(hosts.get(event.originator_id))  # type: ignore[arg-type,assignment]
            host = hosts[event.originator_id]
            assert min(vars(host.free()).values()) >= 0, (host.hostname, host.used(), host.capacity())
    # 2. The aggregates agree with the replay and with where the instances are.
    for host in hosts.values():
        current = handlers.host(host.hostname)
        assert current.claims == host.claims
        assert set(current.claims) == {i.server_id for i in placed if i.host == host.hostname}
        for server_id, claim in current.claims.items():
            flavor = next(i.flavor for i in placed if i.server_id == server_id)
            assert Resources(**claim) == Resources.of_flavor(flavor)
    # 3. The read model shows the same usage, never above capacity.
    with read_models(database_url) as conn:
        make_projector(app, conn).catch_up()
        rows = conn.execute(
            "SELECT hostname, vcpus_used, memory_mb_used, disk_gb_used,"
            " vcpus_free, memory_mb_free, disk_gb_free FROM stratus_rm.hosts"
        ).fetchall()
        claims = dict(
            conn.execute(
                "SELECT h.hostname, count(c.*) FROM stratus_rm.hosts h"
                " LEFT JOIN stratus_rm.host_claims c ON c.host_id = h.id GROUP BY h.hostname"
            ).fetchall()
        )
    assert len(rows) == len(HOSTS)
    for hostname, vcpus, ram, disk, *free in rows:
        used = handlers.host(hostname).used()
        assert (vcpus, ram, disk) == (used.vcpus, used.memory_mb, used.disk_gb)
        assert min(free) >= 0, (hostname, free)
        assert claims[hostname] == len(handlers.host(hostname).claims)
