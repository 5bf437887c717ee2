"""A rolling restart under load loses nothing (issue 17, "Upgrades"; docs/upgrades.md).

Every part runs as its own ``stratus <part>`` process (tests/fixtures/rolling.py). While a client keeps
creating servers and deleting those that came up, the API, the projector, the scheduler and the
hypervisor worker are each stopped with SIGTERM and started again, one at a time, each only once the
previous one is back at work. Afterwards: every create the API acknowledged is on the log exactly once
and its server is in a final state (or gone, if its deletion was acknowledged); the project's usage
equals its live servers, and the host's claims equal the servers on it.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

from stratus.eventstore import JetStreamApplicationRecorder, NatsBridge
from stratus.eventstore.subjects import SubjectLayout
from tests.fixtures.deployed import Http, wait_for
from tests.fixtures.rolling import HOST, PARTS, Parts

pytestmark = pytest.mark.slow

FLAVOR = {"flavor": {"name": "roll.tiny", "id": "roll.tiny", "ram": 64, "vcpus": 1, "disk": 1}}
LIVE = 5  # servers the client keeps up at once (the default quota allows 10)
FINAL = ("ACTIVE", "SHUTOFF")  # SHUTOFF: a guest of libvirt's test driver is gone once its worker restarts


@dataclass
class Load:
    """A client creating servers and deleting the oldest once it is up, until ``stop`` is set."""

    http: Http
    stop: threading.Event = field(default_factory=threading.Event)
    created: list[str] = field(default_factory=list)  # acknowledged creates (202), in order
    deleted: list[str] = field(default_factory=list)  # acknowledged deletes (204)
    came_up: int = 0  # servers seen ACTIVE
    refused: Counter[str] = field(default_factory=Counter)  # answers that acknowledged nothing
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        live: list[str] = []
        n = 0
        while not self.stop.is_set():
            if len(live) < LIVE:
                n += 1
                server = {"server": {"name": f"roll-{n}", "flavorRef": "roll.tiny"}}
                status, body = self._call("POST", "/v2.1/servers", server)
                if status == 202:
                    with self.lock:
                        self.created.append(body["server"]["id"])
                    live.append(body["server"]["id"])
            else:
                status, body = self._call("GET", f"/v2.1/servers/{live[0]}")
                if status == 200 and body["server"]["status"] in (*FINAL, "ERROR"):
                    self.came_up += body["server"]["status"] == "ACTIVE"
                    status, _ = self._call("DELETE", f"/v2.1/servers/{live[0]}")
                    if status == 204:
                        with self.lock:
                            self.deleted.append(live.pop(0))
            self.stop.wait(0.1)

    def wait_for_progress(self, parts: Parts, when: str) -> None:
        """Until two more servers came up: every part is at work (the one restarted last included)."""
        before = self.came_up
        try:
            wait_for(f"servers to come up {when}", lambda: self.came_up >= before + 2, 90)
        except AssertionError as e:
            seen = [
                (s["id"], s["status"], s["OS-EXT-STS:task_state"], s.get("fault"))
                for s in _servers(self.http)
            ]
            raise AssertionError(
                f"{e}; dead parts {parts.dead()}; servers {seen}; refused {self.refused}"
            ) from e

    def _call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        try:
            status, _, doc = self.http.call(method, path, body)
        except OSError as e:  # the API is restarting: nothing acknowledged
            self.refused[type(e).__name__] += 1
            return 0, None
        if status >= 300:
            self.refused[f"{method} {status}"] += 1
        return status, doc


def test_a_rolling_restart_of_every_part_under_load_loses_nothing(restartable: Parts) -> None:
    parts = restartable
    http = parts.http
    assert http.call("POST", "/v2.1/flavors", FLAVOR)[0] == 200
    wait_for("the host to register", lambda: _hypervisor(http))
    load = Load(http)
    client = threading.Thread(target=load.run, daemon=True)
    client.start()
    try:
        for part in PARTS:
            load.wait_for_progress(parts, f"before restarting {part}")
            parts.restart(part)
            assert parts.dead() == [], {p: parts.log(p) for p in parts.dead()}
        load.wait_for_progress(parts, "after the last restart")
    finally:
        load.stop.set()
        client.join(timeout=60)

    with load.lock:
        created, deleted = list(load.created), set(load.deleted)
    kept = [s for s in created if s not in deleted]
    assert len(created) >= 8, (created, load.refused)
    print(f"rolling restart: {len(created)} creates and {len(deleted)} deletes acknowledged, {len(kept)} "
          f"servers left; not acknowledged: {dict(load.refused)}")  # fmt: skip

    def settled() -> dict[str, Any] | None:
        found = {s["id"]: s for s in _servers(http)}
        ready = all(found.get(s, {}).get("status") in FINAL for s in kept) and not set(found) & deleted
        return found if ready and all(s["OS-EXT-STS:task_state"] is None for s in found.values()) else None

    found = wait_for("every server to settle", settled, 120)
    # every acknowledged create is on the log once, every acknowledged delete finished
    assert set(found) == set(kept), {s: found[s]["status"] for s in set(found) ^ set(kept) if s in found}
    requested = _requested(parts)
    assert [s for s in created if requested[s] != 1] == []
    # usage equals the live servers: the project's (quota) and the host's (claims)
    absolute = http.call("GET", "/v2.1/limits")[2]["limits"]["absolute"]
    assert (absolute["totalInstancesUsed"], absolute["totalCoresUsed"], absolute["totalRAMUsed"]) == (
        len(kept),
        len(kept),
        64 * len(kept),
    )
    hyp = _hypervisor(http)
    assert hyp is not None and (hyp["vcpus_used"], hyp["memory_mb_used"]) == (len(kept), 64 * len(kept))


def _servers(http: Http) -> list[dict[str, Any]]:
    status, _, body = http.call("GET", "/v2.1/servers/detail")
    assert status == 200, body
    return list(body["servers"])


def _hypervisor(http: Http) -> dict[str, Any] | None:
    status, _, body = http.call("GET", "/v2.1/os-hypervisors/detail")
    hosts = [h for h in body["hypervisors"] if h["hypervisor_hostname"] == HOST] if status == 200 else []
    return dict(hosts[0]) if hosts else None


def _requested(parts: Parts) -> Counter[str]:
    """How many times each server's creation (``Instance.Requested``) is on the log."""
    s = parts.settings
    layout = SubjectLayout(s.subject_prefix)
    with NatsBridge(s.nats_urls, name="rolling-audit") as bridge:
        recorder = JetStreamApplicationRecorder.from_settings(bridge, s)
        counts: Counter[str] = Counter()
        start = 1
        while batch := recorder.read_envelopes(start, 500, layout.kind_filter("instance")):
            counts.update(str(e.originator_id) for e in batch if e.type.endswith(".requested"))
            start = batch[-1].position + 1
        return counts
