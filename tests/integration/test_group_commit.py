"""Group commit: concurrent creates in one project, in one process (the API's threads), are decided
together and appended in one atomic append, each keeping its own outcome and its own context."""

from __future__ import annotations

from typing import Any

import pytest

from commands.errors import QuotaExceeded
from commands.servers.create import MOST_EVENTS_PER_CREATE_GROUP, CreateServer
from commands.usage import usage_aggregate_id
from stratus.context import Actor, CommandContext, acting
from stratus.eventstore import MAX_EVENTS_PER_APPEND, JetStreamApplicationRecorder
from tests.fixtures.commands import M1_BIG, M1_THREE, M1_TINY
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.operations import Operations
from tests.fixtures.quotas import assert_usage_consistent, at_once

pytestmark = pytest.mark.flavors(M1_TINY, M1_THREE, M1_BIG)


def test_concurrent_creates_in_one_process_share_appends_and_keep_their_own_outcomes(
    handlers: Handlers, recorder: JetStreamApplicationRecorder, database_url: str
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
    assert handlers.creates.groups < 24  # some creates were decided together
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
    handlers: Handlers, database_url: str
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
