"""Snapshots on the in-memory log: a snapshot at version n plus the events after n is the aggregate a
full replay gives, whatever happened to the snapshot (missing, corrupt, of other code, of another
log) and whatever the aggregate cache and concurrent writers did (docs/eventstore.md, "Snapshots")."""

from __future__ import annotations

import dataclasses
import itertools
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from uuid import uuid4

import pytest
from eventsourcing.persistence import IntegrityError

from commands.app import SNAPSHOT_INTERVAL, Stratus, snapshotted
from commands.host import Host, Resources
from commands.host_aggregate import HostAggregate
from commands.instance import Instance
from commands.ledger import Ledger
from commands.network import Network
from commands.provider import ResourceProvider
from commands.registry import Registry
from commands.usage import newest_epoch
from stratus.eventstore.memory import InMemoryFactory, InMemorySnapshotRecorder
from stratus.eventstore.snapshots import Snapshot, code_fingerprint, decode_value, encode_value
from tests.fixtures.snapshots import Shelf, cold, replayed, same

N = SNAPSHOT_INTERVAL


def host_with_history(app: Stratus, claims: int) -> Host:
    host = Host.register(f"host-{uuid4().hex[:8]}", vcpus=10_000, memory_mb=10**7, disk_gb=10**6)
    app.save(host)
    for i in range(claims):
        host.claim(f"i{i}", Resources(1, 2, 3))
        if i % 3 == 0:
            host.release(f"i{i}")
        app.save(host)
    return host


def advance(app: Stratus, host: Host, version: int) -> None:
    """Claim on ``host`` until it is at ``version``."""
    while host.version < version:
        host.claim(f"x{host.version}", Resources(1, 1, 1))
        app.save(host)


def snapshot_store(app: Stratus) -> InMemorySnapshotRecorder:
    assert app.snapshots is not None
    recorder = app.snapshots.recorder
    assert isinstance(recorder, InMemorySnapshotRecorder)
    return recorder


# -- the encoding ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Point:
    x: int
    tags: tuple[str, ...]


def test_the_state_encoding_gives_back_the_types_it_was_given() -> None:
    value = {
        "set": {1, 2},
        "frozen": frozenset({"a"}),
        "tuple": (1, "x", None),
        "uuid": uuid4(),
        "when": datetime(2026, 11, 26, 8, 0, tzinfo=UTC),
        "money": Decimal("1.10"),
        "int keys": {1: "one", 2: "two"},
        "tagged key": {"__t": "not a tag"},
        "point": _Point(3, ("a", "b")),
        "nested": [{"x": [1.5, True]}],
        "nan": float("inf"),
    }
    back = decode_value(encode_value(value))
    assert back == value
    for k in value:
        assert type(back[k]) is type(value[k]), k


def test_a_state_the_encoding_does_not_know_is_not_snapshotted() -> None:
    with pytest.raises(TypeError):
        encode_value({"x": object()})


# -- snapshot + events == replay -------------------------------------------------------------------


def test_a_host_is_snapshotted_every_interval_and_loads_as_its_replay() -> None:
    factory = InMemoryFactory()
    app = Stratus(factory)
    host = host_with_history(app, claims=int(2.5 * N))
    stored = snapshot_store(app).stored[str(host.id)]
    assert stored.originator_version >= N and host.version - stored.originator_version < N
    other = cold(factory)
    loaded: Any = other.repository.get(host.id)
    assert other.repository.snapshot_stats["used"] == 1
    same(loaded, replayed(app, host.id))
    same(loaded, host)


@pytest.mark.parametrize("after", [0, 1, N - 1])
def test_a_snapshot_and_the_events_after_it_equal_the_replay(after: int) -> None:
    factory = InMemoryFactory()
    app = Stratus(factory)
    host = host_with_history(app, claims=0)
    advance(app, host, N)
    for i in range(after):
        host.claim(f"y{i}", Resources(1, 1, 1))
        app.save(host)
    other = cold(factory)
    same(other.repository.get(host.id), replayed(app, host.id))
    assert other.repository.snapshot_stats["used"] == 1


def test_one_save_that_crosses_the_interval_is_snapshotted_at_its_last_version() -> None:
    factory = InMemoryFactory()
    app = Stratus(factory)
    host = host_with_history(app, claims=0)
    advance(app, host, N - 2)
    for i in range(7):  # versions N-1 .. N+5 in one append
        host.claim(f"batch{i}", Resources(1, 1, 1))
    app.save(host)
    assert snapshot_store(app).stored[str(host.id)].originator_version == host.version
    same(cold(factory).repository.get(host.id), replayed(app, host.id))


@pytest.mark.parametrize(
    "build",
    [
        lambda: Ledger(resource="key_pairs", owner="u1"),
        lambda: Registry(kind="providers"),
        lambda: Network(name="private", cidr="10.0.0.0/16", gateway="10.0.0.1"),
        lambda: ResourceProvider.create(uuid4(), "rp", None),
        lambda: HostAggregate.create(uuid4(), "agg", 1, "az1"),
        lambda: Instance.request(
            uuid4(),
            name="vm",
            project_id="p",
            user_id="u",
            flavor={"vcpus": 1},
            image_ref="",
            metadata={"k": "v"},
            availability_zone=None,
            request_key=None,
        ),
    ],
    ids=["ledger", "registry", "network", "resource provider", "host aggregate", "instance"],
)
def test_every_snapshotted_kind_round_trips(build: Any) -> None:
    aggregate = build()
    aggregate.collect_events()
    mapper = Stratus(InMemoryFactory()).mapper  # through the stored bytes, as a load reads them
    snapshot: Any = mapper.to_domain_event(mapper.to_stored_event(Snapshot.take(aggregate, anchor="1")))
    same(snapshot.mutate(None), aggregate)


def test_a_ledger_s_members_come_back_as_a_frozenset() -> None:
    factory = InMemoryFactory()
    app = Stratus(factory)
    ledger = Ledger(resource="key_pairs", owner="u1")
    for i in range(N + 5):
        ledger.admit(f"k{i}", {"key_pairs": 10_000})
        app.save(ledger)
    loaded: Any = cold(factory).repository.get(ledger.id)
    assert isinstance(loaded.members, frozenset)
    same(loaded, replayed(app, ledger.id))


def test_the_aggregates_whose_history_grows_are_snapshotted() -> None:
    names = {cls.__name__ for cls in snapshotted()}
    assert {"Host", "ResourceProvider", "Ledger", "Network", "Registry", "ImageUsage", "Instance"} <= names
    assert all(interval == N for interval in snapshotted().values())


# -- the cache and concurrent writers --------------------------------------------------------------


def test_with_the_aggregate_cache_and_another_writer_loads_equal_the_replay() -> None:
    factory = InMemoryFactory()
    a, b = Stratus(factory), Stratus(factory)
    host = host_with_history(a, claims=0)
    advance(a, host, N - 2)
    for i in range(2 * N):  # two processes take turns on one host, each from its own cache
        app = (a, b)[i % 2]
        copy: Any = app.repository.get(host.id)
        copy.claim(f"turn{i}", Resources(1, 1, 1))
        app.save(copy)
    for app in (a, b, cold(factory)):
        same(app.repository.get(host.id), replayed(a, host.id))


def test_a_stale_append_is_refused_and_takes_no_snapshot() -> None:
    factory = InMemoryFactory()
    app = Stratus(factory)
    host = host_with_history(app, claims=0)
    advance(app, host, N - 1)
    stale: Any = app.repository.get(host.id)
    host.claim("winner", Resources(1, 1, 1))
    app.save(host)  # version N: snapshotted
    before = snapshot_store(app).stored[str(host.id)]
    stale.claim("loser", Resources(1, 1, 1))
    with pytest.raises(IntegrityError):
        app.save(stale)
    assert snapshot_store(app).stored[str(host.id)] is before
    loaded: Any = cold(factory).repository.get(host.id)
    assert "winner" in loaded.claims and "loser" not in loaded.claims


# -- snapshots that must not be used --------------------------------------------------------------


def _taken(app: Stratus, host: Host) -> Any:
    """The host's stored snapshot, as a ``Snapshot``."""
    taken = app.mapper.to_domain_event(snapshot_store(app).stored[str(host.id)])
    assert isinstance(taken, Snapshot)
    return taken


@pytest.mark.parametrize(
    ("damage", "outcome"),
    [
        # Bytes that are not a snapshot any more.
        (
            lambda app, taken: dataclasses.replace(app.mapper.to_stored_event(taken), state=b"\x00not json"),
            "unusable",
        ),
        # The same snapshot taken by other code of Host (its fingerprint differs): not trusted.
        (
            lambda app, taken: app.mapper.to_stored_event(dataclasses.replace(taken, code="0" * 16)),
            "unusable",
        ),
        # Anchored on another event than this log's at its version: another log's, or a restored one.
        (lambda app, taken: app.mapper.to_stored_event(dataclasses.replace(taken, anchor="1")), "diverged"),
        (
            lambda app, taken: app.mapper.to_stored_event(dataclasses.replace(taken, anchor="999999")),
            "diverged",
        ),
        (
            lambda app, taken: app.mapper.to_stored_event(dataclasses.replace(taken, anchor="junk")),
            "diverged",
        ),
    ],
    ids=["corrupt", "other code", "anchor: another event", "anchor: no event", "anchor: junk"],
)
def test_a_snapshot_that_must_not_be_used_is_replayed_instead(damage: Any, outcome: str) -> None:
    factory = InMemoryFactory()
    app = Stratus(factory)
    host = host_with_history(app, claims=N + 10)
    snapshot_store(app).stored[str(host.id)] = damage(app, _taken(app, host))
    other = cold(factory)
    same(other.repository.get(host.id), replayed(app, host.id))
    assert other.repository.snapshot_stats[outcome] == 1


def test_a_snapshot_ahead_of_the_log_is_replayed_instead() -> None:
    """A log restored from an older backup, with the snapshots of the newer one."""
    factory = InMemoryFactory()
    app = Stratus(factory)
    host = host_with_history(app, claims=2 * N)
    restored = InMemoryFactory()
    old = Stratus(restored)
    old.recorder.insert_events(app.recorder.select_events(host.id, lte=N + 5))
    snapshot_store(old).stored.update(snapshot_store(app).stored)  # at version 2N
    loaded: Any = old.repository.get(host.id)
    assert loaded.version == N + 5
    same(loaded, replayed(old, host.id))
    assert old.repository.snapshot_stats["diverged"] == 1


def test_a_lost_snapshot_costs_a_replay() -> None:
    factory = InMemoryFactory()
    app = Stratus(factory)
    host = host_with_history(app, claims=N + 10)
    snapshot_store(app).stored.clear()
    other = cold(factory)
    same(other.repository.get(host.id), replayed(app, host.id))
    assert other.repository.snapshot_stats["none"] == 1


def test_a_snapshot_store_that_fails_never_fails_the_command() -> None:
    class Broken(InMemorySnapshotRecorder):
        def insert_events(self, stored_events: Any, **kwargs: Any) -> None:
            raise OSError("the snapshot store is away")

    factory = InMemoryFactory()
    factory._snapshots = Broken()
    app = Stratus(factory)
    host = host_with_history(app, claims=N + 1)  # a snapshot attempt at version N
    same(cold(factory).repository.get(host.id), replayed(app, host.id))


def test_snapshots_can_be_turned_off() -> None:
    factory = InMemoryFactory(env={"IS_SNAPSHOTTING_ENABLED": "n"})
    app = Stratus(factory)
    assert app.snapshots is None
    host = host_with_history(app, claims=N + 1)
    same(cold(factory).repository.get(host.id), replayed(app, host.id))


# -- upcasting: a snapshot of an older class version -----------------------------------------------


def test_a_snapshot_of_an_older_class_version_is_upcast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(Stratus.snapshotting_intervals, Shelf, 5)  # type: ignore[misc]
    factory = InMemoryFactory()
    app = Stratus(factory)
    shelf = Shelf(name="fiction")
    for i in range(7):
        shelf._added(f"book{i}")
        app.save(shelf)
    store = snapshot_store(app)
    key = str(shelf.id)
    taken: Any = app.mapper.to_domain_event(store.stored[key])
    assert taken.originator_version == 5 and taken.state["class_version"] == 2
    # The snapshot as the previous release (class version 1) wrote it: a list of books, no count.
    v1_state = {k: v for k, v in taken.state.items() if k not in ("class_version", "count")}
    v1_state["books"] = sorted(decode_value(taken.state["books"]))
    store.stored[key] = app.mapper.to_stored_event(dataclasses.replace(taken, state=v1_state, code="v1"))
    other = cold(factory)
    loaded: Any = other.repository.get(shelf.id)
    assert other.repository.snapshot_stats["used"] == 1
    same(loaded, replayed(app, shelf.id))
    assert loaded.books == {f"book{i}" for i in range(7)} and loaded.count == 7


def test_a_snapshot_is_tied_to_the_code_that_took_it() -> None:
    assert code_fingerprint(Host) == code_fingerprint(Host)
    assert code_fingerprint(Host) != code_fingerprint(Ledger)
    assert list(itertools.islice(iter(snapshotted()), 1))


# -- bounded loads beyond snapshots: a project's usage epochs --------------------------------------


@pytest.mark.parametrize("newest", [0, 1, 2, 3, 7, 8, 100, 1_000_000])
@pytest.mark.parametrize("start", [0, 1])
def test_the_newest_usage_epoch_is_found_in_log_reads(newest: int, start: int) -> None:
    probes: list[int] = []

    def exists(epoch: int) -> bool:
        probes.append(epoch)
        return epoch <= newest

    start = min(start, newest)
    assert newest_epoch(start, exists) == newest
    assert len(probes) <= 2 * max(newest, 1).bit_length() + 2
