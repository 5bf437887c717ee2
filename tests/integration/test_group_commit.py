"""Group commit: concurrent creates in one project, in one process (the API's threads), are decided
together and appended in one atomic append, each keeping its own outcome and its own context."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from commands.errors import QuotaExceeded
from commands.group_commit import GroupCommit
from commands.handlers import MOST_EVENTS_PER_CREATE_GROUP, CreateServer, Handlers
from commands.operations import Operations
from commands.usage import usage_aggregate_id
from stratus.context import Actor, CommandContext, acting
from stratus.eventstore import MAX_EVENTS_PER_APPEND, JetStreamApplicationRecorder
from tests.integration.test_quotas import app, assert_usage_consistent, at_once, handlers  # noqa: F401  (fixtures)


def test_requests_arriving_while_a_group_is_decided_form_the_next_group() -> None:
    groups: list[list[int]] = []
    first_started = threading.Event()
    release = threading.Event()

    def decide(items: list[int]) -> list[int | BaseException]:
        groups.append(items)
        if len(groups) == 1:
            first_started.set()
            assert release.wait(10)
        return [ValueError(f"odd {i}") if i % 2 else i * 10 for i in items]

    commit: GroupCommit[int, int] = GroupCommit(decide)
    results: dict[int, Any] = {}

    def submit(i: int) -> None:
        try:
            results[i] = commit.submit("k", i)
        except ValueError as e:
            results[i] = str(e)

    leader = threading.Thread(target=submit, args=(0,))
    leader.start()
    assert first_started.wait(10)
    waiting = [threading.Thread(target=submit, args=(i,)) for i in range(1, 7)]
    for t in waiting:
        t.start()
    time.sleep(0.2)  # all six queue behind the first group
    release.set()
    for t in [leader, *waiting]:
        t.join(10)
    assert groups[0] == [0] and sorted(groups[1]) == [1, 2, 3, 4, 5, 6] and len(groups) == 2
    assert results == {0: 0, 1: "odd 1", 2: 20, 3: "odd 3", 4: 40, 5: "odd 5", 6: 60}
    assert commit.submit("k", 8) == 80  # an idle key: decided at once, alone
    assert commit.groups == 3


def test_a_group_carries_no_more_than_its_weight_allows() -> None:
    groups: list[list[int]] = []
    first_started, release = threading.Event(), threading.Event()

    def decide(items: list[int]) -> Sequence[int | BaseException]:
        groups.append(items)
        if len(groups) == 1:
            first_started.set()
            assert release.wait(10)
        return items

    commit: GroupCommit[int, int] = GroupCommit(decide, weight=lambda i: i, max_weight=900)
    leader = threading.Thread(target=commit.submit, args=("k", 1))
    leader.start()
    assert first_started.wait(10)
    waiting = [threading.Thread(target=commit.submit, args=("k", w)) for w in (400, 400, 400, 2000, 100)]
    for t in waiting:
        t.start()
        time.sleep(0.05)  # queued in this order
    release.set()
    for t in [leader, *waiting]:
        t.join(10)
    assert groups == [[1], [400, 400], [400], [2000], [100]]  # never over 900; a heavy one alone


def test_a_failing_decision_fails_its_whole_group_and_the_next_group_still_runs() -> None:
    calls: list[list[str]] = []

    def decide(items: list[str]) -> Sequence[str | BaseException]:
        calls.append(items)
        if "boom" in items:
            raise RuntimeError("the log is away")
        return items

    commit: GroupCommit[str, str] = GroupCommit(decide)
    with pytest.raises(RuntimeError, match="the log is away"):
        commit.submit("k", "boom")
    assert commit.submit("k", "fine") == "fine"


def test_concurrent_creates_in_one_process_share_appends_and_keep_their_own_outcomes(
    handlers: Handlers, recorder: JetStreamApplicationRecorder, database_url: str  # noqa: F811
) -> None:
    """24 threads of one API process create in a project whose quota is 10 instances: exactly 10
    succeed, the rest get Nova's 403 message; the creates were appended in fewer appends than
    creates; every server's Requested event names the request and user that asked for it."""

    def create(i: int) -> Any:
        ctx = CommandContext(actor=Actor(f"user-{i}", "p1", ("member",)), request_id=f"req-client-{i}")
        with acting(ctx):
            return handlers.create_server(CreateServer(f"vm-{i}", "p1", f"user-{i}", "1"))

    results = at_once(24, create)
    created = {i: r for i, r in enumerate(results) if not isinstance(r, Exception)}
    refused = [r for r in results if isinstance(r, Exception)]
    assert len(created) == 10
    assert all(isinstance(e, QuotaExceeded) and "Quota exceeded for instances" in e.message for e in refused)
    assert handlers._creates.groups < 24  # some creates were decided together
    assert assert_usage_consistent(handlers, database_url, "p1")["instances"] == 10
    for i, result in created.items():
        mine = recorder.layout.aggregate_filter(result.id)
        [requested] = recorder.read_envelopes(1, 10, subject_filter=mine)
        assert (requested.requestid, requested.actoruser) == (f"req-client-{i}", f"user-{i}")
    charges = recorder.read_envelopes(1, 100, subject_filter=recorder.layout.aggregate_filter(
        usage_aggregate_id("p1", 0)))  # fmt: skip
    charged_by = sorted(e.requestid for e in charges if e.type.endswith("instancecharged"))
    assert charged_by == sorted(f"req-client-{i}" for i in created)


def test_concurrent_large_multi_creates_never_make_an_append_too_large(
    handlers: Handlers, database_url: str  # noqa: F811
) -> None:
    """A NATS atomic batch carries at most 1000 events: creates of 200 servers each (a charge and a
    request per server: 400 events; 600 with addresses) are not grouped past that, and all succeed
    (three of them in one group would have been refused whole)."""
    Operations(handlers.app).set_quota("p1", {"instances": -1, "cores": -1, "ram": -1}, {})

    def create(i: int) -> Any:
        return handlers.create_server(CreateServer(f"big-{i}", "p1", "u1", "1", count=200))

    results = at_once(4, create)
    assert all(not isinstance(r, Exception) and len(r.ids) == 200 for r in results), results
    assert assert_usage_consistent(handlers, database_url, "p1")["instances"] == 800
    assert MOST_EVENTS_PER_CREATE_GROUP + 2 <= MAX_EVENTS_PER_APPEND  # and an epoch's close + open
