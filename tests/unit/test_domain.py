"""The aggregates on their own: Nova's guards and state transitions, and host capacity.

Pure domain objects, no persistence involved: these are the rules the handlers rely on.
"""

from __future__ import annotations

import pytest

from commands.errors import InsufficientResources, InvalidInput, InvalidState, NotFound
from commands.flavor import Flavor
from commands.host import Host, Resources
from commands.instance import Instance
from commands.states import PowerState, api_status
from tests.fixtures.commands import requested


def new_instance() -> Instance:
    flavor = {"id": "1", "name": "t", "vcpus": 2, "ram": 1024, "disk": 10, "ephemeral": 0, "swap": 0}
    return requested("vm", "p", flavor)


def test_instance_lifecycle_follows_nova_states() -> None:
    inst = new_instance()
    assert (inst.vm_state, inst.task_state, api_status(inst.vm_state, inst.task_state)) == (
        "building",
        "scheduling",
        "BUILD",
    )
    inst.schedule("h1")
    inst.start_spawning("h1")
    assert inst.task_state == "spawning"
    inst.finish_spawning(PowerState.RUNNING)
    assert (inst.vm_state, inst.task_state, inst.power_state) == ("active", None, 1)
    assert api_status(inst.vm_state, inst.task_state) == "ACTIVE"
    assert inst.request_delete() is True
    assert inst.request_delete() is False  # a retried delete records nothing new
    inst.mark_deleted()
    assert inst.deleted
    with pytest.raises(NotFound):
        inst.request_delete()
    names = [type(e).__name__ for e in inst.collect_events()]
    assert names == [
        "Requested",
        "Scheduled",
        "SpawningStarted",
        "Spawned",
        "DeletionRequested",
        "Deleted",
    ]


def test_illegal_transitions_are_refused() -> None:
    inst = new_instance()
    with pytest.raises(InvalidState):
        inst.start_spawning("h1")  # not placed yet
    inst.schedule("h1")
    with pytest.raises(InvalidState):
        inst.schedule("h2")  # placed once only
    with pytest.raises(InvalidState):
        inst.start_spawning("h2")  # another host's instance
    inst.request_delete()
    with pytest.raises(InvalidState):
        inst.start_spawning("h1")  # deleting wins over spawning


def test_fault_puts_instance_in_error() -> None:
    inst = new_instance()
    inst.fail("compute.no_valid_host", "No valid host was found. " + "x" * 400, "vcpus short")
    assert api_status(inst.vm_state, inst.task_state) == "ERROR"
    assert inst.fault is not None and len(inst.fault["message"]) == 255


def test_host_claims_never_exceed_capacity() -> None:
    host = Host.register("h1", vcpus=2, memory_mb=2048, disk_gb=20, cpu_allocation_ratio=1.0)
    host.claim("a", Resources(1, 1024, 10))
    host.claim("a", Resources(1, 1024, 10))  # the same instance again: no second claim
    assert host.used() == Resources(1, 1024, 10)
    host.claim("b", Resources(1, 1024, 10))
    with pytest.raises(InsufficientResources, match="vcpus"):
        host.claim("c", Resources(1, 512, 1))
    host.release("a")
    host.release("a")
    assert host.free() == Resources(1, 1024, 10)
    assert [type(e).__name__ for e in host.collect_events()] == [
        "Registered",
        "InstanceClaimed",
        "InstanceClaimed",
        "InstanceReleased",
    ]


def test_capacity_applies_allocation_ratios() -> None:
    host = Host.register("h1", vcpus=4, memory_mb=1000, disk_gb=10, cpu_allocation_ratio=4.0)
    assert host.capacity() == Resources(16, 1000, 10)


@pytest.mark.parametrize(
    ("field", "value"),
    [("vcpus", 0), ("ram", 0), ("disk", -1), ("flavorid", "bad/id"), ("flavorid", "")],
)
def test_flavor_rejects_bad_fields_naming_them(field: str, value: object) -> None:
    fields: dict[str, object] = {"flavorid": "f1", "name": "n", "vcpus": 1, "ram": 1, "disk": 0}
    fields[field] = value
    with pytest.raises(InvalidInput, match="id" if field == "flavorid" else field):
        Flavor.create(**fields)


def test_status_map_matches_nova() -> None:
    assert api_status("active", "rebooting_hard") == "HARD_REBOOT"
    assert api_status("stopped", None) == "SHUTOFF"
    assert api_status("resized", None) == "VERIFY_RESIZE"
    assert api_status("shelved_offloaded", None) == "SHELVED_OFFLOADED"


def test_the_same_fault_reported_twice_is_recorded_once() -> None:
    inst = new_instance()
    inst.fail("compute.no_valid_host", "No valid host was found.", "vcpus")
    inst.fail("compute.no_valid_host", "No valid host was found.", "vcpus")
    inst.fail("compute.spawn_failed", "libvirt error", "")
    assert [type(e).__name__ for e in inst.collect_events()] == ["Requested", "Faulted", "Faulted"]
