"""A multi-create is placed together: one decision for all its servers and one atomic append of all
their claims, or, when they do not all fit, none of them placed (Nova's NoValidHost for the request)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest

from commands.app import Stratus
from commands.errors import NoValidHost
from commands.flavors.create import CreateFlavor
from commands.hosts.register import RegisterHost
from commands.servers.create import CreateServer
from commands.servers.delete import DeleteServer, FinishDeletion
from commands.states import VmState
from stratus.context import CommandContext
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.scheduler import settled
from tests.fixtures.workers import Worker, eventually


def test_a_multi_create_is_placed_in_one_append_or_not_at_all(
    app: Stratus,
    start_scheduler: Callable[..., Worker],
) -> None:
    h = Handlers(app)
    h.create_flavor(CreateFlavor("big", "m1.big", vcpus=1, ram=3072, disk=1))
    for name in ("c1", "c2", "c3"):
        h.register_host(RegisterHost(name, vcpus=8, memory_mb=4096, disk_gb=50))  # room for one m1.big each
    start_scheduler()

    three = h.create_server(CreateServer("trio", "p1", "u1", "big", count=3, reservation_id="r-trio")).ids
    placed = [eventually(partial(settled, h, s)) for s in three]
    assert sorted(i.host or "" for i in placed) == ["c1", "c2", "c3"]
    scheduled = [
        e.position
        for e in app.recorder.read_envelopes(1, 1000)  # type: ignore[attr-defined]
        if e.type.endswith("instance.scheduled")
    ]
    assert len(scheduled) == 3 and max(scheduled) - min(scheduled) < 6  # 3 claims + 3 placements, one append

    for s in three:  # gone from their hosts (no hypervisor worker runs here to tear them down)
        h.delete_server(DeleteServer(s, None))
        h.finish_deletion(FinishDeletion(s))
    four = h.create_server(CreateServer("quartet", "p1", "u1", "big", count=4, reservation_id="r-four")).ids
    failed = [eventually(partial(settled, h, s)) for s in four]
    assert all(i.vm_state == VmState.ERROR and i.host is None for i in failed)
    fault = failed[0].fault
    assert fault is not None and fault["code"] == NoValidHost.code
    assert (
        "Requested 4 servers of vcpus=1, memory_mb=3072, disk_gb=1 together; the hosts have room for 3"
        in (fault["details"])
    )
    assert all(h.host(n).claims == {} for n in ("c1", "c2", "c3"))


def test_multi_creates_appended_in_one_group_are_each_placed_together(
    app: Stratus,
    start_scheduler: Callable[..., Worker],
) -> None:
    """Creates of one project decided together share one append (group commit): the servers of each
    multi-create still follow one another on the log, so each is placed together, all or none: the
    trio fits the three free hosts, the quartet appended with it does not and fails whole."""
    h = Handlers(app)
    h.create_flavor(CreateFlavor("big", "m1.big", vcpus=1, ram=3072, disk=1))
    for name in ("c1", "c2", "c3"):
        h.register_host(RegisterHost(name, vcpus=8, memory_mb=4096, disk_gb=50))  # room for one m1.big each
    requests = [
        (CreateServer(name, "p1", "u1", "big", count=count, reservation_id=f"r-{name}"), CommandContext())
        for name, count in (("quartet", 4), ("trio", 3))
    ]
    quartet, trio = (r.ids for r in h.creates.decide(requests))  # type: ignore[union-attr]  # one group
    start_scheduler()
    placed = [eventually(partial(settled, h, s)) for s in trio]
    failed = [eventually(partial(settled, h, s)) for s in quartet]
    assert sorted(i.host or "" for i in placed) == ["c1", "c2", "c3"]
    assert all(i.vm_state == VmState.ERROR and i.host is None for i in failed)


def test_the_other_servers_of_a_settled_multi_create_are_not_read_again(
    app: Stratus,
    start_scheduler: Callable[..., Worker],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first server's delivery places the whole multi-create; the deliveries of the other
    servers, taken in the same pass, are settled without reading their servers again."""
    h = Handlers(app)
    h.create_flavor(CreateFlavor("small", "m1.small", vcpus=1, ram=512, disk=1))
    h.register_host(RegisterHost("c1", vcpus=16, memory_mb=16384, disk_gb=100))
    five = h.create_server(CreateServer("five", "p1", "u1", "small", count=5, reservation_id="r-five")).ids
    reads: list[str] = []
    instance = Handlers.instance

    def counting(self: Handlers, server_id: str, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread() and server_id in five:
            reads.append(server_id)
        return instance(self, server_id, *args, **kwargs)

    monkeypatch.setattr(Handlers, "instance", counting)
    start_scheduler()  # all five requests wait: one pass takes them together
    placed = [eventually(partial(settled, h, s)) for s in five]
    assert all(i.host == "c1" for i in placed)
    # each: once to check that it still waits, once in the decision that places it; the first once more
    assert len(reads) <= 2 * len(five) + 1, reads
