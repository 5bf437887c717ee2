"""Snapshots on JetStream: on a stream of their own, never in the log (its subjects, hash chain and
audit verification are as if no snapshot existed), used by cold loads only when their anchor is the
log's event, and replaced by a replay when lost, corrupt or of an older class version that cannot be
upcast (docs/eventstore.md, "Snapshots")."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any
from uuid import uuid4

import pytest
from eventsourcing.persistence import IntegrityError

from commands.app import SNAPSHOT_INTERVAL, Stratus
from commands.host import Host, Resources
from stratus.audit import verify
from stratus.config import Settings
from stratus.eventstore import Factory, JetStreamApplicationRecorder, NatsBridge
from stratus.eventstore.snapshot_stream import SNAPSHOT_SHA256, JetStreamSnapshotRecorder
from stratus.eventstore.snapshots import decode_value
from tests.fixtures.snapshots import Shelf, claimed_on, replayed, same

N = SNAPSHOT_INTERVAL


@pytest.fixture
def factory(
    bridge: NatsBridge, settings: Settings, recorder: JetStreamApplicationRecorder
) -> Iterator[Factory]:
    """The test's stream (deleted by the ``recorder`` fixture) and its snapshot stream (deleted here)."""
    f = Factory(bridge=bridge, settings=settings)
    yield f
    if not bridge.closed:
        snapshots = f.aggregate_recorder("snapshots")
        assert isinstance(snapshots, JetStreamSnapshotRecorder)
        snapshots.delete_stream()


def cold(factory: Factory) -> Stratus:
    """Another process: its own application, cache and heads, on the same streams."""
    return Stratus(Factory(bridge=factory.bridge, settings=factory.settings))


def snapshots_of(app: Stratus) -> JetStreamSnapshotRecorder:
    assert app.snapshots is not None
    recorder = app.snapshots.recorder
    assert isinstance(recorder, JetStreamSnapshotRecorder)
    return recorder


def host_at(app: Stratus, version: int, *, per_save: int = 40) -> Host:
    """A host claimed on until ``version``, ``per_save`` events per append (some released)."""
    host = Host.register(f"host-{uuid4().hex[:8]}", vcpus=100_000, memory_mb=10**8, disk_gb=10**7)
    app.save(host)
    return claimed_on(app, host, version - host.version, per_save=per_save)


def test_a_cold_load_reads_the_snapshot_and_the_events_after_it(factory: Factory) -> None:
    app = Stratus(factory)
    host = host_at(app, 2 * N + 17)
    stored = snapshots_of(app).select_events(host.id, desc=True, limit=1)
    assert stored and stored[0].originator_version > N
    other = cold(factory)
    loaded: Any = other.repository.get(host.id)
    assert other.repository.snapshot_stats["used"] == 1
    same(loaded, replayed(app, host.id))
    same(loaded, host)


def test_snapshots_are_not_in_the_log_and_the_audit_still_verifies(
    factory: Factory, settings: Settings, bridge: NatsBridge
) -> None:
    app = Stratus(factory)
    host = host_at(app, 3 * N + 1)
    assert app.recorder.max_notification_id() == host.version  # one message per event, nothing else
    notes = app.recorder.select_notifications(1, 10_000)
    assert {n.topic for n in notes} <= {
        f"commands.host:Host.{t}" for t in ("Registered", "InstanceClaimed", "InstanceReleased")
    }
    report = verify.verify(settings.nats_urls, settings.stream, settings.subject_prefix)  # type: ignore[arg-type]
    assert report.ok

    async def snapshot_stream_state() -> Any:
        return (await bridge.js.stream_info(f"{settings.stream}_SNAPSHOTS")).state

    state = bridge.run(snapshot_stream_state, 5)
    assert state.messages == 1  # the newest snapshot per aggregate, no more
    assert not (snapshots_of(app).stream_config().subjects or [""])[0].startswith(settings.subject_prefix)


def test_two_writers_with_caches_and_snapshots_load_as_the_replay(factory: Factory) -> None:
    a, b = Stratus(factory), cold(factory)
    host = host_at(a, N - 3)
    for i in range(12):  # the two take turns across a snapshot, each deciding on its cached copy
        app = (a, b)[i % 2]
        copy: Any = app.repository.get(host.id)
        copy.claim(f"turn{i}", Resources(1, 1, 1))
        app.save(copy)
    stale: Any = a.repository.get(host.id)
    b_copy: Any = b.repository.get(host.id)
    b_copy.claim("winner", Resources(1, 1, 1))
    b.save(b_copy)
    stale.claim("loser", Resources(1, 1, 1))
    with pytest.raises(IntegrityError):
        a.save(stale)
    for app in (a, b, cold(factory)):
        same(app.repository.get(host.id), replayed(a, host.id))


def test_a_corrupt_snapshot_falls_back_to_the_events(factory: Factory) -> None:
    app = Stratus(factory)
    host = host_at(app, N + 30)
    snapshots = snapshots_of(app)
    stored = snapshots.select_events(host.id, desc=True, limit=1)[0]

    async def damage() -> None:  # the stored bytes change under the digest
        msg = await snapshots.last_message(snapshots.subject(host.id), 5)
        assert msg is not None
        headers = {k: v for k, v in (msg.headers or {}).items() if k.startswith("Stratus-")}
        rotten = stored.state[:-9] + b"rotten!}}"
        await factory.bridge.js.publish(snapshots.subject(host.id), rotten, headers=headers)

    factory.bridge.run(damage, 5)
    other = cold(factory)
    same(other.repository.get(host.id), replayed(app, host.id))
    assert other.repository.snapshot_stats["none"] == 1  # the digest check turned it away
    assert snapshots_of(other).stats["corrupt"] == 1

    # Bytes that match their digest but do not decode into a Host: replayed too.
    snapshots.insert_events([dataclasses.replace(stored, state=b'{"timestamp": 1, "state": []}')])
    other = cold(factory)
    same(other.repository.get(host.id), replayed(app, host.id))
    assert other.repository.snapshot_stats["unusable"] == 1


def test_a_snapshot_whose_anchor_is_not_the_log_s_event_falls_back(factory: Factory) -> None:
    app = Stratus(factory)
    host = host_at(app, N + 30)
    snapshots = snapshots_of(app)
    stored = snapshots.select_events(host.id, desc=True, limit=1)[0]
    taken: Any = app.mapper.to_domain_event(stored)
    seq, _, chain_hash = taken.anchor.partition(":")
    assert chain_hash  # taken right after its append: the chain hash is known
    for anchor in (f"{seq}:{'0' * 64}", f"{int(seq) - 1}:{chain_hash}", "1:", "junk"):
        snapshots.insert_events([app.mapper.to_stored_event(dataclasses.replace(taken, anchor=anchor))])
        other = cold(factory)
        same(other.repository.get(host.id), replayed(app, host.id))
        assert other.repository.snapshot_stats["diverged"] == 1, anchor


def test_a_lost_snapshot_stream_costs_a_replay_not_an_error(factory: Factory, settings: Settings) -> None:
    app = Stratus(factory)
    host = host_at(app, 2 * N - 1)
    snapshots_of(app).delete_stream()
    other = cold(factory)  # a new process creates the stream again, empty
    same(other.repository.get(host.id), replayed(app, host.id))
    assert other.repository.snapshot_stats["none"] == 1
    snapshots_of(other).delete_stream()
    copy: Any = app.repository.get(host.id)
    copy.claim("while the stream is away", Resources(1, 1, 1))
    app.save(copy)  # at version 2N the snapshot cannot be stored; the command's events are
    assert copy.version == 2 * N
    assert app.recorder.known_version(host.id) == copy.version


def test_a_snapshot_of_an_older_class_version_is_upcast(
    factory: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(Stratus.snapshotting_intervals, Shelf, 5)  # type: ignore[misc]
    app = Stratus(factory)
    shelf = Shelf(name="fiction")
    for i in range(8):
        shelf._added(f"book{i}")
        app.save(shelf)
    snapshots = snapshots_of(app)
    taken: Any = app.mapper.to_domain_event(snapshots.select_events(shelf.id, desc=True, limit=1)[0])
    assert taken.originator_version == 5
    v1_state = {k: v for k, v in taken.state.items() if k not in ("class_version", "count")}
    v1_state["books"] = sorted(decode_value(taken.state["books"]))
    snapshots.insert_events(
        [app.mapper.to_stored_event(dataclasses.replace(taken, state=v1_state, code="v1"))]
    )
    other = cold(factory)
    loaded: Any = other.repository.get(shelf.id)
    assert other.repository.snapshot_stats["used"] == 1
    same(loaded, replayed(app, shelf.id))
    assert loaded.count == 8


def test_an_earlier_snapshot_stream_layout_is_replaced(
    factory: Factory, settings: Settings, bridge: NatsBridge
) -> None:
    snapshots = factory.aggregate_recorder("snapshots")
    assert isinstance(snapshots, JetStreamSnapshotRecorder)
    snapshots.delete_stream()
    old = dataclasses.replace(
        snapshots.stream_config(),
        subjects=[f"{settings.subject_prefix}_snapshots.>"],
        deny_purge=True,
        deny_delete=True,
        max_msgs_per_subject=-1,
    )

    async def add_old() -> None:
        await bridge.js.add_stream(old)

    bridge.run(add_old, 5)
    snapshots.ensure_stream()

    async def config() -> Any:
        return (await bridge.js.stream_info(snapshots.stream)).config

    have = bridge.run(config, 5)
    assert have.subjects == snapshots.stream_config().subjects and have.max_msgs_per_subject == 1


def test_the_snapshot_digest_header_is_sha256(factory: Factory) -> None:
    app = Stratus(factory)
    host = host_at(app, N)
    snapshots = snapshots_of(app)

    async def last() -> Any:
        return await snapshots.last_message(snapshots.subject(host.id), 5)

    msg = factory.bridge.run(last, 5)
    assert len(msg.headers[SNAPSHOT_SHA256]) == 64
