"""Servers going through their lifecycles interleaved, as a busy cloud's do: the churn the benches
that grow a log share (``bench_rebuild.build_log``, ``bench_growth.Growth``).

One ``step`` either requests a new server (while fewer than ``in_flight`` are in flight, with
probability 0.3) or moves one server in flight on by one step: scheduled on a host (3 % fail with no
valid host), spawning, spawned, then (with probability ``delete_after_spawn``) deletion requested
and deleted, releasing its claim.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from eventsourcing.domain import Aggregate

from commands.host import Host, Resources
from commands.instance import Instance


class Lifecycles:
    """The servers in flight and the next step of each; ``emit`` records what a step changed."""

    def __init__(
        self,
        rng: random.Random,
        hosts: list[Host],
        emit: Callable[..., None],
        *,
        in_flight: int = 400,
        delete_after_spawn: float = 1.0,
    ) -> None:
        self.rng = rng
        self.hosts = hosts  # the caller's list: it may replace a host in it (bench_growth's adopt)
        self.emit = emit
        self.in_flight = in_flight
        self.delete_after_spawn = delete_after_spawn
        self.flight: list[tuple[Instance, Host | None, str]] = []

    def step(self, request: Callable[[], Instance]) -> None:
        """One step: a server from ``request()``, or the next step of one in flight."""
        rng, flight = self.rng, self.flight
        if len(flight) < self.in_flight and (not flight or rng.random() < 0.3):
            inst = request()
            self._emit(inst)
            flight.append((inst, None, "schedule"))
            return
        i = rng.randrange(len(flight))
        inst, host, step = flight[i]
        if step == "schedule":
            if rng.random() < 0.03:
                inst.fail("NoValidHost", "No valid host was found.")
                self._emit(inst)
                flight[i] = (inst, None, "delete")
                return
            host = rng.choice(self.hosts)
            host.claim(inst.server_id, Resources.of_flavor(inst.flavor))
            inst.schedule(host.hostname)
            self._emit(host, inst)
            flight[i] = (inst, host, "spawn")
        elif step == "spawn":
            inst.start_spawning(inst.host or "")
            self._emit(inst)
            flight[i] = (inst, host, "spawned")
        elif step == "spawned":
            inst.finish_spawning(1)
            self._emit(inst)
            if self.delete_after_spawn >= 1.0 or rng.random() < self.delete_after_spawn:
                flight[i] = (inst, host, "delete")
            else:
                flight.pop(i)  # stays ACTIVE
        elif step == "delete":
            inst.request_delete()
            if host is None:
                inst.mark_deleted()
                flight.pop(i)
            else:
                flight[i] = (inst, host, "deleted")
            self._emit(inst)
        else:
            assert host is not None
            inst.mark_deleted()
            host.release(inst.server_id)
            self._emit(inst, host)
            flight.pop(i)

    def _emit(self, *aggregates: Aggregate) -> None:
        self.emit(*aggregates)
