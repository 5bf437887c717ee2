"""The scheduler's pure decision: which hosts fit, in which order, and what is short when none does."""

from __future__ import annotations

from commands.host import Resources
from workers.host_selection import select_hosts

SMALL = Resources(vcpus=1, memory_mb=512, disk_gb=1)


def test_only_hosts_with_room_for_every_resource_are_candidates() -> None:
    free = {
        "a": Resources(4, 4096, 100),
        "b": Resources(0, 8192, 100),  # no vCPU left
        "c": Resources(4, 256, 100),  # not enough RAM
        "d": Resources(4, 8192, 0),  # no disk
    }
    assert select_hosts(free, SMALL).hosts == ("a",)


def test_spreads_by_most_free_ram_then_vcpus_then_name() -> None:
    free = {
        "a": Resources(2, 2048, 10),
        "b": Resources(2, 8192, 10),
        "c": Resources(8, 4096, 10),
        "d": Resources(2, 4096, 10),
    }
    assert select_hosts(free, SMALL).hosts == ("b", "c", "d", "a")


def test_an_exact_fit_is_a_fit() -> None:
    assert select_hosts({"a": SMALL}, SMALL).hosts == ("a",)


def test_no_room_says_what_was_short() -> None:
    free = {"a": Resources(4, 256, 100), "b": Resources(0, 256, 100)}
    sel = select_hosts(free, SMALL)
    assert sel.hosts == ()
    assert "Requested vcpus=1, memory_mb=512, disk_gb=1" in sel.details
    assert "of 2 hosts" in sel.details
    assert "2 short of memory_mb (most free: 256)" in sel.details
    assert "1 short of vcpus (most free: 4)" in sel.details
    assert "disk_gb (" not in sel.details


def test_no_hosts_at_all() -> None:
    sel = select_hosts({}, SMALL)
    assert sel.hosts == ()
    assert "no compute hosts are registered" in sel.details
