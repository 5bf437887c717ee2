"""The per-aggregate heads each part's event store keeps are bounded by its aggregate cache setting,
and a hypervisor worker keeps no other host's servers (real JetStream).

The recorder remembers the last sequence seen of every aggregate it appends to or reads; at its old
bound (100,000) the API and the hypervisor worker grew with every server they met, and the worker's
aggregate cache filled with the servers of every power action in the cloud (docs/performance.md,
"Memory")."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

import orjson
import pytest
from eventsourcing.persistence import StoredEvent

import processes.hypervisor
import processes.scheduler
import processes.simulator
from commands.app import Stratus
from commands.flavors.create import CreateFlavor
from commands.hosts.register import RegisterHost
from commands.instance import Instance
from commands.servers.create import CreateServer
from commands.servers.scheduling import PlaceInstance
from commands.unit_of_work import UnitOfWork
from stratus.config import Settings, recorder_heads
from stratus.eventstore import Factory, NatsBridge
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.roots import EVENT_STORES, EventStore

TOPIC = "commands.instance:Instance.Created"


def created(n: int) -> list[StoredEvent]:
    body = orjson.dumps({"timestamp": "2026-01-02T03:04:05.123456Z"})
    return [StoredEvent(uuid4(), 1, TOPIC, body) for _ in range(n)]


def with_setting(settings: Settings, variable: str, value: str) -> Settings:
    return Settings.from_env({**settings.to_env(), variable: value})


@pytest.mark.parametrize(("part", "root", "variable"), EVENT_STORES, ids=[r[0] for r in EVENT_STORES])
def test_a_part_keeps_the_heads_its_cache_setting_sizes(
    part: str, root: EventStore, variable: str, bridge: NatsBridge, settings: Settings, recorder: Any
) -> None:
    s = with_setting(settings, variable, "600")
    kept = recorder_heads(600)
    assert kept == 1200, part
    log = root(bridge, s).application_recorder()
    events = created(kept + 50)
    for i in range(0, len(events), 500):  # within JetStream's atomic batch
        log.insert_events(events[i : i + 500])
    assert [log.known_version(e.originator_id) for e in events[:50]] == [None] * 50  # the oldest: gone
    assert [log.known_version(e.originator_id) for e in events[50:]] == [1] * kept


def test_an_append_after_its_head_was_let_go_still_lands(
    bridge: NatsBridge, settings: Settings, recorder: Any
) -> None:
    log = processes.hypervisor.factory(bridge, settings).application_recorder()
    first, *others = created(recorder_heads(settings.hypervisor_aggregate_cache) + 1)
    log.insert_events([first])
    log.insert_events(others)
    assert log.known_version(first.originator_id) is None
    body = orjson.dumps({"timestamp": "2026-01-02T03:04:06.123456Z"})
    log.insert_events([StoredEvent(first.originator_id, 2, "commands.instance:Instance.Renamed", body)])
    assert [e.originator_version for e in log.select_events(first.originator_id)] == [1, 2]


def test_a_small_cache_setting_still_keeps_the_floor() -> None:
    assert recorder_heads(0) == recorder_heads(10) == 1000
    assert recorder_heads(Settings().api_aggregate_cache) == 2000


def test_another_hosts_server_leaves_the_cache(bridge: NatsBridge, settings: Settings, recorder: Any) -> None:
    """What the hypervisor worker does after each step (``workers.hypervisor``): a server loaded to
    learn its host is dropped from the cache unless it is on this host."""
    app = Stratus(Factory(bridge=bridge, settings=settings), cache_size=100)
    handlers = Handlers(app)
    handlers.create_flavor(CreateFlavor("small", "m1.small", vcpus=1, ram=512, disk=1))
    for host in ("here", "there"):
        handlers.register_host(RegisterHost(host, vcpus=8, memory_mb=8192, disk_gb=50))
    placed = {}
    for host in ("here", "there"):
        server = handlers.create_server(CreateServer(f"on-{host}", "p1", "u1", "small")).id
        handlers.place_instance(PlaceInstance(server, host))
        placed[host] = server
    uow = UnitOfWork(app)
    cache = app.repository.cache
    assert cache is not None
    for host, server in placed.items():
        instance = uow.find(Instance, UUID(server))
        assert instance is not None and instance.host == host
        uow.forget_if(instance.id, lambda agg: isinstance(agg, Instance) and agg.host != "here")
    kept = {str(k) for k in cache.cache}
    assert placed["here"] in kept and placed["there"] not in kept
