"""Group commit on its own: who joins which group, a group's weight, and a failing decision."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest

from commands.group_commit import GroupCommit


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
