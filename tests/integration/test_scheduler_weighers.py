"""Weighers (spread or pack, per resource), trait requirements from flavor extra specs, and faults that
name the filter that removed the hosts: pure functions, then the scheduler against real JetStream."""

from __future__ import annotations

from collections.abc import Callable

from commands.app import Stratus
from commands.errors import NoValidHost
from commands.states import VmState
from tests.fixtures.facades.handlers import CreateFlavor, CreateServer, Handlers, RegisterHost
from tests.fixtures.facades.operations import Operations
from tests.fixtures.facades.placement_handlers import PlacementHandlers
from tests.fixtures.scheduler import settled
from tests.fixtures.workers import Worker, eventually


def test_scheduler_honours_flavor_traits_and_names_the_filter(
    app: Stratus,
    start_scheduler: Callable[..., Worker],
) -> None:
    h = Handlers(app)
    h.create_flavor(CreateFlavor("ssd", "m1.ssd", vcpus=1, ram=512, disk=1))
    h.create_flavor(CreateFlavor("gpu", "m1.gpu", vcpus=1, ram=512, disk=1))
    ops = Operations(app)
    ops.set_flavor_extra_specs("ssd", {"trait:CUSTOM_SSD": "required", "trait:CUSTOM_SLOW": "forbidden"})
    ops.set_flavor_extra_specs("gpu", {"trait:CUSTOM_GPU": "required"})
    for name in ("big-plain", "small-ssd", "slow-ssd"):
        h.register_host(
            RegisterHost(name, vcpus=8, memory_mb=8192 if name == "big-plain" else 2048, disk_gb=50)
        )
    placement = PlacementHandlers(app)
    for trait in ("CUSTOM_SSD", "CUSTOM_SLOW"):
        placement.create_trait(trait)
    placement.set_traits(str(h.host("small-ssd").id), None, ["CUSTOM_SSD"])
    placement.set_traits(str(h.host("slow-ssd").id), None, ["CUSTOM_SSD", "CUSTOM_SLOW"])
    start_scheduler()

    ssd = h.create_server(CreateServer("a", "p1", "u1", "ssd")).id
    assert eventually(lambda: settled(h, ssd)).host == "small-ssd"  # not the emptier big-plain
    gpu = h.create_server(CreateServer("b", "p1", "u1", "gpu")).id
    inst = eventually(lambda: settled(h, gpu))
    assert inst.vm_state == VmState.ERROR and inst.fault is not None
    assert inst.fault["code"] == NoValidHost.code
    assert "no compute host has the traits CUSTOM_GPU" in inst.fault["details"]
    assert "'TraitsFilter: (start: 3, end: 0)'" in inst.fault["details"]
