"""The server-sent events stream over real HTTP (a threaded WSGI server, one thread per stream, as
gunicorn's gthread worker runs it) on the real JetStream log: filters, projects, resuming with
Last-Event-ID, a reader that never reads stalling no one, and an expired position."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nats.js.api import DiscardPolicy

import schemas
from api import watch
from commands.hosts.register import RegisterHost
from commands.servers.scheduling import PlaceInstance
from stratus.config import Settings
from stratus.health import READYZ
from tests.fixtures.api import ADMIN, P1, P2, Stack
from tests.fixtures.processes import free_port, serving
from tests.fixtures.watch import Http, create_server, read_events, serving_streams


@pytest.fixture(params=["threaded-wsgi", "stratus-watch"])
def http_server(
    request: pytest.FixtureRequest, stack: Stack, api_settings: Settings, tmp_path: Path
) -> Iterator[Http]:
    """The stream served in this process by a threaded WSGI server, and as deployed: ``stratus watch``
    (gunicorn's gthread worker in a process of its own, composing its app from the settings)."""
    if request.param == "stratus-watch":
        yield from _stratus_watch(api_settings, tmp_path)
        return
    with serving_streams(stack.app, watch.Events(stack.log, heartbeat=0.5)) as http:
        yield http


def _stratus_watch(settings: Settings, tmp_path: Path) -> Iterator[Http]:
    port = free_port()
    argv = [sys.executable, "-m", "processes.cli", "watch", "--bind", f"127.0.0.1:{port}", "--threads", "8"]
    with serving(argv, settings, port, tmp_path / "watch.log", ready=READYZ):
        yield Http(port)


def who(stack: Stack, persona: Any) -> dict[str, str]:
    """The request headers of a test persona (identity headers, or a token once identity lands)."""
    headers = getattr(stack, "headers", None)
    return dict(headers(persona)) if headers is not None else dict(persona)


def test_a_member_follows_their_projects_servers_and_resumes(stack: Stack, http_server: Http) -> None:
    flavor, _ = stack.flavor()
    stack.handlers.register_host(RegisterHost("cmp-1", vcpus=8, memory_mb=16384, disk_gb=100))
    mine, created = create_server(stack, P1, flavor)
    theirs, _ = create_server(stack, P2, flavor)
    placed = stack.handlers.place_instance(PlaceInstance(mine, "cmp-1")).position  # by the system actor
    stack.handlers.place_instance(PlaceInstance(theirs, "cmp-1"))

    resp = http_server.open("/v2.1/stratus/events?after=0&type=server", who(stack, P1))
    assert resp.status == 200 and resp.getheader("Content-Type") == "text/event-stream"
    got = read_events(resp, 2)
    assert [(e["id"], e["event"]) for e in got] == [
        (created, "stratus.instance.requested"),
        (placed, "stratus.instance.scheduled"),
    ]
    project = stack.get(f"/v2.1/servers/{mine}", ADMIN).json["server"]["tenant_id"]
    assert got[0]["data"]["subject"] == mine and got[0]["data"]["actorproject"] == project
    assert got[1]["data"]["chainprev"] == got[0]["data"]["chainhash"]
    for e in got:  # the same structured envelope as everywhere
        assert [x.message for x in schemas.validator("envelope.v1.json").iter_errors(e["data"])] == []
    # live: a new event of mine arrives; theirs never does
    stack.request("DELETE", f"/v2.1/servers/{theirs}", P2)
    d = stack.request("DELETE", f"/v2.1/servers/{mine}", P1)
    live = read_events(resp, 1)
    assert live[0]["id"] == int(d.headers["X-Stratus-Position"])
    assert live[0]["event"] == "stratus.instance.deletionrequested"
    resp.close()

    # resuming after the first event gives the rest, as EventSource does on reconnect
    again = http_server.open(
        "/v2.1/stratus/events?type=server", {**who(stack, P1), "Last-Event-ID": str(created)}
    )
    assert [e["id"] for e in read_events(again, 2)] == [placed, live[0]["id"]]
    again.close()


def test_filters_by_type_and_id(stack: Stack, http_server: Http) -> None:
    flavor, flavor_position = stack.flavor()
    first, _ = create_server(stack, P1, flavor)
    second, _ = create_server(stack, P1, flavor)
    by_id = http_server.open(f"/v2.1/stratus/events?after=0&type=server&id={second}", who(stack, ADMIN))
    assert [e["data"]["subject"] for e in read_events(by_id, 1)] == [second]
    by_id.close()
    flavors = http_server.open("/v2.1/stratus/events?after=0&type=flavor", who(stack, ADMIN))
    seen: list[dict[str, Any]] = []
    while not seen or seen[-1]["data"]["data"].get("flavorid") != flavor:
        seen += read_events(flavors, 1)
        assert len(seen) < 50
    assert {e["event"].split(".")[1] for e in seen} == {"flavor"} and seen[-1]["id"] <= flavor_position
    flavors.close()
    assert first != second


def test_stratus_watch_ends_its_streams_when_told_to_stop(
    stack: Stack, api_settings: Settings, tmp_path: Path
) -> None:
    """SIGTERM ends every open stream at once, with a comment saying why (EventSource reconnects),
    and the process exits 0: a stream no longer holds the worker until gunicorn kills it."""
    port = free_port()
    argv = [sys.executable, "-m", "processes.cli", "watch", "--bind", f"127.0.0.1:{port}", "--threads", "8"]
    log = tmp_path / "watch.log"
    with serving(argv, api_settings, port, log, ready=READYZ) as proc:
        streams = [Http(port).open("/v2.1/stratus/events", who(stack, who_)) for who_ in (ADMIN, P1)]
        for stream in streams:
            assert stream.status == 200 and stream.readline().startswith(b"retry:")
        proc.terminate()
        for stream in streams:
            assert stream.read().endswith(watch.STOPPING)  # the rest, to its end
        assert proc.wait(timeout=30) == 0
    assert "SIGKILL" not in log.read_text()


def test_a_reader_that_never_reads_stalls_no_one(stack: Stack, http_server: Http) -> None:
    stuck = http_server.open(
        "/v2.1/stratus/events?after=0", who(stack, ADMIN), rcvbuf=4096
    )  # and it never reads
    # enough events to fill the stuck reader's buffers
    for i in range(60):
        stack.flavor(name=f"filler-{i}-" + "x" * 200)
    fresh = http_server.open("/v2.1/stratus/events", who(stack, ADMIN))
    _, position = stack.flavor(name="the-one")
    started = time.monotonic()
    got = read_events(fresh, 1, timeout=5)
    while got[-1]["id"] < position:  # a flavor's append also takes its name in the registry
        got += read_events(fresh, 1, timeout=5)
    assert got[-1]["id"] == position and time.monotonic() - started < 3
    fresh.close()
    stuck.close()


def test_rejects_other_projects_bad_positions_and_expired_ones(stack: Stack, http_server: Http) -> None:
    r = http_server.open("/v2.1/stratus/events?project=someone-else", who(stack, P1))
    assert r.status == 403
    r.close()
    r = http_server.open("/v2.1/stratus/events", {**who(stack, P1), "Last-Event-ID": "abc"})
    assert r.status == 400 and "Last-Event-ID" in json.loads(r.read())["badRequest"]["message"]
    flavor, _ = stack.flavor()
    for _ in range(4):
        create_server(stack, P1, flavor)
    # retention set on the stream by an operator: the oldest messages go
    recorder = stack.handlers.app.recorder
    config = dataclasses.replace(recorder.stream_config(), max_msgs=2, discard=DiscardPolicy.OLD)  # type: ignore[attr-defined]
    recorder.bridge.run(lambda: recorder.bridge.js.update_stream(config), 5)  # type: ignore[attr-defined]
    r = http_server.open("/v2.1/stratus/events", {**who(stack, P1), "Last-Event-ID": "1"})
    assert r.status == 410
    body = json.loads(r.read())
    assert "no longer in the log" in json.dumps(body)


def test_a_member_follows_their_own_key_pairs_and_their_projects_images(
    stack: Stack, http_server: Http
) -> None:
    """Images are their project's (Glance's ``owner``) and key pairs their user's: a member's stream
    has her own and her project's, not another user's key pairs in the same project or another
    project's images (the dashboard's lists follow them)."""

    def write(persona: str, path: str, body: dict[str, Any]) -> int:
        r = stack.request("POST", path, persona, json=body)
        assert r.status_code in (200, 201), r.text
        return int(r.headers["X-Stratus-Position"])  # the last event of the write

    start = write(ADMIN, "/v2.1/os-keypairs", {"keypair": {"name": "alices"}})  # p1's admin, another user
    image = {"disk_format": "raw", "container_format": "bare"}
    write(P1, "/v2.1/os-keypairs", {"keypair": {"name": "bobs"}})
    write(P1, "/image/v2/images", {**image, "name": "p1-image"})
    write(P2, "/image/v2/images", {**image, "name": "p2-image"})
    write(P2, "/v2.1/os-keypairs", {"keypair": {"name": "carols"}})
    write(P1, "/v2.1/os-keypairs", {"keypair": {"name": "bobs-last"}})
    stream = http_server.open(f"/v2.1/stratus/events?after={start - 5}", who(stack, P1))
    named: list[tuple[str, str]] = []  # (kind, name) of the key pair and image events she sees
    while ("keypair", "bobs-last") not in named:
        for e in read_events(stream, 1):
            kind = e["event"].split(".")[1]
            if kind in ("keypair", "image"):
                named.append((kind, e["data"]["data"].get("name")))
    stream.close()
    assert named == [("keypair", "bobs"), ("image", "p1-image"), ("keypair", "bobs-last")]
