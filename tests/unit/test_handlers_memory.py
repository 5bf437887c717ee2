"""Command handlers on the in-memory event log: the domain's use cases, decided and appended as in
production, with no NATS and no PostgreSQL (``stratus.eventstore.memory``).

Each use of the handler API is one small helper below, so that the tests read as scenarios and the
helpers are all that follows the handlers when their API changes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent

from commands.app import Stratus
from commands.errors import InsufficientResources, QuotaExceeded
from commands.flavors.create import CreateFlavor
from commands.hosts.register import RegisterHost
from commands.instance import Instance
from commands.servers.create import CreateServer
from commands.servers.delete import DeleteServer, FinishDeletion
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import FinishSpawning, StartSpawning
from commands.states import VmState
from stratus.eventstore.memory import InMemoryFactory, InMemoryRecorder
from tests.fixtures.facades.handlers import Handlers

PROJECT, USER = "p1", "u1"


class Interleaving(InMemoryRecorder):
    """The log, where another writer's command can be cued to land just before this log's next
    append: a lost race, on cue instead of by chance."""

    def __init__(self) -> None:
        super().__init__()
        self.before_next_append: Callable[[], Any] | None = None

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        cue, self.before_next_append = self.before_next_append, None
        if cue is not None:
            cue()
        return super().insert_events(stored_events, **kwargs)


@pytest.fixture
def log() -> Interleaving:
    return Interleaving()


@pytest.fixture
def handlers(log: Interleaving) -> Handlers:
    return process(log)


def process(log: InMemoryRecorder) -> Handlers:
    """One process's handlers on ``log`` (its own application: its own aggregate cache)."""
    return Handlers(Stratus(InMemoryFactory(recorder=log)))


# -- the handler API, one helper per operation ---------------------------------------------------
def create_flavor(h: Handlers, flavorid: str = "small", vcpus: int = 1, ram: int = 512) -> int:
    return h.create_flavor(CreateFlavor(flavorid, f"m1.{flavorid}", vcpus=vcpus, ram=ram, disk=1)).position


def register_host(h: Handlers, hostname: str = "compute-a", vcpus: int = 4) -> str:
    return h.register_host(RegisterHost(hostname, vcpus=vcpus, memory_mb=4096, disk_gb=50)).id


def create_server(h: Handlers, flavor: str = "small", name: str = "vm") -> str:
    return h.create_server(CreateServer(name, PROJECT, USER, flavor)).id


def place(h: Handlers, server_id: str, hostname: str = "compute-a") -> int:
    return h.place_instance(PlaceInstance(server_id, hostname)).position


def spawn(h: Handlers, server_id: str, hostname: str = "compute-a") -> None:
    h.start_spawning(StartSpawning(server_id, hostname))
    h.finish_spawning(FinishSpawning(server_id, power_state=1))


def delete(h: Handlers, server_id: str) -> None:
    h.delete_server(DeleteServer(server_id, PROJECT))


def finish_deletion(h: Handlers, server_id: str) -> None:
    h.finish_deletion(FinishDeletion(server_id))


def server(h: Handlers, server_id: str) -> Instance:
    return h.instance(server_id, deleted_too=True)


def host_vcpus_used(h: Handlers, hostname: str = "compute-a") -> int:
    return h.host(hostname).used().vcpus


def cores_used(h: Handlers) -> int:
    return h.usage(PROJECT).used().get("cores", 0)


# -- scenarios -----------------------------------------------------------------------------------
def test_a_flavor_is_created_once(handlers: Handlers, log: InMemoryRecorder) -> None:
    position = create_flavor(handlers)
    assert position == log.max_notification_id() == 1
    assert handlers.flavor("small").vcpus == 1


def test_registering_a_host_again_changes_nothing(handlers: Handlers, log: InMemoryRecorder) -> None:
    first = register_host(handlers)
    head = log.max_notification_id()
    assert register_host(handlers) == first
    assert log.max_notification_id() == head
    assert handlers.host("compute-a").vcpus == 4


def test_a_server_is_created_scheduled_spawned_and_deleted(handlers: Handlers) -> None:
    create_flavor(handlers, vcpus=2)
    register_host(handlers)
    sid = create_server(handlers)
    assert server(handlers, sid).vm_state == VmState.BUILDING
    assert cores_used(handlers) == 2  # charged to the project when requested

    place(handlers, sid)
    assert server(handlers, sid).host == "compute-a"
    assert host_vcpus_used(handlers) == 2

    spawn(handlers, sid)
    assert server(handlers, sid).vm_state == VmState.ACTIVE

    delete(handlers, sid)
    assert host_vcpus_used(handlers) == 2  # held until the host has torn the guest down
    finish_deletion(handlers, sid)
    assert server(handlers, sid).vm_state == VmState.DELETED
    assert host_vcpus_used(handlers) == 0
    assert cores_used(handlers) == 0


def test_a_server_over_the_projects_quota_is_refused_and_nothing_is_appended(
    handlers: Handlers, log: InMemoryRecorder
) -> None:
    create_flavor(handlers, "huge", vcpus=32)  # Nova's default quota: 20 cores
    head = log.max_notification_id()
    with pytest.raises(QuotaExceeded, match="cores"):
        create_server(handlers, "huge")
    assert log.max_notification_id() == head
    assert cores_used(handlers) == 0


def test_a_command_that_loses_a_race_decides_again_on_the_winners_state(log: Interleaving) -> None:
    here, elsewhere = process(log), process(log)
    create_flavor(here)
    register_host(here)
    first, second = create_server(here, name="a"), create_server(here, name="b")

    # Another process places its server on the host between this one's load and append: this
    # append conflicts on the host's version, and the placement is decided again on the new host.
    log.before_next_append = lambda: place(elsewhere, second)
    place(here, first)

    assert log.before_next_append is None  # the other writer did land first
    assert {server(here, first).host, server(here, second).host} == {"compute-a"}
    assert set(here.host("compute-a").claims) == {first, second}


def test_a_race_lost_to_a_writer_that_took_the_last_room_is_refused_on_the_retry(log: Interleaving) -> None:
    here, elsewhere = process(log), process(log)
    create_flavor(here, ram=3000)
    register_host(here)  # 4096 MB: room for one of them
    first, second = create_server(here, name="a"), create_server(here, name="b")

    log.before_next_append = lambda: place(elsewhere, second)
    with pytest.raises(InsufficientResources):
        place(here, first)
    assert server(here, first).host is None
    assert set(here.host("compute-a").claims) == {second}
