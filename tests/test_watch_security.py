"""The event stream and the auditor's views are safe against members.

Before: an open stream was never re-authorized (a revoked token or a disabled user kept receiving
events), one user could hold every stream thread, and history, state and the stream showed members
the hosts and fault details that the server view hides from them.
"""
# ruff: noqa: F811 (test_api's and test_watch's fixtures, imported, are requested by name)

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from wsgiref.simple_server import make_server

import pytest

from api import watch
from api.auth import Authenticator
from api.readmodel import ReadModel, open_pool
from commands.handlers import FailInstance, PlaceInstance, RegisterHost
from stratus.config import Settings
from tests.test_api import ADMIN, P1, Stack, api_settings, projector, stack  # noqa: F401
from tests.test_watch import Http, _Quiet, _ThreadingServer, create_server, read_events

LIMITS = watch.StreamLimits(per_user=2, total=10, recheck_seconds=0.2)


@pytest.fixture
def guarded(stack: Stack, api_settings: Settings) -> Iterator[Http]:
    """The stream as ``stratus watch`` composes it (re-authorized, capped), on a threaded WSGI server."""
    pool = open_pool(api_settings.database_url or "")
    authenticator = Authenticator(stack.signer, ReadModel(pool, 5.0))
    watch.add_route(
        stack.app, stack.handlers.app.recorder, heartbeat=0.2, authenticator=authenticator, limits=LIMITS
    )  # type: ignore[arg-type]
    server = make_server("127.0.0.1", 0, stack.app, server_class=_ThreadingServer, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield Http(server.server_address[1])
    server.shutdown()
    server.server_close()
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
