"""NATS trusts no one by default: each part connects as its own NKey user and may publish only where
its role allows (processes/trust.py, docs/trust.md). The server, the keys and the permissions are
those ``stratus run`` generates (the ``trusted`` fixture calls the same ``prepare``).

A refused publish or subscription is reported by the server as a permissions violation; each test
checks that report and that nothing reached the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import nats
import nats.errors
import pytest

from commands.host import host_aggregate_id
from processes import trust
from stratus.audit.rawreader import RawReader
from stratus.consolerelay import session_subject
from stratus.eventstore import JetStreamApplicationRecorder
from stratus.eventstore.bridge import Client
from stratus.eventstore.subjects import SubjectLayout, encode_token
from stratus.hostrpc import CONSOLE, HostRPC, Responder
from stratus.hostrpc import subject as rpc_subject
from stratus.liveness import bucket_for
from stratus.trust.nkeys import KeyPair
from stratus.trust.registry import inbox_prefix
from tests.fixtures.trust import Trusted


def _violations(
    trusted: Trusted, name: str, action: Callable[[Client], Awaitable[object]], expected: int
) -> list[str]:
    """The permissions violations the server reported while identity ``name`` ran ``action``: it
    waits (10 s at most) for ``expected`` of them, the server's reports being asynchronous."""
    seed = trust.seed_file(trusted.directory, name).read_text().strip()
    violations: list[str] = []

    async def attempt() -> None:
        enough = asyncio.Event()

        async def on_error(e: Exception) -> None:
            if "permissions violation" in str(e).lower():
                violations.append(str(e))
                if len(violations) >= expected:
                    enough.set()

        nc = Client()
        await nc.connect(
            servers=list(trusted.settings.nats_urls), nkeys_seed_str=seed, error_cb=on_error,
            allow_reconnect=False, inbox_prefix=inbox_prefix(KeyPair.from_seed(seed).public_key),
        )  # fmt: skip
        try:
            await action(nc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(enough.wait(), 10.0)
            await nc.flush()
        finally:
            await nc.close()

    asyncio.run(attempt())
    return violations


def _log(trusted: Trusted) -> JetStreamApplicationRecorder:
    recorder = JetStreamApplicationRecorder.from_settings(trusted.bridge("admin"), trusted.settings)
    recorder.ensure_stream()
    return recorder


def _host_subject(trusted: Trusted, host: str, type_: str) -> str:
    uuid = encode_token(str(host_aggregate_id(host)))
    return f"{trusted.settings.subject_prefix}.host.{uuid}.{type_}"


def test_a_client_without_credentials_is_refused(trusted: Trusted) -> None:
    async def connect() -> None:
        await nats.connect(trusted.settings.nats_urls[0], allow_reconnect=False, connect_timeout=5)

    with pytest.raises(nats.errors.Error, match=r"[Aa]uthorization"):
        asyncio.run(connect())


def test_a_host_appends_its_own_events_and_not_another_hosts(trusted: Trusted) -> None:
    log = _log(trusted)

    async def publish_both(nc: Client) -> None:
        await nc.jetstream().publish(_host_subject(trusted, "compute-1", "instanceclaimed"), b"{}")
        await nc.publish(_host_subject(trusted, "compute-2", "instanceclaimed"), b"{}")

    violations = _violations(trusted, "host:compute-1", publish_both, 1)

    assert len(violations) == 1 and str(host_aggregate_id("compute-2")) in violations[0]
    stored = log.read_messages(1, 10)
    assert [(m.headers or {})["Nats-Subject"] for m in stored] == [
        _host_subject(trusted, "compute-1", "instanceclaimed")
    ]


def test_a_host_cannot_append_identity_events(trusted: Trusted) -> None:
    """The issue's attack through a host's credentials: the server refuses the publish itself."""
    log = _log(trusted)
    layout = SubjectLayout(trusted.settings.subject_prefix)
    forged = layout.subject("9f1c0e39-0000-4000-8000-000000000001", "commands.identity:Project.RoleGranted")

    violations = _violations(trusted, "host:compute-1", lambda nc: nc.publish(forged, b"{}"), 1)

    assert violations and forged in violations[0]
    assert log.read_messages(1, 10) == []


def test_a_host_cannot_place_a_server(trusted: Trusted) -> None:
    """``Scheduled`` is the scheduler's: a host's publish of one is refused by the server, though it
    may append its servers' other events."""
    log = _log(trusted)
    layout = SubjectLayout(trusted.settings.subject_prefix)
    server = "9f1c0e39-0000-4000-8000-000000000003"
    forged = layout.subject(server, "commands.instance:Instance.Scheduled")
    own = layout.subject(server, "commands.instance:Instance.Spawned")

    async def place(nc: Client) -> None:
        await nc.publish(forged, b"{}")
        await nc.jetstream().publish(own, b"{}")

    violations = _violations(trusted, "host:compute-1", place, 1)

    assert len(violations) == 1 and forged.lower() in violations[0].lower()
    assert [(m.headers or {})["Nats-Subject"] for m in log.read_messages(1, 10)] == [own]


def test_a_host_cannot_delete_or_purge_the_stream(trusted: Trusted) -> None:
    log = _log(trusted)
    stream = trusted.settings.stream

    async def destroy(nc: Client) -> None:
        await nc.publish(f"$JS.API.STREAM.DELETE.{stream}", b"", reply=nc.new_inbox())
        await nc.publish(f"$JS.API.STREAM.PURGE.{stream}", b"", reply=nc.new_inbox())

    violations = _violations(trusted, "host:compute-1", destroy, 2)

    assert len(violations) == 2
    info = log.bridge.run(lambda: log.bridge.js.stream_info(stream), 10.0)  # still there
    assert info.config.name == stream


def test_a_host_answers_only_its_own_rpcs_and_beats_only_for_itself(trusted: Trusted) -> None:
    bucket = bucket_for(trusted.settings.stream)

    async def impersonate(nc: Client) -> None:
        await nc.subscribe(rpc_subject("compute-1", "console"))
        await nc.subscribe(rpc_subject("compute-2", "console"))
        await nc.publish(f"$KV.{bucket}.{encode_token('compute-1')}", b"{}")
        await nc.publish(f"$KV.{bucket}.{encode_token('compute-2')}", b"{}")

    violations = _violations(trusted, "host:compute-1", impersonate, 2)

    assert len(violations) == 2
    assert any("subscription" in v.lower() and "compute-2" in v for v in violations)
    assert any("publish" in v.lower() and "compute-2" in v for v in violations)


def test_a_host_relays_only_its_own_console_sessions(trusted: Trusted) -> None:
    async def snoop(nc: Client) -> None:
        await nc.subscribe(session_subject("compute-1", "s1", "in"))
        await nc.publish(session_subject("compute-1", "s1", "out"), b"guest bytes")
        await nc.subscribe(session_subject("compute-2", "s2", "in"))
        await nc.publish(session_subject("compute-2", "s2", "out"), b"forged bytes")

    violations = _violations(trusted, "host:compute-1", snoop, 2)

    assert len(violations) == 2 and all("compute-2" in v for v in violations), violations

    async def proxy(nc: Client) -> None:  # the console proxies connect as the API
        await nc.subscribe(session_subject("compute-2", "s2", "out"))
        await nc.publish(session_subject("compute-2", "s2", "in"), b"typed")

    assert _violations(trusted, "api", proxy, 1) == []


def test_each_identity_reads_replies_under_its_own_inbox_prefix_only(trusted: Trusted) -> None:
    """A host cannot subscribe to the API's inboxes (console output, JetStream's answers to it), nor
    to the shared ``_INBOX.>``; its own requests are answered under its own prefix."""
    api = trusted.registry.current("api")
    assert api is not None
    answered: list[bytes] = []

    async def eavesdrop(nc: Client) -> None:
        await nc.subscribe(f"{inbox_prefix(api.public_key)}.>")
        await nc.subscribe("_INBOX.>")
        answered.append((await nc.request("$JS.API.INFO", b"", timeout=5)).data)

    violations = _violations(trusted, "host:compute-1", eavesdrop, 2)

    assert len(violations) == 2 and all("subscription" in v.lower() for v in violations), violations
    refused = {v.lower().split("subscription to ")[-1].strip('"') for v in violations}  # nats-py lowercases
    assert refused == {f"{inbox_prefix(api.public_key)}.>".lower(), "_inbox.>"}
    assert answered and b"io.nats.jetstream.api.v1.account_info_response" in answered[0]


def test_the_api_asks_a_host_and_reads_its_answer_under_its_own_prefix(trusted: Trusted) -> None:
    """Console RPCs under trust: the API's request goes to the host's subject, the host answers to
    the API's inbox (``allow_responses``), which only the API may subscribe to."""
    host = trusted.bridge("host:compute-1")
    api = trusted.bridge("api")
    responder = Responder(host, "compute-1")
    responder.serve(CONSOLE, lambda body: {"output": f"console of {body['server_id']}"})  # then asked at once
    try:
        assert api.inbox_prefix == inbox_prefix(KeyPair.from_seed(
            trust.seed_file(trusted.directory, "api").read_text().strip()).public_key)  # fmt: skip
        answer = HostRPC(api).ask("compute-1", CONSOLE, {"server_id": "s1", "length": None})
    finally:
        responder.close()
    assert answer == {"output": "console of s1"}


@pytest.mark.parametrize("reader", ["auditor", "integrator"])
def test_read_only_identities_cannot_publish_but_can_read(trusted: Trusted, reader: str) -> None:
    log = _log(trusted)
    layout = SubjectLayout(trusted.settings.subject_prefix)
    subject = layout.subject("9f1c0e39-0000-4000-8000-000000000002", "commands.instance:Instance.Created")

    violations = _violations(trusted, reader, lambda nc: nc.publish(subject, b"{}"), 1)

    assert violations and subject in violations[0]
    assert log.read_messages(1, 10) == []
    seed = trust.seed_file(trusted.directory, reader)
    with RawReader(trusted.settings.nats_urls, trusted.settings.stream, seed_file=seed) as raw:
        assert raw.last_position(f"{trusted.settings.subject_prefix}.>") == 0


def test_a_refused_publish_is_logged_by_the_part_that_made_it(
    trusted: Trusted, caplog: pytest.LogCaptureFixture
) -> None:
    """A part whose seed or host name is wrong sees its appends time out; its log says why."""
    bridge = trusted.bridge("host:compute-1")
    other = _host_subject(trusted, "compute-2", "instanceclaimed")

    async def publish() -> None:
        await bridge.nc.publish(other, b"{}")
        await bridge.nc.flush()

    with caplog.at_level(logging.WARNING, logger="stratus.eventstore.bridge"):
        bridge.run(publish, 10.0)
        deadline = time.monotonic() + 10  # the server's report is asynchronous
        while not caplog.records and time.monotonic() < deadline:
            time.sleep(0.05)

    assert any("permissions violation" in r.getMessage() and other in r.getMessage() for r in caplog.records)
