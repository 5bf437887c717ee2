"""The hypervisor's per-server lock: one server's steps never overlap."""

from __future__ import annotations

import threading
import time

from workers.consumer import PerServer


def test_one_servers_steps_never_overlap() -> None:
    per_server = PerServer()
    inside: list[str] = []
    overlaps: list[str] = []

    def step(key: str) -> None:
        with per_server.held(key):
            if key in inside:
                overlaps.append(key)
            inside.append(key)
            time.sleep(0.02)
            inside.remove(key)

    threads = [threading.Thread(target=step, args=(k,)) for k in ("a", "a", "a", "b", "b")]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == []
    assert time.perf_counter() - started >= 0.06  # the three steps of "a" ran one after another
