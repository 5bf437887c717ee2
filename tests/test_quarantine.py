"""A poison event on the log never stops a part that follows it: it is quarantined and skipped.

Before: an event the read model refused (a NUL in a flavor's name: PostgreSQL's text refuses it)
or could not decode stopped the projector, and every restart died on the same event, so
`stratus run` stopped the whole cloud. Here the poison sits between good events, written the way
anything that reaches NATS could write it; the projector applies the good ones exactly once,
records the bad ones in the quarantine stream, and a restart resumes after them.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from commands.app import Stratus
from commands.flavor import Flavor
from commands.handlers import Handlers, RegisterHost
from projections.projection import Projector
from stratus.config import Settings
from stratus.eventstore import JetStreamApplicationRecorder, NatsBridge
from stratus.quarantine import QuarantineLog
from tests.fixtures.workers import Worker, eventually
from tests.test_projection import app, head, projector_thread, read_models, rm  # noqa: F401
from tests.test_scheduler import create, handlers, settled, start_scheduler  # noqa: F401
from workers import scheduler
from workers.consumer import Delivery, DurableConsumer, serve
from workers.outcome import DONE, Outcome
from workers.scheduler import SCHEDULER


def _flavors(conn: psycopg.Connection[Any]) -> set[str]:
    return {row[0] for row in conn.execute("SELECT flavorid FROM stratus_rm.flavors").fetchall()}


def _position(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT position FROM stratus_rm.tracking").fetchone()
    return int(row[0]) if row else 0


def publish_garbage(bridge: NatsBridge, recorder: JetStreamApplicationRecorder) -> int:
    """A message on the log's subjects without the event store's envelope (any NATS client can)."""
    subject = recorder.layout.all.replace(">", "flavor.x.created")

    async def publish() -> int:
        ack = await bridge.js.publish(subject, b"{not json", stream=recorder.stream)
        return int(ack.seq)

    return int(bridge.run(publish, 10))


def _wait_for(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_the_projector_quarantines_poison_events_and_resumes_after_them(
    app: Stratus,  # noqa: F811
    bridge: NatsBridge,
    recorder: JetStreamApplicationRecorder,
    settings: Settings,
    database_url: str,
) -> None:
    app.save(Flavor.create(flavorid="good-1", name="one", vcpus=1, ram=64, disk=1))
    app.save(Flavor.create(flavorid="nul", name="a\x00b", vcpus=1, ram=64, disk=1))
    garbage = publish_garbage(bridge, recorder)
    app.save(Flavor.create(flavorid="good-2", name="two", vcpus=1, ram=64, disk=1))
    end = head(app)
    db_settings = dataclasses.replace(settings, database_url=database_url)

    with read_models(database_url) as conn:
        with projector_thread(db_settings):  # the runner's composition root, as `stratus projector`
            _wait_for(lambda: _position(conn) == end)
        assert _flavors(conn) == {"good-1", "good-2"}
        quarantined = QuarantineLog(bridge, settings.stream).entries("projector")
        assert [q.position for q in quarantined] == [end - 2, garbage]
        nul, bad = quarantined
        assert nul.event_type == "commands.flavor:Flavor.Created" and "psycopg" in nul.error
        assert "envelope" in bad.message
        assert "a\x00b" not in nul.message  # the payload itself is never copied into the record

        # A restart resumes after them: nothing applied twice, nothing quarantined twice.
        app.save(Flavor.create(flavorid="good-3", name="three", vcpus=1, ram=64, disk=1))
        with projector_thread(db_settings):
            _wait_for(lambda: _position(conn) == head(app))
        assert _flavors(conn) == {"good-1", "good-2", "good-3"}
        assert len(QuarantineLog(bridge, settings.stream).entries()) == 2


def test_a_projector_without_a_quarantine_still_stops_on_poison(
    app: Stratus,  # noqa: F811
    rm: psycopg.Connection[Any],  # noqa: F811
) -> None:
    """The library default (tests, tools): a poison event is an error unless someone records it."""
    app.save(Flavor.create(flavorid="nul", name="a\x00b", vcpus=1, ram=64, disk=1))
    with pytest.raises(psycopg.DataError):
        Projector(app.recorder, app.mapper, rm).catch_up()  # type: ignore[arg-type]
    assert _position(rm) == 0


def test_a_temporary_failure_is_raised_for_a_retry_not_quarantined(
    app: Stratus,  # noqa: F811
    bridge: NatsBridge,
    settings: Settings,
    database_url: str,
) -> None:
    """PostgreSQL going away mid-batch is not the event's fault: nothing is quarantined."""
    app.save(Flavor.create(flavorid="good-1", name="one", vcpus=1, ram=64, disk=1))
    recorded: list[int] = []
    with read_models(database_url) as conn:
        projector = Projector(
            app.recorder, app.mapper, conn, quarantine=lambda n, e: recorded.append(n.id)  # type: ignore[arg-type]
        )
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,)
            )
        with pytest.raises(psycopg.OperationalError):
            projector.catch_up()
    assert recorded == []
    assert QuarantineLog(bridge, settings.stream).entries() == []


def test_a_worker_quarantines_the_message_its_handler_fails_on_and_goes_on(
    app: Stratus,  # noqa: F811
    bridge: NatsBridge,
    settings: Settings,
) -> None:
    """The loop every worker runs (``workers.consumer.serve``): a handler that raises for one event
    (a bug for that event type, a payload it cannot use) no longer ends the worker's thread."""
    for name in ("one", "two", "three"):
        app.save(Flavor.create(flavorid=name, name=name, vcpus=1, ram=64, disk=1))
    consumer = DurableConsumer(
        bridge,
        stream=settings.stream,
        durable="poison-test",
        filter_subjects=[">"],
        ack_wait=1.0,
        quarantine=QuarantineLog(bridge, settings.stream),
    ).open()
    seen: list[str] = []

    def handle(d: Delivery) -> Outcome:
        seen.append(d.envelope.subject)
        if d.notification.id == 2:
            raise KeyError("a field this handler expected")
        return DONE

    stop = threading.Event()
    kwargs = {"actor": SCHEDULER, "poll": 0.1}
    thread = threading.Thread(target=serve, args=(consumer, handle, stop), kwargs=kwargs)
    thread.start()
    try:
        _wait_for(lambda: len(seen) >= 3)
        time.sleep(1.5)  # past ack_wait: a message neither acked nor terminated would come back
        assert thread.is_alive()
    finally:
        stop.set()
        thread.join(5)
        consumer.close()
    assert len(seen) == 3  # the poison one was terminated, not redelivered
    (entry,) = QuarantineLog(bridge, settings.stream).entries()
    assert (entry.part, entry.position, entry.error) == ("poison-test", 2, "builtins.KeyError")


def test_the_scheduler_quarantines_garbage_on_its_subject_and_places_the_next_server(
    bridge: NatsBridge,
    settings: Settings,
    recorder: JetStreamApplicationRecorder,
    start_scheduler: Callable[..., Worker],  # noqa: F811
    handlers: Handlers,  # noqa: F811
) -> None:
    handlers.register_host(RegisterHost("compute-a", vcpus=4, memory_mb=4096, disk_gb=50))
    requested, _ = scheduler.subjects(settings)

    async def publish() -> int:
        ack = await bridge.js.publish(requested.replace("*", "x"), b"garbage", stream=recorder.stream)
        return int(ack.seq)

    garbage = int(bridge.run(publish, 10))
    _, hosts = scheduler.subjects(settings)

    async def publish_host_garbage() -> int:
        ack = await bridge.js.publish(hosts.replace(">", "x.registered"), b"garbage", stream=recorder.stream)
        return int(ack.seq)

    host_garbage = int(bridge.run(publish_host_garbage, 10))
    start_scheduler()
    server = create(handlers)
    inst = eventually(lambda: settled(handlers, server))
    assert inst.host == "compute-a"
    entries = QuarantineLog(bridge, settings.stream).entries()
    assert {(e.part, e.position) for e in entries} == {
        (scheduler.DURABLE, garbage),
        ("scheduler-host-feed", host_garbage),
    }


def test_stratus_quarantine_list_shows_what_was_skipped(
    bridge: NatsBridge, settings: Settings, recorder: JetStreamApplicationRecorder
) -> None:
    QuarantineLog(bridge, settings.stream).record("projector", 7, ValueError("bad value"), event_type="t")
    env = {**os.environ, **settings.to_env()}
    done = subprocess.run(
        [sys.executable, "-m", "stratus.cli", "quarantine", "list", "--json"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    (line,) = done.stdout.splitlines()
    assert json.loads(line)["position"] == 7 and json.loads(line)["error"] == "builtins.ValueError"
