"""The event stream and the auditor's views are safe against members.

Before: an open stream was never re-authorized (a revoked token or a disabled user kept receiving
events), one user could hold every stream thread, and history, state and the stream showed members
the hosts and fault details that the server view hides from them. Then: the token was re-checked
only between passes over the log (a backlog went out whole after a revocation), a move's destination
host still reached members, the streams could take every thread of ``stratus watch``, and a message
whose payload did not decode ended every stream that met it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from falcon import testing
from psycopg_pool import ConnectionPool

from api import watch
from api.auth import Authenticator
from api.identity.tokens import TokenSigner, load_or_create_key
from api.readmodel import ReadModel, open_pool
from commands.host import host_aggregate_id
from commands.hosts.register import RegisterHost
from commands.servers.moves import MigrateServer
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import FailInstance, FinishSpawning, StartSpawning
from stratus.config import Settings
from stratus.eventstore import envelope
from stratus.health import READYZ
from tests.fixtures.api import ADMIN, P1, Stack
from tests.fixtures.facades.migration import MigrationHandlers
from tests.fixtures.processes import free_port, serving
from tests.fixtures.watch import Http, create_server, read_events, serving_streams

LIMITS = watch.StreamLimits(per_user=2, total=10, recheck_seconds=0.2)


@pytest.fixture
def guarded(stack: Stack, api_settings: Settings) -> Iterator[Http]:
    """The stream as ``stratus watch`` composes it (re-authorized, capped), on a threaded WSGI server."""
    pool = open_pool(api_settings.database_url or "")
    authenticator = Authenticator(stack.signer, ReadModel(pool, 5.0))
    events = watch.Events(stack.log, heartbeat=0.2, authenticator=authenticator, limits=LIMITS)
    with serving_streams(stack.app, events) as http:
        yield http
    pool.close()


def _until_ended(resp: object, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:
        line = resp.readline().decode()  # type: ignore[attr-defined]
        if not line:
            return seen
        seen += line
    raise AssertionError(f"the stream did not end: {seen[-300:]}")


def test_a_stream_ends_when_its_token_is_revoked(stack: Stack, guarded: Http) -> None:
    token = stack.identities.persona("rev", "p1", "member")
    resp = guarded.open("/v2.1/stratus/events", token)
    assert resp.status == 200
    r = stack.client.simulate_delete(
        "/identity/v3/auth/tokens", headers={**token, "X-Subject-Token": token["X-Auth-Token"]}
    )
    assert r.status_code == 204
    assert "event: stratus.stream.ended" in _until_ended(resp)


def test_a_stream_ends_when_its_user_is_disabled(stack: Stack, guarded: Http) -> None:
    token = stack.identities.persona("dis", "p1", "member")
    resp = guarded.open("/v2.1/stratus/events", token)
    assert resp.status == 200
    uid = stack.user_id("dis")
    r = stack.request("PATCH", f"/identity/v3/users/{uid}", ADMIN, json={"user": {"enabled": False}})
    assert r.status_code == 200
    assert "unauthorized" in _until_ended(resp)


def test_a_stream_ends_when_its_user_loses_the_role(stack: Stack, guarded: Http) -> None:
    token = stack.identities.persona("demoted", "p1", "member")
    resp = guarded.open("/v2.1/stratus/events", token)
    assert resp.status == 200
    user, project = stack.user_id("demoted"), stack.project_id("p1")
    (role,) = stack.get("/identity/v3/roles?name=member", ADMIN).json["roles"]
    r = stack.request("DELETE", f"/identity/v3/projects/{project}/users/{user}/roles/{role['id']}", ADMIN)
    assert r.status_code == 204, r.text
    assert '{"reason": "unauthorized"}' in _until_ended(resp)


def test_one_user_cannot_hold_every_stream(stack: Stack, guarded: Http) -> None:
    mine = stack.headers(P1)
    first = guarded.open("/v2.1/stratus/events", mine)
    second = guarded.open("/v2.1/stratus/events", mine)
    assert first.status == second.status == 200
    third = guarded.open("/v2.1/stratus/events", mine)
    assert third.status == 429 and int(third.getheader("Retry-After") or 0) > 0
    third.close()
    assert guarded.open("/v2.1/stratus/events", stack.headers(ADMIN)).status == 200  # others are not held up
    first.close()  # the server notices at its next write (a keep-alive), and frees the place
    deadline = time.monotonic() + 10
    while True:
        again = guarded.open("/v2.1/stratus/events", mine)
        if again.status == 200:
            break
        again.close()
        assert time.monotonic() < deadline, "the closed stream's place was never freed"
        time.sleep(0.2)


def test_members_see_no_hosts_or_fault_details_in_history_state_and_stream(
    stack: Stack, guarded: Http
) -> None:
    flavor, _ = stack.flavor()
    stack.handlers.register_host(RegisterHost("secret-host-7", vcpus=8, memory_mb=16384, disk_gb=100))
    server, created = create_server(stack, P1, flavor)
    placed = stack.handlers.place_instance(PlaceInstance(server, "secret-host-7")).position
    failed = stack.handlers.fail_instance(
        FailInstance(server, "compute.spawn_failed", "Spawning failed", "Traceback: libvirt said no")
    ).position
    # history
    member = stack.get(f"/v2.1/stratus/history/server/{server}", P1, after=failed).json["events"]
    admin = stack.get(f"/v2.1/stratus/history/server/{server}", ADMIN, after=failed).json["events"]
    assert "secret-host-7" not in str(member) and "Traceback" not in str(member)
    assert "secret-host-7" in str(admin) and "Traceback" in str(admin)
    scheduled = next(e for e in member if e["type"] == "stratus.instance.scheduled")
    assert scheduled["data"]["host"] is None
    # state as of the placement
    state = stack.get(f"/v2.1/stratus/state/server/{server}?as_of={placed}", P1).json["state"]
    assert state["host"] is None
    assert stack.get(f"/v2.1/stratus/state/server/{server}?as_of={placed}", ADMIN).json["state"]["host"]
    # the stream
    resp = guarded.open(f"/v2.1/stratus/events?after={created - 1}&type=server", stack.headers(P1))
    streamed = read_events(resp, 3)
    resp.close()
    assert "secret-host-7" not in str(streamed) and "Traceback" not in str(streamed)
    assert [e["data"]["type"] for e in streamed][-1] == "stratus.instance.faulted"


# -- what members see of a move: its destination is a host too ------------------------------------
def test_members_see_no_host_of_a_move_in_history_state_or_stream(stack: Stack, guarded: Http) -> None:
    """A move's ``dest`` (MigrationScheduled, MigratedFromSource, ...) named the destination host to
    members; the past state's migration carried it too."""
    flavor, _ = stack.flavor()
    for host in ("src-host-3", "dst-host-9"):
        stack.handlers.register_host(RegisterHost(host, vcpus=8, memory_mb=16384, disk_gb=100))
    server, created = create_server(stack, P1, flavor)
    stack.handlers.place_instance(PlaceInstance(server, "src-host-3"))
    stack.handlers.start_spawning(StartSpawning(server, "src-host-3"))
    spawned = stack.handlers.finish_spawning(FinishSpawning(server, 1)).position
    moves = MigrationHandlers(stack.handlers)
    moves.migrate(MigrateServer(server))
    moved = moves.place(server, "dst-host-9").position
    path = f"/v2.1/stratus/history/server/{server}"
    member = stack.get(path, P1, after=moved).json["events"]
    admin = stack.get(path, ADMIN, after=moved).json["events"]
    assert "dst-host-9" in str(admin) and "src-host-3" in str(admin)
    assert "dst-host-9" not in str(member) and "src-host-3" not in str(member)
    scheduled = next(e for e in member if e["type"] == "stratus.instance.migrationscheduled")
    assert scheduled["data"]["dest"] is None and scheduled["data"]["source"] is None
    # the state as of the move: the migration's hosts hidden, the server view's hostId shown
    state_path = f"/v2.1/stratus/state/server/{server}?as_of={moved}"
    state = stack.get(state_path, P1).json["state"]
    assert "dst-host-9" not in str(state) and "src-host-3" not in str(state)
    assert state["migration"]["dest"] is None
    seen = stack.get(f"/v2.1/servers/{server}", P1, after=spawned).json["server"]
    assert state["hostId"] == seen["hostId"] != ""
    assert stack.get(state_path, ADMIN).json["state"]["migration"]["dest"] == "dst-host-9"
    # the stream
    resp = guarded.open(f"/v2.1/stratus/events?after={created - 1}&type=server", stack.headers(P1))
    streamed = read_events(resp, len(member))
    resp.close()
    assert "dst-host-9" not in str(streamed) and "src-host-3" not in str(streamed)
    assert streamed[-1]["data"]["type"] == "stratus.instance.migrationscheduled"


# -- re-authorization between the events of a backlog ---------------------------------------------
@dataclasses.dataclass
class Rechecks:
    """What the re-checks of the ``at_once`` stream depend on: the pool they read the identity read
    model through, and how far their clock runs ahead of the API's."""

    pool: ConnectionPool
    ahead: dt.timedelta = dt.timedelta(0)


@pytest.fixture
def at_once(stack: Stack, api_settings: Settings) -> Iterator[Rechecks]:
    """The stream re-checking its token before every message (``recheck_seconds=0``), called as WSGI."""
    rechecks = Rechecks(open_pool(api_settings.database_url or ""))
    key = load_or_create_key(api_settings.token_key_path)
    signer = TokenSigner(key, clock=lambda: dt.datetime.now(dt.UTC) + rechecks.ahead)
    authenticator = Authenticator(signer, ReadModel(rechecks.pool, 5.0))
    limits = watch.StreamLimits(per_user=2, total=10, recheck_seconds=0.0)
    watch.add_route(stack.app, stack.log, heartbeat=0.2, authenticator=authenticator, limits=limits)
    yield rechecks
    rechecks.pool.close()


@contextlib.contextmanager
def _wsgi_stream(stack: Stack, token: dict[str, str], query: str = "") -> Iterator[Iterator[bytes]]:
    """The stream called as WSGI (its status checked: 200), closed at the end of the block."""
    environ = testing.create_environ(path="/v2.1/stratus/events", query_string=query, headers=token)
    started: list[str] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        started.append(status)
        return None

    body = stack.app(environ, start_response)
    try:
        assert started == ["200 OK"]
        yield iter(body)
    finally:
        body.close()  # type: ignore[attr-defined]


@contextlib.contextmanager
def _backlog(stack: Stack, token: dict[str, str]) -> Iterator[Iterator[bytes]]:
    """A stream of four servers' creations, read up to the first one's."""
    flavor, _ = stack.flavor(name=f"backlog-{uuid4().hex[:8]}")
    _, before = create_server(stack, token, flavor)
    for _ in range(3):
        create_server(stack, token, flavor)
    with _wsgi_stream(stack, token, f"after={before - 1}&type=server") as chunks:
        assert next(chunks).startswith(b"retry:")
        assert b"stratus.instance.requested" in next(chunks)  # the first server's
        yield chunks


def test_a_stream_ends_inside_a_backlog_once_its_token_is_revoked(stack: Stack, at_once: Rechecks) -> None:
    """The token was re-checked only between passes over the log: a revoked token kept receiving
    a whole backlog (up to the end of the log as it was when the pass began)."""
    token = stack.identities.persona("backlog", "p1", "member")
    with _backlog(stack, token) as chunks:
        r = stack.client.simulate_delete(
            "/identity/v3/auth/tokens", headers={**token, "X-Subject-Token": token["X-Auth-Token"]}
        )
        assert r.status_code == 204
        ended = next(chunks)  # not the three other servers' creations
        assert ended == b'event: stratus.stream.ended\ndata: {"reason": "unauthorized"}\n\n'
        assert next(chunks, None) is None
    # its place was given back: with a new token the user opens as many streams as allowed (2)
    again = {"X-Auth-Token": stack.identities.token("backlog", "backlog-password", "p1")}
    with _wsgi_stream(stack, again), _wsgi_stream(stack, again):
        pass


def test_a_stream_ends_when_its_token_expires(stack: Stack, at_once: Rechecks) -> None:
    with _backlog(stack, stack.headers(P1)) as chunks:
        at_once.ahead = stack.signer.ttl + dt.timedelta(seconds=1)  # the token's life is over
        ended = next(chunks)
        assert ended == b'event: stratus.stream.ended\ndata: {"reason": "unauthorized"}\n\n'
        assert next(chunks, None) is None


def test_a_stream_ends_when_its_token_cannot_be_checked(stack: Stack, at_once: Rechecks) -> None:
    """A re-check that could not reach the identity read model raised out of the stream (a 503
    error in the middle of a 200's body, and a traceback in the server's log)."""
    with _backlog(stack, stack.headers(P1)) as chunks:
        at_once.pool.close()  # the re-checks' read model is gone
        ended = next(chunks)
        assert ended == b'event: stratus.stream.ended\ndata: {"reason": "unavailable"}\n\n'
        assert next(chunks, None) is None


# -- a global cap under the thread pool -----------------------------------------------------------
def test_stratus_watch_leaves_threads_to_the_api(
    stack: Stack, api_settings: Settings, tmp_path: Path
) -> None:
    """``stratus watch`` with 4 threads let 4 streams (of one user: the per-user cap is 4) take every
    thread: the process answered nothing else."""
    # STRATUS_WATCH_THREADS=4, read by `stratus watch` and by its app
    four = dataclasses.replace(api_settings, watch_threads=4)
    mine = stack.headers(P1)
    for http in _stratus_watch_as_set(four, tmp_path):
        opened = []
        for _ in range(4):
            resp = http.open("/v2.1/stratus/events", mine)
            opened.append(resp)
            if resp.status != 200:
                break
        refused = opened[-1]
        assert refused.status == 429, [r.status for r in opened]
        assert int(refused.getheader("Retry-After") or 0) > 0
        assert json.loads(refused.read())["overLimit"]["code"] == 429
        assert len(opened) == 3  # two streams: two of the four threads stay with the API
        answer = http.open("/v2.1/flavors", mine)
        assert answer.status == 200
        for resp in opened:
            resp.close()


def _stratus_watch_as_set(settings: Settings, tmp_path: Path) -> Iterator[Http]:
    """``stratus watch`` as the environment sets it up (no --threads)."""
    port = free_port()
    argv = [sys.executable, "-m", "processes.cli", "watch", "--bind", f"127.0.0.1:{port}"]
    with serving(argv, settings, port, tmp_path / "watch.log", ready=READYZ):
        yield Http(port)


# -- messages on the log that are not (readable) events -------------------------------------------
def _publish(stack: Stack, like: int, aggregate: str, version: int, data: bytes, **changes: str) -> int:
    """A message on ``aggregate``'s subject with the headers of the event at ``like``, changed."""
    recorder = stack.log
    (msg,) = recorder.read_messages(like, 1)
    headers = {k: v for k, v in (msg.headers or {}).items() if not k.startswith("Nats-")}
    headers.update({envelope.CE_SUBJECT: aggregate, envelope.CE_ORIGINATORVERSION: str(version)})
    headers.update({envelope.NATS_MSG_ID: f"{aggregate}:{version}", **changes})
    subject = recorder.layout.subject(UUID(aggregate), headers[envelope.CE_TOPIC])

    async def publish() -> int:
        ack = await recorder.bridge.js.publish(subject, data, stream=recorder.stream, headers=headers)
        return int(ack.seq)

    return int(recorder.bridge.run(publish, 10))


def _publish_raw(stack: Stack, subject: str, data: bytes) -> int:
    """A message on the log's subjects without the event store's envelope (any NATS client can)."""
    recorder = stack.log

    async def publish() -> int:
        full = recorder.layout.all.replace(">", subject)
        return int((await recorder.bridge.js.publish(full, data, stream=recorder.stream)).seq)

    return int(recorder.bridge.run(publish, 10))


def _until(resp: object, subject: str, timeout: float = 10.0) -> list[dict[str, object]]:
    """The stream's events up to the first of ``subject``'s."""
    seen: list[dict[str, object]] = []
    while not seen or seen[-1]["data"]["subject"] != subject:  # type: ignore[index]
        seen += read_events(resp, 1, timeout)  # type: ignore[arg-type]
    return seen


def test_bad_messages_on_the_log_end_no_stream_and_reach_no_one(
    stack: Stack, guarded: Http, caplog: pytest.LogCaptureFixture
) -> None:
    """A message whose payload did not decode ended every stream that met it (and the history that
    held it answered 500); an event of a type outside the catalog reached members unredacted."""
    flavor, _ = stack.flavor()
    stack.handlers.register_host(RegisterHost("cmp-1", vcpus=8, memory_mb=16384, disk_gb=100))
    server, created = create_server(stack, P1, flavor)
    placed = stack.handlers.place_instance(PlaceInstance(server, "cmp-1")).position
    undecodable = _publish(stack, placed, server, 90, b'{"host": "cmp-1", ')
    surrogate = _publish(stack, placed, server, 91, b'{"timestamp": "\\ud800"}')
    nul_type = _publish(stack, placed, server, 92, b"{}", **{envelope.CE_TYPE: "stratus.instance\x00x"})
    teleported = {envelope.CE_TYPE: "stratus.instance.teleported", envelope.CE_TOPIC: "x:Instance.Teleported"}
    secret = b'{"compute_node": "secret-node-5", "nul": "a\\u0000b"}'
    unknown = _publish(stack, placed, server, 93, secret, **teleported)
    garbage = _publish_raw(stack, "flavor.x.created", b"{not json")
    deep = _publish(stack, placed, server, 94, b'{"x": ' + b"[" * 300 + b"]" * 300 + b"}")  # orjson reads it
    other, _ = create_server(stack, P1, flavor)  # after them all: the streams go on to it
    caplog.set_level(logging.ERROR, logger="stratus.api")
    admin = guarded.open(f"/v2.1/stratus/events?after={created - 1}", stack.headers(ADMIN))
    member = guarded.open(f"/v2.1/stratus/events?after={created - 1}", stack.headers(P1))
    to_admin, to_member = _until(admin, other), _until(member, other)
    admin.close()
    member.close()
    admin_ids = {e["id"] for e in to_admin}
    assert unknown in admin_ids and not admin_ids & {undecodable, surrogate, nul_type, garbage, deep}
    unknown_event = next(e for e in to_admin if e["id"] == unknown)
    assert unknown_event["data"]["data"] == {"compute_node": "secret-node-5", "nul": "a\x00b"}  # type: ignore[index]
    assert not {e["id"] for e in to_member} & {undecodable, surrogate, nul_type, unknown, garbage, deep}
    assert "secret-node-5" not in str(to_member)
    logged = " ".join(r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
    for position in (undecodable, surrogate, nul_type, garbage, deep):
        assert f"position {position}" in logged
    # the history of the server that holds them
    path = f"/v2.1/stratus/history/server/{server}"
    for who, shown in ((ADMIN, [placed, unknown]), (P1, [placed])):
        r = stack.get(path, who)
        assert r.status_code == 200, r.text
        assert [e["position"] for e in r.json["events"]][1:] == shown


def test_members_see_no_placement_allocations_charged_to_their_project(stack: Stack, guarded: Http) -> None:
    """A Placement consumer charged to a project (its first event names the project) reached the
    project's members with its allocations, keyed by the compute hosts' provider ids."""
    before = stack.handlers.register_host(RegisterHost("cmp-p", vcpus=4, memory_mb=4096, disk_gb=9)).position
    provider = str(host_aggregate_id("cmp-p"))
    consumer = str(uuid4())
    body = {
        "allocations": {provider: {"resources": {"VCPU": 1, "MEMORY_MB": 512}}},
        "consumer_generation": None, "project_id": stack.project_id("p1"), "user_id": "u",
    }  # fmt: skip
    headers = {**stack.headers(ADMIN), "OpenStack-API-Version": "placement 1.39"}
    r = stack.client.simulate_put(f"/placement/allocations/{consumer}", headers=headers, json=body)
    assert r.status_code == 204, r.text
    flavor, _ = stack.flavor()
    marker, _ = create_server(stack, P1, flavor)  # after it: the member's stream goes on to it
    for who, sees in ((ADMIN, True), (P1, False)):
        resp = guarded.open(f"/v2.1/stratus/events?after={before}", stack.headers(who))
        seen = _until(resp, marker)
        resp.close()
        assert (provider in str(seen)) is sees
        assert any(str(e["event"]).startswith("stratus.consumer.") for e in seen) is sees
