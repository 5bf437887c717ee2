"""A scheduler starts its host view from each host's snapshot and the events after it, not from every
Host event of the log, and the view it builds is the one a fold of every Host event builds (real
JetStream; docs/performance.md, "Growth")."""

from __future__ import annotations

import dataclasses
import logging
import threading
from uuid import uuid4

import pytest

from commands.app import SNAPSHOT_INTERVAL, Stratus
from commands.host import Host, host_aggregate_id
from commands.hosts.register import RegisterHost
from commands.hosts.services import SetServiceStatus
from commands.servers.actions import FinishAction, RequestAction, UnshelveServer
from commands.servers.create import CreateServer
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import FinishSpawning, StartSpawning
from commands.states import VmState
from stratus.config import Settings
from stratus.eventstore import Factory, NatsBridge
from stratus.eventstore.snapshot_stream import JetStreamSnapshotRecorder
from stratus.eventstore.snapshots import Snapshot
from tests.fixtures.commands import M1_SMALL
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.lifecycle import LifecycleHandlers
from tests.fixtures.facades.operations import Operations
from tests.fixtures.snapshots import claimed_on, same
from tests.fixtures.workers import Worker, eventually
from workers import scheduler
from workers.host_feed import WINDOW_PER_HOST, HostFeed
from workers.host_view import HostView

N = SNAPSHOT_INTERVAL


def dropping_snapshots(app: Stratus, request: pytest.FixtureRequest) -> Stratus:
    """``app``, whose snapshot stream is deleted after the test (the ``recorder`` fixture deletes the log)."""
    assert app.snapshots is not None
    snapshots = app.snapshots.recorder
    assert isinstance(snapshots, JetStreamSnapshotRecorder)
    request.addfinalizer(snapshots.delete_stream)
    return app


def started(
    bridge: NatsBridge,
    settings: Settings,
    request: pytest.FixtureRequest,
    window: int = WINDOW_PER_HOST,
    **env: str,
) -> tuple[HostView, HostFeed, Stratus]:
    """A scheduler's host view and feed, started as ``stratus scheduler`` starts them, in a process of
    its own (an empty aggregate cache); ``env``: its application's environment."""
    app = Stratus(Factory(env or None, bridge=bridge, settings=settings))
    view = HostView(lambda host_id: app.repository.get(host_id))
    hosts = scheduler.subjects(settings)[1]
    feed = HostFeed(bridge, app, view, stream=settings.stream, subject_filter=hosts, window_per_host=window)
    request.addfinalizer(feed.close)
    feed.open().catch_up()
    return view, feed, app


def assert_same_view(a: HostView, b: HostView) -> None:
    assert sorted(h.hostname for h in a.hosts()) == sorted(h.hostname for h in b.hosts())
    for host in a.hosts():
        other = b.named(host.hostname)
        assert other is not None
        same(host, other)
        assert a.free_of(host) == b.free_of(other)
    assert a.position == b.position


def test_a_scheduler_starts_from_the_hosts_snapshots_and_builds_the_view_a_full_fold_builds(
    app: Stratus, bridge: NatsBridge, settings: Settings, request: pytest.FixtureRequest
) -> None:
    app = dropping_snapshots(app, request)
    hosts = [Host.register(f"compute-{i}-{uuid4().hex[:6]}", 10_000, 10**7, 10**6) for i in range(4)]
    app.save(*hosts)
    claimed_on(app, hosts[0], 2 * N + 17)  # snapshotted twice, 17 events after
    claimed_on(app, hosts[1], N - 3, per_save=30)  # never snapshotted: its whole (short) history is read
    claimed_on(app, hosts[2], 2 * N - 1)  # snapshotted at its last event: nothing after it
    claimed_on(app, hosts[3], N + 5)
    hosts[3].disable("maintenance")
    app.save(hosts[3])

    # A log this short is folded whole (following snapshots would read as much); a longer one (here:
    # a window of 50 positions a host) is followed from the hosts' recent snapshots, and hosts
    # snapshotted before the window or never are loaded alone.
    folded, _, _ = started(bridge, settings, request, IS_SNAPSHOTTING_ENABLED="n")
    short, short_feed, _ = started(bridge, settings, request)
    assert short_feed.started == {}
    assert_same_view(short, folded)
    view, feed, _ = started(bridge, settings, request, window=50)
    assert_same_view(view, folded)
    assert feed.started["snapshot"] >= 2 and feed.started["loaded"] >= 1  # hosts[1] has no snapshot
    assert sum(feed.started.values()) == 4
    assert not view.named(hosts[3].hostname).schedulable  # type: ignore[union-attr]
    alone, feed_alone, _ = started(bridge, settings, request, window=0)  # every snapshot too old
    assert_same_view(alone, folded)
    assert feed_alone.started == {"snapshot": 0, "loaded": 4}
    # The feed goes on from where the loads began: later events and a new host reach both views.
    claimed_on(app, hosts[1], 7)
    claimed_on(app, hosts[0], N)
    late = Host.register(f"compute-late-{uuid4().hex[:6]}", 8, 4096, 100)
    app.save(late)
    feed.catch_up()
    again, _, _ = started(bridge, settings, request, IS_SNAPSHOTTING_ENABLED="n")
    assert_same_view(view, again)
    assert view.named(late.hostname) is not None
    assert view.named(hosts[0].hostname).version == hosts[0].version  # type: ignore[union-attr]


def test_a_scheduler_starts_on_a_log_with_no_host(
    app: Stratus, bridge: NatsBridge, settings: Settings, request: pytest.FixtureRequest
) -> None:
    app = dropping_snapshots(app, request)
    view, feed, _ = started(bridge, settings, request, window=0)
    assert len(view) == 0
    app.save(Host.register("compute-first", 8, 4096, 100))
    feed.catch_up()
    assert view.named("compute-first") is not None


def test_a_snapshot_that_is_not_of_this_log_is_not_followed(
    app: Stratus, bridge: NatsBridge, settings: Settings, request: pytest.FixtureRequest
) -> None:
    """A snapshot whose anchor is not the log's event there (a log restored from an older backup, or
    replaced): the feed reads that host afresh when it reaches the anchor."""
    app = dropping_snapshots(app, request)
    host = Host.register(f"compute-{uuid4().hex[:6]}", 10_000, 10**7, 10**6)
    app.save(host)
    claimed_on(app, host, N + 10)
    assert app.snapshots is not None
    (good,) = app.snapshots.get(host.id, desc=True, limit=1)
    assert isinstance(good, Snapshot)
    seq, _, _ = good.anchor.partition(":")
    # another log's host at that version: disabled there, and with another chain hash
    app.snapshots.put(
        [dataclasses.replace(good, anchor=f"{seq}:{'0' * 64}", state={**good.state, "disabled": True})]
    )

    view, feed, _ = started(bridge, settings, request, window=30)
    folded, _, _ = started(bridge, settings, request, IS_SNAPSHOTTING_ENABLED="n")
    assert feed.started == {"snapshot": 1, "loaded": 0}
    assert_same_view(view, folded)
    assert view.named(host.hostname).schedulable  # type: ignore[union-attr]


@pytest.mark.flavors(M1_SMALL)
def test_an_unshelve_waiting_when_a_scheduler_starts_from_snapshots_is_handled(
    handlers: Handlers,
    app: Stratus,
    bridge: NatsBridge,
    settings: Settings,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """test_api_actions' shelve test, without its timing: a server created and placed by hand (its
    ``Requested`` still waits on the scheduler's durable), shelved and offloaded, its host disabled,
    then unshelved, all after the host's last snapshot; a scheduler started now, from the snapshots,
    takes the creation and the unshelve in one batch. The unshelve must be handled (no valid host:
    the server stays offloaded with no task and a fault), and, the host enabled, a second one placed.
    (The snapshot start made the scheduler's first fetch come later, so the two requests were in one
    batch more often, where the creation's settling acknowledged the unshelve with it: 2fc8ac6.)"""
    app = dropping_snapshots(app, request)
    handlers.register_host(RegisterHost("compute-a", vcpus=10_000, memory_mb=10**7, disk_gb=10**6))
    host: object = app.repository.get(host_aggregate_id("compute-a"))
    assert isinstance(host, Host)
    claimed_on(app, host, WINDOW_PER_HOST + 2 * N)  # longer than the window: started from its snapshot
    server = handlers.create_server(CreateServer("vm", "p1", "u1", "small")).id
    handlers.place_instance(PlaceInstance(server, "compute-a"))
    handlers.start_spawning(StartSpawning(server, "compute-a"))
    handlers.finish_spawning(FinishSpawning(server, power_state=1))
    lifecycle = LifecycleHandlers(handlers)
    lifecycle.request_action(RequestAction(server, "p1", "shelve"))
    lifecycle.finish_offload(FinishAction(server, "shelve", power_state=4))  # the host's release
    services = Operations(app)
    services.set_service_status(SetServiceStatus("compute-a", "nova-compute", disabled=True))
    lifecycle.unshelve(UnshelveServer(server, "p1"))

    def schedule(stop: threading.Event) -> None:
        scheduler.run(
            settings,
            bridge=bridge,
            app=Stratus(Factory(bridge=bridge, settings=settings)),
            stop=stop,
            poll=0.1,
        )

    with caplog.at_level(logging.INFO, logger="workers.host_feed"):
        worker = Worker(schedule)
        try:
            eventually(lambda: handlers.instance(server).fault is not None)
            inst = handlers.instance(server)
            assert "No valid host" in inst.fault["message"]  # type: ignore[index]
            assert (inst.vm_state, inst.task_state, inst.host) == (VmState.SHELVED_OFFLOADED, None, None)
            services.set_service_status(SetServiceStatus("compute-a", "nova-compute", disabled=False))
            lifecycle.unshelve(UnshelveServer(server, "p1"))
            eventually(lambda: handlers.instance(server).host == "compute-a")
        finally:
            worker.close()
    assert "1 hosts from their snapshots, 0 loaded alone" in caplog.text


def test_catch_ups_cut_short_by_their_deadline_lose_no_host_event(
    app: Stratus, bridge: NatsBridge, settings: Settings, request: pytest.FixtureRequest
) -> None:
    """A catch-up that outlives its deadline is cancelled wherever it is (the first one on a long log
    takes longer than the scheduler's 10 s), and the next goes on from the last Host event taken off
    the subscription. None may be lost between the two: a lost event is a gap in its host's versions,
    which the view repairs by reading the host again (``reloads``), or, the last one lost, a stall
    that starts the view over. Here catch-ups with a deadline of 20 ms while the host's events keep
    coming, in bursts that no catch-up takes whole in time (a quiet machine takes small appends whole)."""
    app = dropping_snapshots(app, request)
    host = Host.register(f"compute-{uuid4().hex[:6]}", 10**6, 10**9, 10**8)
    app.save(host)
    cold = Stratus(Factory({"IS_SNAPSHOTTING_ENABLED": "n"}, bridge=bridge, settings=settings))
    reloads: list[object] = []
    view = HostView(lambda host_id: reloads.append(host_id))  # type: ignore[func-returns-value]
    hosts = scheduler.subjects(settings)[1]
    feed = HostFeed(bridge, cold, view, stream=settings.stream, subject_filter=hosts, timeout=0.02)
    request.addfinalizer(feed.close)
    eventually(lambda: _opened(feed))

    appended = threading.Event()
    cut = threading.Event()  # a catch-up was cut short

    def append(stop: threading.Event) -> None:
        # appends of 10 events, and every 50th of 900 (a quiet machine delivers 10 within 20 ms, not
        # 900): 2,000 versions, and on until a catch-up was cut short, at most 20,000
        saves = 0
        while not stop.is_set() and (host.version < 2000 or not cut.is_set()) and host.version < 20_000:
            saves += 1
            burst = 900 if saves % 50 == 0 else 10
            claimed_on(app, host, burst, per_save=burst)
        appended.set()

    timeouts = 0
    appending = Worker(append)
    try:
        while True:
            done = appended.is_set()
            try:
                feed.catch_up()
            except TimeoutError:
                timeouts += 1
                cut.set()
                continue
            if done:  # a whole catch-up after the last append: the view is at the log's end
                break
    finally:
        appending.close()
    assert timeouts > 0  # none was cut short: this test showed nothing
    assert reloads == []
    folded = view.named(host.hostname)
    assert folded is not None
    same(folded, host)


def _opened(feed: HostFeed) -> bool:
    try:
        feed.open()
    except TimeoutError:
        return False
    return True


def test_host_events_arriving_while_the_scheduler_is_idle_are_folded_as_they_come(
    app: Stratus, bridge: NatsBridge, settings: Settings, request: pytest.FixtureRequest
) -> None:
    """Between two decisions the subscription hands Host events over (a release, another scheduler's
    claims); a scheduler with nothing to place folds them while it waits (``fold_arrived``, its
    consumer's idle step), so none piles up for as long as it is idle, and without a request."""
    host = Host.register(f"compute-{uuid4().hex[:6]}", 10**6, 10**9, 10**8)
    app.save(host)
    view, feed, _ = started(bridge, settings, request)
    claimed_on(app, host, 30, per_save=10)

    def caught_up() -> bool:
        feed.fold_arrived()  # what the scheduler's consumer does after each poll that brought nothing
        return _folded(view, host)

    eventually(caught_up)
    assert feed.fold_arrived() == 0  # nothing left over
    folded = view.named(host.hostname)
    assert folded is not None
    same(folded, host)


def _folded(view: HostView, host: Host) -> bool:
    mine = view.named(host.hostname)
    return mine is not None and mine.version == host.version
