"""The scheduler honours the operator's switches, against the real JetStream and scheduler worker:
disabled and forced-down compute services, availability zones from host aggregates, and server
groups' (anti-)affinity, which the placement's atomic append checks again under the group's
optimistic concurrency. Creating a server checks private flavors' access lists.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from commands.errors import GroupPolicyViolated, InvalidInput, NotFound, QuotaExceeded
from commands.flavors.create import CreateFlavor
from commands.hosts.aggregates import CreateHostAggregate
from commands.hosts.register import RegisterHost
from commands.hosts.services import SetServiceStatus
from commands.servers.create import CreateServer
from commands.servers.delete import DeleteServer, FinishDeletion
from commands.servers.groups import CreateServerGroup
from commands.servers.moves import FailMigration, MigrateServer
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import FinishSpawning, StartSpawning
from commands.states import PowerState, VmState
from tests.fixtures.commands import M1_HUGE, M1_SMALL
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.migration import MigrationHandlers
from tests.fixtures.facades.operations import Operations
from tests.fixtures.scheduler import settled
from tests.fixtures.workers import Worker, eventually
from workers.host_selection import NO_VALID_HOST

pytestmark = pytest.mark.flavors(M1_SMALL, M1_HUGE)


@pytest.fixture
def ops(handlers: Handlers) -> Operations:
    return Operations(handlers.app)


def hosts(handlers: Handlers, *names: str) -> None:
    """Hosts with less RAM the later they come: the scheduler prefers the first one."""
    for i, name in enumerate(names):
        handlers.register_host(RegisterHost(name, vcpus=8, memory_mb=8192 - 1024 * i, disk_gb=100))


def server(handlers: Handlers, zone: str | None = None, group: str | None = None) -> str:
    cmd = CreateServer("vm", "p1", "u1", "small", availability_zone=zone, group=group)
    return handlers.create_server(cmd).id


def placed(handlers: Handlers, server_id: str) -> tuple[str, str | None]:
    inst = eventually(lambda: settled(handlers, server_id))
    return inst.vm_state, inst.host


def test_disabled_and_forced_down_hosts_get_nothing(
    handlers: Handlers, ops: Operations, start_scheduler: Callable[..., Worker]
) -> None:
    hosts(handlers, "a", "b", "c")
    ops.set_service_status(SetServiceStatus("a", "nova-compute", disabled=True, disabled_reason="repair"))
    ops.set_service_status(SetServiceStatus("b", "nova-compute", forced_down=True))
    start_scheduler()
    assert placed(handlers, server(handlers)) == (VmState.BUILDING, "c")

    ops.set_service_status(SetServiceStatus("c", "nova-compute", disabled=True))
    failed = server(handlers)
    assert placed(handlers, failed) == (VmState.ERROR, None)
    fault = handlers.instance(failed).fault
    assert fault is not None and fault["message"] == NO_VALID_HOST
    assert "no enabled compute host" in fault["details"]

    ops.set_service_status(SetServiceStatus("a", "nova-compute", disabled=False))
    assert placed(handlers, server(handlers)) == (VmState.BUILDING, "a")
    with pytest.raises(NotFound):
        ops.set_service_status(SetServiceStatus("a", "nova-scheduler", disabled=True))


def test_availability_zones_pick_the_hosts(
    handlers: Handlers, ops: Operations, start_scheduler: Callable[..., Worker]
) -> None:
    hosts(handlers, "a", "b", "c")
    rack = ops.create_host_aggregate(CreateHostAggregate("rack", "az1")).id
    ops.add_host_to_aggregate(rack, "c")
    start_scheduler()
    assert placed(handlers, server(handlers, zone="az1")) == (VmState.BUILDING, "c")
    assert placed(handlers, server(handlers, zone="nova")) == (VmState.BUILDING, "a")

    ops.remove_host_from_aggregate(rack, "c")  # c is back in "nova", az1 has no host left
    failed = server(handlers, zone="az1")
    assert placed(handlers, failed) == (VmState.ERROR, None)
    fault = handlers.instance(failed).fault
    assert fault is not None and "in availability zone az1" in fault["details"]


def test_anti_affinity_spreads_and_runs_out(
    handlers: Handlers, ops: Operations, start_scheduler: Callable[..., Worker]
) -> None:
    hosts(handlers, "a", "b")
    group = ops.create_server_group(CreateServerGroup("web", "p1", "u1", "anti-affinity")).id
    start_scheduler()
    first = server(handlers, group=group)
    second = server(handlers, group=group)
    first_host = placed(handlers, first)[1]
    assert {first_host, placed(handlers, second)[1]} == {"a", "b"}
    third = server(handlers, group=group)
    assert placed(handlers, third) == (VmState.ERROR, None)
    assert sorted(ops.server_group(group, "p1").members) == sorted([first, second, third])

    # deleting a member frees its host for the group
    handlers.delete_server(DeleteServer(first, "p1"))
    handlers.finish_deletion(FinishDeletion(first))
    assert first not in ops.server_group(group, "p1").members
    fourth = server(handlers, group=group)
    assert placed(handlers, fourth) == (VmState.BUILDING, first_host)


def test_affinity_keeps_members_together(
    handlers: Handlers, ops: Operations, start_scheduler: Callable[..., Worker]
) -> None:
    hosts(handlers, "a", "b")
    group = ops.create_server_group(CreateServerGroup("db", "p1", "u1", "affinity")).id
    first = server(handlers, group=group)
    handlers.place_instance(PlaceInstance(first, "b"))  # b, although the scheduler would pick a
    start_scheduler()
    assert placed(handlers, server(handlers, group=group)) == (VmState.BUILDING, "b")


def test_the_placement_append_enforces_the_hard_policy(handlers: Handlers, ops: Operations) -> None:
    """Two schedulers with a stale view cannot both break the policy: the group refuses the second."""
    hosts(handlers, "a", "b")
    group = ops.create_server_group(CreateServerGroup("web", "p1", "u1", "anti-affinity")).id
    first, second = server(handlers, group=group), server(handlers, group=group)
    handlers.place_instance(PlaceInstance(first, "a"))
    with pytest.raises(GroupPolicyViolated):
        handlers.place_instance(PlaceInstance(second, "a"))
    assert handlers.host("a").claims.keys() == {first}
    handlers.place_instance(PlaceInstance(second, "b"))
    assert ops.server_group(group, "p1").members == {first: "a", second: "b"}


def test_group_membership_checks(handlers: Handlers, ops: Operations) -> None:
    group = ops.create_server_group(CreateServerGroup("web", "p1", "u1", "affinity")).id
    with pytest.raises(NotFound):  # another project's group
        handlers.create_server(CreateServer("vm", "p2", "u2", "small", group=group))
    with pytest.raises(NotFound):
        handlers.create_server(CreateServer("vm", "p1", "u1", "small", group="not-a-uuid"))
    ops.set_quota("p1", {"server_group_members": 1}, {})
    server(handlers, group=group)
    with pytest.raises(QuotaExceeded, match="server_group_members"):
        server(handlers, group=group)


def test_private_flavors_need_access(handlers: Handlers, ops: Operations) -> None:
    handlers.create_flavor(CreateFlavor("priv", "m1.private", vcpus=1, ram=256, disk=1, is_public=False))
    with pytest.raises(NotFound, match="Flavor priv could not be found"):
        handlers.create_server(CreateServer("vm", "p1", "u1", "priv"))
    handlers.create_server(CreateServer("vm", "p2", "u2", "priv", any_flavor=True))  # an admin
    ops.add_flavor_access("priv", "p1")
    handlers.create_server(CreateServer("vm", "p1", "u1", "priv"))


def test_a_move_keeps_the_groups_policy_and_returns_to_it_on_failure(
    handlers: Handlers, ops: Operations, start_scheduler: Callable[..., Worker]
) -> None:
    """A member of an anti-affinity group migrates only where no other member is; the group records
    it there, and back on its source when the move fails."""
    hosts(handlers, "a", "b", "c")
    group = ops.create_server_group(CreateServerGroup("web", "p1", "u1", "anti-affinity")).id
    first, second = server(handlers, group=group), server(handlers, group=group)
    for member, host in ((first, "a"), (second, "b")):
        handlers.place_instance(PlaceInstance(member, host))
        handlers.start_spawning(StartSpawning(member, host))
        handlers.finish_spawning(FinishSpawning(member, PowerState.RUNNING))
    moves = MigrationHandlers(handlers)
    start_scheduler()
    moves.migrate(MigrateServer(first))
    moving = eventually(
        lambda: handlers.instance(first) if handlers.instance(first).task_state != "resize_prep" else None
    )
    assert (moving.migration or {})["dest"] == "c"  # not b: the other member is there
    assert ops.server_group(group, "p1").members[first] == "c"

    moves.fail(FailMigration(first, "compute.migration_failed", "the destination failed", broken=True))
    assert ops.server_group(group, "p1").members[first] == "a"
    moves.migrate(MigrateServer(second))
    moving = eventually(
        lambda: handlers.instance(second) if handlers.instance(second).task_state != "resize_prep" else None
    )
    assert (moving.migration or {})["dest"] == "c"  # a holds the first member again


def test_anti_affinity_with_max_server_per_host(handlers: Handlers, ops: Operations) -> None:
    """2.64's rule: an anti-affinity group lets up to ``max_server_per_host`` members share a host."""
    hosts(handlers, "a", "b")
    rules = {"max_server_per_host": 2}
    group = ops.create_server_group(CreateServerGroup("web", "p1", "u1", "anti-affinity", rules)).id
    first, second, third = (server(handlers, group=group) for _ in range(3))
    handlers.place_instance(PlaceInstance(first, "a"))
    handlers.place_instance(PlaceInstance(second, "a"))
    with pytest.raises(GroupPolicyViolated):
        handlers.place_instance(PlaceInstance(third, "a"))
    handlers.place_instance(PlaceInstance(third, "b"))
    assert ops.server_group(group, "p1").rules == rules


def test_a_requested_host_is_the_only_candidate(
    handlers: Handlers, start_scheduler: Callable[..., Worker]
) -> None:
    """2.74 (create) and 2.91 (unshelve): an admin names the host; the scheduler places there
    (the first host would win otherwise), or nowhere."""
    hosts(handlers, "a", "b")
    start_scheduler()
    wanted = handlers.create_server(CreateServer("vm", "p1", "u1", "small", requested_host="b")).id
    assert placed(handlers, wanted) == (VmState.BUILDING, "b")
    anywhere = server(handlers)
    assert placed(handlers, anywhere) == (VmState.BUILDING, "a")
    with pytest.raises(InvalidInput):
        handlers.create_server(CreateServer("vm", "p1", "u1", "small", requested_host="nowhere"))
