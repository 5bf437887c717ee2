"""Aggregates kept between commands (eventsourcing's cache, fast-forwarded from the log), and the
first decision on a cached copy of an aggregate the command appends to (real JetStream)."""

from __future__ import annotations

import pytest

from commands.app import Stratus
from commands.errors import InvalidState
from commands.flavors.create import CreateFlavor
from commands.hosts.register import RegisterHost
from commands.servers.create import CreateServer
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import FinishSpawning, StartSpawning
from commands.states import VmState
from stratus.config import Settings
from stratus.eventstore import Factory, NatsBridge
from tests.fixtures.facades.handlers import Handlers


@pytest.fixture
def two(bridge: NatsBridge, settings: Settings, recorder: object) -> tuple[Handlers, Handlers]:
    """Two processes' handlers on one log (each its own application: its own cache and heads)."""
    first, second = (Handlers(Stratus(Factory(bridge=bridge, settings=settings))) for _ in range(2))
    first.create_flavor(CreateFlavor("small", "m1.small", vcpus=1, ram=512, disk=1))
    first.register_host(RegisterHost("compute-a", vcpus=4, memory_mb=2048, disk_gb=50))
    return first, second


def scheduled(handlers: Handlers) -> str:
    server = handlers.create_server(CreateServer("vm", "p1", "u1", "small")).id
    handlers.place_instance(PlaceInstance(server, "compute-a"))
    return server


def test_a_cached_aggregate_that_moved_on_elsewhere_is_read_again(two: tuple[Handlers, Handlers]) -> None:
    here, elsewhere = two
    server = scheduled(here)
    assert here.instance(server).task_state is None  # cached here: scheduled, not spawning yet
    elsewhere.start_spawning(StartSpawning(server, "compute-a"))  # another process moves it on

    # A decision on the cached copy would refuse (not spawning); the command decides again on the log.
    here.finish_spawning(FinishSpawning(server, power_state=1))
    inst = elsewhere.instance(server)
    assert inst.vm_state == VmState.ACTIVE and inst.version == 4


def test_a_stale_cached_copy_never_appends(two: tuple[Handlers, Handlers]) -> None:
    here, elsewhere = two
    server = scheduled(here)
    here.instance(server)
    elsewhere.start_spawning(StartSpawning(server, "compute-a"))
    with pytest.raises(InvalidState, match="task_state spawning"):  # refused on the log's state
        here.start_spawning(StartSpawning(server, "compute-a"))  # the same step again, on a stale copy
    inst = elsewhere.instance(server)
    assert inst.version == 3  # requested, scheduled, spawning started: once


def test_a_create_reads_what_it_decides_on_in_one_hop(
    two: tuple[Handlers, Handlers], bridge: NatsBridge
) -> None:
    """A create whose flavor and usage this process has seen hands the bridge's loop one prefetch of
    everything it loads (flavor, usage, the project's and the default class's limits, known by their
    versions, so the snapshot store is not asked again) and the append: no hop per load."""
    here, _ = two
    for name in ("first", "second"):  # the second finds the project's usage epoch and caches it
        here.create_server(CreateServer(name, "p1", "u1", "small"))
    hops = bridge.hops
    here.create_server(CreateServer("third", "p1", "u1", "small"))
    assert bridge.hops - hops == 2  # 8 when each load made its own hop, 4 before limits were cached
