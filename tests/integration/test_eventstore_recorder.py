"""The event store's own guarantees, beyond eventsourcing's suite: concurrency, idempotency,
atomicity across aggregates, the subject layout, the CloudEvents envelope, wake-ups."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from importlib import resources
from uuid import UUID, uuid4

import jsonschema
import orjson
import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent

from stratus.config import Settings
from stratus.context import Actor, CommandContext, acting, acting_per_event
from stratus.eventstore import (
    ConcurrentAppendError,
    EventStoreUnavailable,
    JetStreamApplicationRecorder,
    NatsBridge,
    TooManyEventsError,
    encode_token,
)
from stratus.eventstore.envelope import APPEND_ID

Make = Callable[..., JetStreamApplicationRecorder]
TOPIC_CREATED = "commands.instance:Instance.Created"
TOPIC_RENAMED = "commands.instance:Instance.Renamed"


def ev(originator_id: UUID | str, version: int, topic: str = TOPIC_CREATED, **state: object) -> StoredEvent:
    body = {"timestamp": "2026-01-02T03:04:05.123456Z", **state}
    return StoredEvent(originator_id, version, topic, orjson.dumps(body))


def stream_length(recorder: JetStreamApplicationRecorder) -> int:
    return recorder.max_notification_id() or 0


def spy_on_scans(recorder: JetStreamApplicationRecorder) -> list[dict[str, object]]:
    """The batch direct-get requests ``recorder`` sends from now on (a list that fills up)."""
    scanned: list[dict[str, object]] = []
    direct_batch = recorder._direct_batch

    async def spying(request: dict[str, object], timeout: float) -> object:
        scanned.append(request)
        return await direct_batch(request, timeout)

    recorder._direct_batch = spying  # type: ignore[assignment,method-assign]
    return scanned


# -- subject layout ----------------------------------------------------------------------------


def test_events_land_on_their_subjects_and_ids_keep_their_type(
    recorder: JetStreamApplicationRecorder,
) -> None:
    uid, sid = uuid4(), "host.compute 1/é"
    recorder.insert_events([ev(uid, 1), ev(sid, 1, "commands.host:Host.Registered")])
    msgs = recorder.read_messages(1, 10)
    prefix = recorder.layout.prefix
    assert [m.headers["Nats-Subject"] for m in msgs if m.headers] == [
        f"{prefix}.instance.{uid}.created",
        f"{prefix}.host.{encode_token(sid)}.registered",
    ]
    assert recorder.select_events(uid)[0].originator_id == uid
    assert recorder.select_events(sid)[0].originator_id == sid
    assert [n.originator_id for n in recorder.select_notifications(1, 10)] == [uid, sid]


def test_topic_filters_are_exact(recorder: JetStreamApplicationRecorder) -> None:
    a, b = uuid4(), uuid4()
    recorder.insert_events([ev(a, 1), ev(a, 2, TOPIC_RENAMED), ev(b, 1), ev(b, 2, "other:Instance.renamed")])
    renamed = recorder.select_notifications(1, 10, topics=[TOPIC_RENAMED])
    assert [(n.originator_id, n.id) for n in renamed] == [(a, 2)]
    both = recorder.select_notifications(1, 10, topics=[TOPIC_RENAMED, TOPIC_CREATED])
    assert [n.id for n in both] == [1, 2, 3]
    assert [n.id for n in recorder.select_notifications(2, 1, topics=[TOPIC_CREATED])] == [3]


# -- concurrency ---------------------------------------------------------------------------------


def race(calls: list[Callable[[], object]]) -> list[object]:
    """Run the calls in threads released together; each result or IntegrityError, in order."""
    barrier = threading.Barrier(len(calls))
    results: list[object] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = calls[i]()
        except IntegrityError as e:
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_concurrent_writers_on_one_aggregate_exactly_one_wins(
    make_recorder: Make, settings: Settings
) -> None:
    # Separate bridges and recorders: separate processes, each with its own cache of aggregate heads.
    writers = 6
    bridges = [NatsBridge(settings.nats_urls).start() for _ in range(writers)]
    try:
        make_recorder(settings)
        recorders = [JetStreamApplicationRecorder.from_settings(b, settings) for b in bridges]
        for round_ in range(10):
            oid = uuid4()
            recorders[0].insert_events([ev(oid, 1)])
            for r in recorders:
                assert len(r.select_events(oid)) == 1  # everyone loads version 1
            results = race([partial(r.append, [ev(oid, 2, TOPIC_RENAMED)]) for r in recorders])
            winners = [r for r in results if isinstance(r, list)]
            assert len(winners) == 1, (round_, results)
            assert all(isinstance(r, IntegrityError) for r in results if r is not winners[0])
            assert [e.originator_version for e in recorders[0].select_events(oid)] == [1, 2]
    finally:
        for b in bridges:
            b.close()


def test_a_stale_writer_is_rejected_not_merged(
    make_recorder: Make, settings: Settings, bridge: NatsBridge
) -> None:
    mine = make_recorder(settings)
    theirs = JetStreamApplicationRecorder.from_settings(bridge, settings)
    oid = uuid4()
    mine.insert_events([ev(oid, 1)])
    assert len(theirs.select_events(oid)) == 1
    mine.insert_events([ev(oid, 2, TOPIC_RENAMED)])
    # "theirs" still believes version 1 is the last one: its version 2 must be refused...
    with pytest.raises(ConcurrentAppendError):
        theirs.insert_events([ev(oid, 2, TOPIC_RENAMED, stale=True)])
    # ...and so must a version 3 that skips over what it has not seen? No: after the refusal it knows
    # version 2, so version 3 (decided on version 2) is accepted.
    theirs.insert_events([ev(oid, 3, TOPIC_RENAMED)])
    assert [e.originator_version for e in mine.select_events(oid)] == [1, 2, 3]
    assert b"stale" not in b"".join(e.state for e in mine.select_events(oid))


def test_reinserting_an_event_appends_nothing(
    make_recorder: Make, settings: Settings, bridge: NatsBridge
) -> None:
    recorder = make_recorder(settings)
    oid = uuid4()
    recorder.insert_events([ev(oid, 1), ev(oid, 2, TOPIC_RENAMED)])
    fresh = JetStreamApplicationRecorder.from_settings(bridge, settings)  # no cached head
    for r in (recorder, fresh):
        with pytest.raises(IntegrityError):
            r.insert_events([ev(oid, 2, TOPIC_RENAMED)])
        with pytest.raises(IntegrityError):
            r.insert_events([ev(oid, 1)])
    assert stream_length(recorder) == 2


def test_an_append_retried_with_its_key_returns_the_original_positions(
    recorder: JetStreamApplicationRecorder,
) -> None:
    a, b = uuid4(), uuid4()
    events = [ev(a, 1), ev(b, 1), ev(a, 2, TOPIC_RENAMED)]
    first = recorder.append(events, append_id="req-42")
    assert first == [1, 2, 3]
    assert recorder.append(events, append_id="req-42") == first
    with pytest.raises(IntegrityError):  # the same events under another key are a conflict
        recorder.append(events[1:2], append_id="req-1")
    assert stream_length(recorder) == 3
    with pytest.raises(IntegrityError):
        recorder.append(events, append_id="another-request")
    single = recorder.append([ev(b, 2, TOPIC_RENAMED)], append_id="req-43")
    assert recorder.append([ev(b, 2, TOPIC_RENAMED)], append_id="req-43") == single == [4]
    assert stream_length(recorder) == 4


def test_multi_aggregate_append_is_all_or_nothing(
    make_recorder: Make, settings: Settings, bridge: NatsBridge
) -> None:
    recorder = make_recorder(settings)
    other = JetStreamApplicationRecorder.from_settings(bridge, settings)
    host, instance = "compute-1", uuid4()
    recorder.insert_events([ev(host, 1, "commands.host:Host.Registered"), ev(instance, 1)])
    other.select_events(host)
    other.insert_events([ev(host, 2, "commands.host:Host.InstanceClaimed", by="other")])
    before = stream_length(recorder)
    with pytest.raises(IntegrityError):  # the host is stale in "recorder": nothing may be stored
        recorder.insert_events(
            [
                ev(instance, 2, "commands.instance:Instance.Scheduled"),
                ev(host, 2, "commands.host:Host.InstanceClaimed", by="me"),
            ]
        )
    assert stream_length(recorder) == before
    assert [e.originator_version for e in recorder.select_events(instance)] == [1]


def test_versions_must_increase_within_an_append(recorder: JetStreamApplicationRecorder) -> None:
    oid = uuid4()
    with pytest.raises(IntegrityError):
        recorder.insert_events([ev(oid, 2), ev(oid, 1)])
    assert stream_length(recorder) == 0


def test_more_than_1000_events_in_one_append_is_refused(recorder: JetStreamApplicationRecorder) -> None:
    oid = uuid4()
    with pytest.raises(TooManyEventsError, match="1000"):
        recorder.insert_events([ev(oid, v) for v in range(1, 1002)])
    assert recorder.insert_events([ev(oid, v) for v in range(1, 1001)]) == list(range(1, 1001))
    assert len(recorder.select_events(oid)) == 1000
    assert [e.originator_version for e in recorder.select_events(oid, gt=990, lte=995)] == [
        991,
        992,
        993,
        994,
        995,
    ]
    assert [e.originator_version for e in recorder.select_events(oid, desc=True, limit=2)] == [1000, 999]


# -- envelope ------------------------------------------------------------------------------------


def test_envelope_headers_carry_the_command_context(recorder: JetStreamApplicationRecorder) -> None:
    oid = uuid4()
    ctx = CommandContext(
        actor=Actor(user_id="alice", project_id="p-1", roles=("member", "reader")),
        request_id="req-abc",
        correlation_id="req-root",
        causation_id="x:3",
    )
    with acting(ctx):
        [position] = recorder.append([ev(oid, 1, name="vm1", class_version=2)])
    [msg] = recorder.read_messages(position, 1)
    h = msg.headers or {}
    assert h["ce-specversion"] == "1.0"
    assert h["ce-id"] == f"{oid}:1" == h["Nats-Msg-Id"]
    assert h["ce-source"] == "/stratus/test-cloud"
    assert h["ce-type"] == "stratus.instance.created"
    assert h["ce-subject"] == str(oid)
    assert h["ce-time"] == "2026-01-02T03:04:05.123456Z"
    assert h["content-type"] == "application/json"
    assert (h["ce-actoruser"], h["ce-actorproject"], h["ce-actorroles"]) == ("alice", "p-1", "member,reader")
    assert (h["ce-requestid"], h["ce-correlationid"], h["ce-causationid"]) == ("req-abc", "req-root", "x:3")
    assert h["ce-schemaversion"] == "2"
    assert h["ce-originatorversion"] == "1"
    assert h["ce-topic"] == TOPIC_CREATED
    assert msg.data == ev(oid, 1, name="vm1", class_version=2).state

    [envelope] = recorder.read_envelopes(position, 10)
    assert envelope.position == position
    assert envelope.actorroles == ("member", "reader")
    structured = orjson.loads(envelope.to_json())
    assert structured["data"] == {
        "timestamp": "2026-01-02T03:04:05.123456Z",
        "name": "vm1",
        "class_version": 2,
    }
    assert structured["position"] == position
    schema = json.loads(resources.files("schemas").joinpath("envelope.v1.json").read_text())
    jsonschema.validate(structured, schema, format_checker=jsonschema.FormatChecker())


def test_events_of_one_append_carry_the_context_of_their_own_command(
    recorder: JetStreamApplicationRecorder,
) -> None:
    """A scheduler's batch: one atomic append answering several requests, each event stamped with
    the context of the request it answers; an event not named takes the current context."""
    a, b, c = uuid4(), uuid4(), uuid4()
    alice = CommandContext(actor=Actor("alice", "p-1"), request_id="req-a", causation_id="a:1")
    bob = CommandContext(actor=Actor("bob", "p-2"), request_id="req-b", causation_id="b:1")
    current = CommandContext(actor=Actor("scheduler", "service"), request_id="req-s")
    with acting(current), acting_per_event({(str(a), 1): alice, (str(b), 1): bob, (str(b), 2): alice}):
        positions = recorder.append([ev(a, 1), ev(b, 1), ev(b, 2), ev(c, 1)])
    seen = [
        (h["ce-actoruser"], h["ce-requestid"], h["ce-causationid"], h[APPEND_ID])
        for h in (m.headers or {} for m in recorder.read_messages(positions[0], 4))
    ]
    append_id = seen[0][3]
    assert seen == [
        ("alice", "req-a", "a:1", append_id),
        ("bob", "req-b", "b:1", append_id),
        ("alice", "req-a", "a:1", append_id),
        ("scheduler", "req-s", "", append_id),
    ]
    with acting(current):  # outside, every event takes the current context again
        [position] = recorder.append([ev(a, 2)])
    [msg] = recorder.read_messages(position, 1)
    assert (msg.headers or {})["ce-requestid"] == "req-s"


def test_read_envelopes_with_a_subject_filter(recorder: JetStreamApplicationRecorder) -> None:
    a = uuid4()
    recorder.insert_events(
        [ev("compute-1", 1, "commands.host:Host.Registered"), ev(a, 1), ev(a, 2, TOPIC_RENAMED)]
    )
    instances = recorder.read_envelopes(1, 10, subject_filter=recorder.layout.kind_filter("instance"))
    assert [(e.position, e.type) for e in instances] == [
        (2, "stratus.instance.created"),
        (3, "stratus.instance.renamed"),
    ]
    assert [e.position for e in recorder.read_envelopes(3, 10)] == [3]


# -- waking up -----------------------------------------------------------------------------------


def test_subscription_and_wait_for_position_wake_up_on_commit(recorder: JetStreamApplicationRecorder) -> None:
    recorder.poll_interval = 30.0  # only the commit announcement can wake them in time
    oid = uuid4()
    assert recorder.wait_for_position(0, timeout=0.05) == 0
    woke_at: list[float] = []

    def waiter() -> None:
        recorder.wait_for_position(0, timeout=5.0)
        woke_at.append(time.monotonic())

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.1)
    with recorder.subscribe(gt=0) as subscription:
        committed_at = time.monotonic()
        recorder.insert_events([ev(oid, 1)])
        first = next(subscription)
        seen_at = time.monotonic()
        t.join()
    assert first.originator_id == oid and first.id == 1
    assert seen_at - committed_at < 0.5
    assert woke_at and woke_at[0] - committed_at < 0.5


def test_a_cancelled_wait_for_position_returns_when_woken(recorder: JetStreamApplicationRecorder) -> None:
    """A waiter whose ``cancel`` is set returns at the wake-up, long before its timeout, with no new
    position (how ``stratus watch`` ends its streams on SIGTERM)."""
    recorder.poll_interval = 60.0  # no poll wakes it
    cancel = threading.Event()
    answered: list[int] = []
    t = threading.Thread(
        target=lambda: answered.append(recorder.wait_for_position(0, timeout=60.0, cancel=cancel))
    )
    t.start()
    time.sleep(0.2)
    assert not answered  # waiting
    cancel.set()
    recorder.wake_waiters()
    t.join(timeout=20)
    assert answered == [0]


def test_bridge_close_cancels_waiting_calls(settings: Settings, make_recorder: Make) -> None:
    make_recorder(settings)
    b = NatsBridge(settings.nats_urls).start()
    r = JetStreamApplicationRecorder.from_settings(b, settings)
    errors: list[BaseException] = []

    async def forever() -> None:
        await threading_event_never()

    def call() -> None:
        try:
            b.run(forever, timeout=60)
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=call)
    t.start()
    time.sleep(0.1)
    started = time.monotonic()
    b.close()
    t.join(5)
    assert not t.is_alive() and errors
    assert time.monotonic() - started < 3
    assert r.bridge.closed


async def threading_event_never() -> None:
    import asyncio

    await asyncio.Event().wait()


def test_uuid_originator_ids_are_given_back_as_uuids(recorder: JetStreamApplicationRecorder) -> None:
    oid = uuid.uuid5(uuid.NAMESPACE_URL, "x")
    recorder.insert_events([ev(oid, 1)])
    [n] = recorder.select_notifications(None, 1)
    assert isinstance(n.originator_id, UUID) and n.originator_id == oid


def test_prefetched_heads_serve_the_first_load_of_each_aggregate(
    recorder: JetStreamApplicationRecorder, make_recorder: Make, settings: Settings
) -> None:
    one, three, missing = uuid4(), uuid4(), uuid4()
    recorder.append([ev(one, 1)])
    recorder.append([ev(three, 1), ev(three, 2, topic=TOPIC_RENAMED), ev(three, 3, topic=TOPIC_RENAMED)])
    other = make_recorder(settings)  # another process on the stream
    with recorder.prefetched([one, three, missing]):
        other.append([ev(one, 2, topic=TOPIC_RENAMED)])  # after the heads were read; not seen here
        recorder.append([ev(three, 4, topic=TOPIC_RENAMED)])  # seen here (this process's own)
        # the first load of each starts from its prefetched head: a snapshot of that moment, unless
        # this process has seen a newer event of it stored: never older than that
        assert [e.originator_version for e in recorder.select_events(one)] == [1]
        assert [e.originator_version for e in recorder.select_events(three)] == [1, 2, 3, 4]
        assert recorder.select_events(missing) == []
        # a second load reads the log again
        assert [e.originator_version for e in recorder.select_events(one)] == [1, 2]
    assert [e.originator_version for e in recorder.select_events(one, gt=1)] == [2]


def test_loads_a_prefetched_head_answers_make_no_hop(recorder: JetStreamApplicationRecorder) -> None:
    """A head read ahead answers alone for an aggregate that does not exist, one with nothing after
    the cached version, and one whose only new event is the head: those loads hand nothing to the
    bridge's loop (a command loading several aggregates pays one hop for them all)."""
    one, three, missing = uuid4(), uuid4(), uuid4()
    recorder.append([ev(one, 1)])
    recorder.append([ev(three, 1), ev(three, 2, topic=TOPIC_RENAMED), ev(three, 3, topic=TOPIC_RENAMED)])
    bridge = recorder.bridge
    with recorder.prefetched([one, three, missing]):
        hops = bridge.hops
        assert [e.originator_version for e in recorder.select_events(one)] == [1]
        assert [e.originator_version for e in recorder.select_events(three, gt=2)] == [3]
        assert recorder.select_events(missing) == []
        assert bridge.hops == hops
    with recorder.prefetched([three]):
        hops = bridge.hops
        assert recorder.select_events(three, gt=3) == []
        assert bridge.hops == hops
    with recorder.prefetched([three]):
        hops = bridge.hops
        assert [e.originator_version for e in recorder.select_events(three, gt=1)] == [2, 3]  # a read
        assert bridge.hops == hops + 1


def test_a_cached_aggregate_catches_up_from_where_it_was_seen(
    recorder: JetStreamApplicationRecorder, make_recorder: Make, settings: Settings
) -> None:
    """Loading the events after a version this process saw stored reads from that version's position
    on: only the newer events, whatever else the stream holds, however far behind it is."""
    other = make_recorder(settings)  # another process on the same stream
    a, noise = uuid4(), uuid4()
    recorder.append([ev(a, 1), ev(a, 2, topic=TOPIC_RENAMED)])
    for v in range(3, 7):
        other.append(
            [ev(a, v, topic=TOPIC_RENAMED), ev(noise, v - 2, topic=TOPIC_RENAMED if v > 3 else TOPIC_CREATED)]
        )
    scanned = spy_on_scans(recorder)
    assert [e.originator_version for e in recorder.select_events(a, gt=2)] == [3, 4, 5, 6]
    [read] = scanned
    assert read["batch"] == 4 and int(str(read["seq"])) > 2  # from after version 2's position, 4 events
    scanned.clear()
    assert [e.originator_version for e in recorder.select_events(a, gt=1)] == [2, 3, 4, 5, 6]  # not seen
    assert scanned[0]["seq"] == 1  # version 1's position is not known here: from the start


def test_a_cached_aggregate_catches_up_from_its_version_after_newer_heads_were_seen(
    recorder: JetStreamApplicationRecorder, make_recorder: Make, settings: Settings
) -> None:
    """Losing a race refreshes the aggregate's head to the winner's; the copy cached at this
    process's own version still reads only what the other writer appended, from that version's
    position (not the aggregate from its start: a quota usage epoch that two API workers charge in
    turn would otherwise be re-read whole after every lost race)."""
    other = make_recorder(settings)
    a = uuid4()
    recorder.append([ev(a, 1), ev(a, 2, topic=TOPIC_RENAMED)])
    other.append([ev(a, 3, topic=TOPIC_RENAMED), ev(a, 4, topic=TOPIC_RENAMED)])
    with pytest.raises(ConcurrentAppendError):
        recorder.append([ev(a, 3, topic=TOPIC_RENAMED)])  # lost: the head seen is now version 4
    assert recorder.known_version(a) == 4
    scanned = spy_on_scans(recorder)
    assert [e.originator_version for e in recorder.select_events(a, gt=2)] == [3, 4]
    [read] = scanned
    assert read["batch"] == 2 and int(str(read["seq"])) > 2  # from after version 2's position


def test_a_follower_at_the_last_announcement_waits_without_asking_the_server(
    recorder: JetStreamApplicationRecorder, make_recorder: Make, settings: Settings
) -> None:
    """Commits announce their positions: a follower that has read up to the last one waits for the
    next announcement instead of reading the stream's state (a JetStream API request and an
    advisory) every time it catches up."""
    recorder.poll_interval = 30.0
    other = make_recorder(settings)
    assert recorder.wait_for_position(0, timeout=0.05) == 0  # subscribes to the announcements
    other.append([ev(uuid4(), 1)])
    first = recorder.wait_for_position(0, timeout=5.0)
    assert first >= 1
    asked: list[int] = []
    stream_state = recorder.max_notification_id

    def counting() -> int | None:
        asked.append(1)
        return stream_state()

    recorder.max_notification_id = counting  # type: ignore[method-assign]
    result: list[int] = []
    t = threading.Thread(target=lambda: result.append(recorder.wait_for_position(first, timeout=5.0)))
    t.start()
    time.sleep(0.1)
    other.append([ev(uuid4(), 1)])
    t.join(6)
    assert result and result[0] > first
    assert asked == []
    # a wait that ends with nothing announced asks the server once (commits nobody announced)
    assert recorder.wait_for_position(result[0], timeout=0.05) == result[0]
    assert asked == [1]


def test_a_lost_race_reads_only_the_heads_not_the_aggregates(
    recorder: JetStreamApplicationRecorder, make_recorder: Make, settings: Settings
) -> None:
    """The loser of a race publishes message ids (aggregate:version) the winner already stored, and
    the server rejects the batch as a duplicate. That is a conflict, not a sign that this append was
    stored before: the loser refreshes the heads (one get each) and does not scan the aggregates for
    its own append."""
    other = make_recorder(settings)
    a, b = uuid4(), uuid4()
    recorder.append([ev(a, 1), ev(b, 1)])
    other.append([ev(a, 2, topic=TOPIC_RENAMED), ev(b, 2, topic=TOPIC_RENAMED)])
    scanned = spy_on_scans(recorder)
    with pytest.raises(ConcurrentAppendError):
        recorder.append([ev(a, 2, topic=TOPIC_RENAMED), ev(b, 2, topic=TOPIC_RENAMED)])
    assert scanned == []
    assert recorder.known_version(a) == 2 and recorder.known_version(b) == 2


def test_reading_the_whole_log_sends_no_subject_filter(recorder: JetStreamApplicationRecorder) -> None:
    """A filtered batch read makes nats-server count the remaining matches over every subject of the
    stream; the whole log is read unfiltered (same messages), a kind or aggregate with its filter."""
    a, b = uuid4(), uuid4()
    recorder.append([ev(a, 1), ev(b, 1), ev(a, 2, topic=TOPIC_RENAMED)])
    scanned = spy_on_scans(recorder)
    everything = recorder.read_messages(1, 10)
    assert [int((m.headers or {})["Nats-Sequence"]) for m in everything] == [1, 2, 3]
    assert "next_by_subj" not in scanned[-1]
    assert [m.originator_version for m in recorder.select_notifications(2, 10)] == [1, 2]
    assert "next_by_subj" not in scanned[-1]
    mine = recorder.read_messages(1, 10, subject_filter=recorder.layout.aggregate_filter(a))
    assert [int((m.headers or {})["Nats-Sequence"]) for m in mine] == [1, 3]
    assert scanned[-1]["next_by_subj"] == recorder.layout.aggregate_filter(a)


# -- replicas behind the log ---------------------------------------------------------------------


def lagging_replica(recorder: JetStreamApplicationRecorder, *, heads: int = 0, scans: int = 0) -> list[str]:
    """Direct gets answered as by a follower that has not stored an aggregate's newest event yet: its
    head is the one before (the first ``heads`` times), its batches stop short of it (the first
    ``scans`` times). (A replicated stream's direct gets go to any of its replicas; a follower
    restarting after a node failure lags for seconds.) Returns the answers given, a list that fills up."""
    given: list[str] = []
    last_message, direct_batch = recorder.last_message, recorder._direct_batch

    async def behind_last(subject_filter: str, timeout: float) -> object:
        msg = await last_message(subject_filter, timeout)
        if msg is None or given.count("old head") >= heads:
            given.append("head")
            return msg
        seq = int(msg.headers["Nats-Sequence"])
        earlier, _ = await direct_batch({"seq": 1, "batch": seq - 1, "next_by_subj": subject_filter}, timeout)
        given.append("old head")
        return earlier[-1] if earlier else None

    async def behind_batch(request: dict[str, object], timeout: float) -> object:
        msgs, end = await direct_batch(request, timeout)
        if "next_by_subj" not in request or len(msgs) < 2 or given.count("short") >= scans:
            return msgs, end
        given.append("short")
        return msgs[:-1], end

    recorder.last_message = behind_last  # type: ignore[method-assign]
    recorder._direct_batch = behind_batch  # type: ignore[assignment,method-assign]
    return given


def test_a_load_never_answers_older_than_an_event_seen_stored(
    recorder: JetStreamApplicationRecorder, make_recorder: Make, settings: Settings
) -> None:
    """A worker that consumed an event and loads its aggregate gets a state that includes it: an
    answer from a replica behind that event is asked again (a worker that acted on the state from
    before a ``Scheduled`` event acknowledged it as "not mine" and left the server in BUILD)."""
    worker = make_recorder(settings)
    a = uuid4()
    recorder.append([ev(a, 1), ev(a, 2, topic=TOPIC_RENAMED), ev(a, 3, topic=TOPIC_RENAMED)])
    [delivered] = [m for m in worker.read_messages(1, 10) if m.headers["ce-originatorversion"] == "3"]
    worker.observe(delivered)  # as its consumer does for each delivery
    given = lagging_replica(worker, heads=2)
    assert [e.originator_version for e in worker.select_events(a)] == [1, 2, 3]
    assert given == ["old head", "old head", "head"]
    given = lagging_replica(worker, heads=1)
    assert [e.originator_version for e in worker.select_events(a, desc=True, limit=1)] == [3]
    assert given == ["old head", "head"]


def test_a_scan_that_stops_short_of_the_head_is_asked_again(
    recorder: JetStreamApplicationRecorder, make_recorder: Make, settings: Settings
) -> None:
    """The head and the events before it may come from different replicas: a scan that does not
    reach the head it was asked up to is asked again, not answered with a gap."""
    reader = make_recorder(settings)
    a = uuid4()
    recorder.append([ev(a, 1), ev(a, 2, topic=TOPIC_RENAMED), ev(a, 3, topic=TOPIC_RENAMED)])
    given = lagging_replica(reader, scans=1)
    assert [e.originator_version for e in reader.select_events(a)] == [1, 2, 3]
    assert given == ["head", "short", "head"]


def test_a_replica_that_stays_behind_is_unavailable_not_an_old_state(
    make_recorder: Make, settings: Settings
) -> None:
    writer = make_recorder(settings)
    worker = make_recorder(settings, timeout=1.0)
    a = uuid4()
    writer.append([ev(a, 1), ev(a, 2, topic=TOPIC_RENAMED)])
    [delivered] = [m for m in worker.read_messages(1, 10) if m.headers["ce-originatorversion"] == "2"]
    worker.observe(delivered)
    lagging_replica(worker, heads=1_000)
    with pytest.raises(EventStoreUnavailable, match="replica behind"):
        worker.select_events(a)
