"""Host heartbeats beside the log: a silent host is shown down in os-hypervisors."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import libvirt
import pytest

from commands.servers.scheduling import PlaceInstance
from commands.states import PowerState
from stratus.config import Settings
from stratus.eventstore import NatsBridge
from stratus.liveness import Heartbeats, LivenessMirror, bucket_for
from stratus.natsserver import NatsServer
from tests.fixtures.api import ADMIN, P1, Stack
from tests.fixtures.hypervisor import HOST
from tests.fixtures.nats import unique_settings
from tests.fixtures.workers import Worker, eventually
from workers import hypervisor
from workers.libvirt_driver import LibvirtDriver


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_host_is_up_while_it_beats_and_down_after(bridge: NatsBridge, settings: Settings) -> None:
    clock = Clock()
    beats = Heartbeats(bridge, bucket=bucket_for(settings.stream), clock=clock)
    assert beats.up(["h1", "h2"], down_after=60) == {"h1": False, "h2": False}  # never seen: down
    beats.beat("h1")
    clock.now += 59
    assert beats.up(["h1", "h2"], down_after=60) == {"h1": True, "h2": False}
    clock.now += 2
    assert beats.up(["h1"], down_after=60) == {"h1": False}
    beats.beat("h1")
    assert beats.up(["h1"], down_after=60) == {"h1": True}
    assert beats.last_seen(["h1"]) == {"h1": clock.now}


def test_the_mirror_judges_the_pushed_beats_at_question_time(bridge: NatsBridge, settings: Settings) -> None:
    clock = Clock()
    beats = Heartbeats(bridge, bucket=bucket_for(settings.stream), clock=clock)
    mirror = LivenessMirror(beats, bridge)
    beats.beat("h1")
    # before its watch has replayed the bucket, the mirror reads it directly (a hop to the loop)
    hops = bridge.hops
    assert mirror.up(["h1", "h2"], down_after=60) == {"h1": True, "h2": False}
    assert bridge.hops > hops
    eventually(lambda: mirror.whole)
    hops = bridge.hops
    clock.now += 59
    assert mirror.up(["h1", "h2"], down_after=60) == {"h1": True, "h2": False}
    assert bridge.hops == hops  # from the mirror: nothing asked of NATS
    beats.beat("h2")
    clock.now += 2  # h1's beat is now 61 s old: down at once, as a direct read says
    assert mirror.up(["h1"], down_after=60) == {"h1": False} == beats.up(["h1"], down_after=60)
    eventually(lambda: mirror.up(["h2"], down_after=60)["h2"])  # h2's beat, pushed
    assert mirror.up(["h1", "h2"], down_after=60) == beats.up(["h1", "h2"], down_after=60)


def test_the_mirror_reports_the_beats_as_the_bucket_does(bridge: NatsBridge, settings: Settings) -> None:
    """``reports`` (os-hypervisors/detail's uptime and load, per host) from the mirror: what the
    bucket holds, with no hop to the NATS loop, and a newer beat once it is pushed."""
    clock = Clock()
    beats = Heartbeats(bridge, bucket=bucket_for(settings.stream), clock=clock)
    mirror = LivenessMirror(beats, bridge)
    beats.beat("h1")
    eventually(lambda: mirror.whole)
    hops = bridge.hops
    mirrored = mirror.reports(["h1", "h2"])
    assert bridge.hops == hops  # from the mirror: nothing asked of NATS
    assert mirrored == beats.reports(["h1", "h2"])
    assert mirrored["h1"] is not None and mirrored["h1"]["at"] == clock.now and mirrored["h2"] is None
    clock.now += 5
    beats.beat("h1")
    eventually(lambda: mirror.reports(["h1"])["h1"]["at"] == clock.now)
    assert mirror.reports(["h1"]) == beats.reports(["h1"])


def test_a_hosts_state_is_its_up_and_its_report_in_one_look_up(
    bridge: NatsBridge, settings: Settings
) -> None:
    """``states`` (os-hypervisors' lists: whether each host is up and its last beat) answers what
    ``up`` and ``reports`` answer, from the bucket and from the mirror (no hop to the NATS loop)."""
    clock = Clock()
    beats = Heartbeats(bridge, bucket=bucket_for(settings.stream), clock=clock)
    mirror = LivenessMirror(beats, bridge)
    beats.beat("h1")
    beats.beat("h2")
    clock.now += 30
    beats.beat("h2")
    hosts = ["h1", "h2", "h3"]

    def separately(reader: Heartbeats | LivenessMirror, down_after: float) -> dict[str, tuple[bool, object]]:
        up, reports = reader.up(hosts, down_after), reader.reports(hosts)
        return {h: (up[h], reports[h]) for h in hosts}

    for down_after in (20, 60):
        assert beats.states(hosts, down_after) == separately(beats, down_after)
        assert beats.states(hosts, down_after)["h3"] == (False, None)
    eventually(lambda: mirror.whole and (mirror.reports(["h2"])["h2"] or {}).get("at") == clock.now)
    expected = {down_after: separately(beats, down_after) for down_after in (20, 60)}
    assert expected[20]["h1"][0] is False and expected[20]["h2"][0] is True and expected[60]["h1"][0] is True
    hops = bridge.hops
    for down_after in (20, 60):
        assert mirror.states(hosts, down_after) == expected[down_after]
    assert bridge.hops == hops  # from the mirror: nothing asked of NATS


def test_the_mirror_of_a_bucket_without_beats_answers_at_once(bridge: NatsBridge, settings: Settings) -> None:
    """Nothing to replay: the mirror is whole as soon as its watch is, and takes the first beats."""
    beats = Heartbeats(bridge, bucket=bucket_for(settings.stream))
    mirror = LivenessMirror(beats, bridge)
    assert mirror.up(["h1"]) == {"h1": False}  # read directly, the watch starting
    eventually(lambda: mirror.whole)
    beats.beat("h1")
    eventually(lambda: mirror.up(["h1"]) == {"h1": True})
    assert mirror.reports(["h1"]) == beats.reports(["h1"])


def test_the_mirror_reads_directly_once_its_watch_is_lost(own_nats_server: NatsServer) -> None:
    settings = unique_settings(own_nats_server.url)
    with NatsBridge(settings.nats_urls, name="mirror-test").start() as bridge:
        beats = Heartbeats(bridge, bucket=bucket_for(settings.stream))
        mirror = LivenessMirror(beats, bridge)
        beats.beat("h1")
        eventually(lambda: mirror.up(["h1"]) == {"h1": True} and mirror.whole)
        own_nats_server.restart()  # the connection drops; whatever was pushed meanwhile is lost
        eventually(lambda: bridge.is_connected and bridge.nc.stats["reconnects"] > 0)
        hops = bridge.hops
        assert mirror.up(["h1"]) == {"h1": True}  # read from the bucket, a new watch starting
        assert bridge.hops > hops
        eventually(lambda: mirror.whole)
        beats.beat("h2")
        eventually(lambda: mirror.up(["h2"]) == {"h2": True})


@pytest.fixture
def api_settings(api_settings: Settings) -> Settings:
    """The shared settings, with a host down after 1.5 s of silence."""
    return dataclasses.replace(api_settings, host_down_after_seconds=1.5)


def test_os_hypervisors_shows_a_silent_host_down(
    stack: Stack, api_settings: Settings, bridge: NatsBridge, conn: libvirt.virConnect, tmp_path: Path
) -> None:
    settings = dataclasses.replace(api_settings, host_name=HOST, heartbeat_interval_seconds=0.3)
    driver = LibvirtDriver(lambda: conn, instances_path=tmp_path)

    def target(stop: threading.Event) -> None:
        hypervisor.run(settings, bridge=bridge, app=stack.handlers.app, driver=driver, stop=stop, poll=0.1)

    def state() -> str | None:
        hosts = stack.get("/v2.1/os-hypervisors", ADMIN).json["hypervisors"]
        return hosts[0]["state"] if hosts else None

    def power_state() -> int | None:
        r = stack.get(f"/v2.1/servers/{server}", P1)
        return r.json["server"]["OS-EXT-STS:power_state"] if r.status_code == 200 else None

    worker = Worker(target)
    try:
        eventually(lambda: state() == "up")
        detail = stack.get("/v2.1/os-hypervisors/detail", ADMIN).json["hypervisors"][0]
        assert detail["state"] == "up"
        assert [s["state"] for s in stack.get("/v2.1/os-services", ADMIN).json["services"]] == ["up"]
        flavor, _ = stack.flavor()
        server, _ = stack.server(flavor, P1)
        stack.handlers.place_instance(PlaceInstance(server, HOST))
        eventually(lambda: power_state() == PowerState.RUNNING)
    finally:
        worker.close()
    eventually(lambda: state() == "down", timeout=10)
    assert [s["state"] for s in stack.get("/v2.1/os-services", ADMIN).json["services"]] == ["down"]
    # The host is silent: what its guest does now is unknown, not "running".
    assert power_state() == PowerState.NOSTATE
    assert stack.handlers.instance(server).power_state == PowerState.RUNNING  # the log is unchanged
    hyp = stack.get("/v2.1/os-hypervisors", ADMIN).json["hypervisors"][0]
    assert stack.get(f"/v2.1/os-hypervisors/{hyp['id']}", ADMIN).json["hypervisor"]["state"] == "down"
