"""The scheduler's host view, started from loaded hosts: the events a loaded host already holds are
skipped by its version, never taken for a gap in its feed."""

from __future__ import annotations

import copy
from uuid import UUID

from commands.host import Host, Resources
from workers.host_view import HostView


def test_a_view_started_from_loaded_hosts_skips_the_events_they_hold() -> None:
    reloads: list[UUID] = []
    view = HostView(lambda host_id: reloads.append(host_id))  # type: ignore[func-returns-value]
    host = Host.register("compute-a", 8, 4096, 100)
    host.claim("vm-1", Resources(1, 512, 1))
    events = list(host.collect_events())  # versions 1 and 2, at log positions 11 and 12
    loaded = copy.deepcopy(host)
    host.claim("vm-2", Resources(1, 512, 1))
    later = list(host.collect_events())  # version 3, at position 13

    view.start([loaded], position=10)  # loaded at version 2, the log's Host events read up to 10
    for position, event in enumerate([*events, *later], start=11):
        view.apply(event, position)

    assert reloads == []
    seen = view.named("compute-a")
    assert seen is not None and seen.version == 3
    assert seen.free() == host.free()
    assert view.position == 13
