"""Poison events: every part that follows the log quarantines an event it cannot take and goes on.

Each poison event is appended straight to the log (past the API's and the commands' checks): a NUL
in a server's metadata (PostgreSQL refuses it in text and jsonb), a garbled payload under a known
topic, and an unknown event type in a valid envelope. Good events around them must be applied once,
the bad ones recorded in the quarantine stream, and a restarted part must resume after them.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import libvirt
import orjson
import psycopg
import pytest
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import get_topic

from commands.app import Stratus
from commands.errors import NotFound
from commands.flavor import Flavor
from commands.flavors.create import CreateFlavor
from commands.host import Host
from commands.hosts.register import RegisterHost
from commands.instance import Instance
from commands.servers.create import CreateServer
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import FinishSpawning, StartSpawning
from commands.states import PowerState, VmState
from projections import notifications, queries
from projections.rawlog import RawLog
from projections.rebuild import rebuild
from projections.schema import WRITER_LOCK
from stratus.config import Settings
from stratus.eventstore import Factory, NatsBridge
from stratus.eventstore.subjects import SubjectLayout
from stratus.quarantine import Quarantine, Quarantined
from tests.fixtures.commands import make_app
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.projections import head, projector_thread, read_models
from tests.fixtures.workers import Worker, eventually
from workers import hypervisor, scheduler
from workers.libvirt_driver import LibvirtDriver
from workers.outcome import RetryPolicy
from workers.virt import DomainInfo, GuestSpec, HostInventory

UNKNOWN_TOPIC = "commands.instance:Instance.Exploded"


@pytest.fixture
def quarantine(bridge: NatsBridge, settings: Settings) -> Any:
    q = Quarantine(bridge, log_stream=settings.stream)
    yield q

    async def delete() -> None:
        await bridge.js.delete_stream(q.stream)

    bridge.run(delete, 5)


def nul_in_metadata(app: Stratus, server_id: str) -> int:
    """A metadata change carrying a NUL (as the API once let through); its log position."""
    inst: Any = app.repository.get(UUID(server_id))
    inst._metadata_updated({"k": "a\u0000b"}, [])  # the event itself, past any check of the command's
    app.save(inst)
    return head(app)


def garbled(app: Stratus, topic: str) -> int:
    """An event of a known topic whose payload is not JSON; its log position."""
    app.recorder.insert_events([StoredEvent(uuid4(), 1, topic, b"\x00\xffgarbled")])
    return head(app)


def garbled_envelope(bridge: NatsBridge, settings: Settings, topic: str) -> int:
    """A message on an event's subject of the log without the envelope's headers; its log position."""
    subject = SubjectLayout(settings.subject_prefix).subject(uuid4(), topic)

    async def publish() -> int:
        return int((await bridge.js.publish(subject, b"\x00garbled", stream=settings.stream)).seq)

    return bridge.run(publish, 10)


def unknown(app: Stratus, originator: UUID | None = None, version: int = 1) -> int:
    """An event whose type no code knows, in a valid envelope; its log position."""
    app.recorder.insert_events([StoredEvent(originator or uuid4(), version, UNKNOWN_TOPIC, b"{}")])
    return head(app)


def in_error(handlers: Handlers, server_id: str) -> Instance | None:
    inst = handlers.instance(server_id)
    return inst if inst.vm_state == VmState.ERROR else None


def by_position(records: list[Quarantined], part: str) -> dict[int, Quarantined]:
    return {r.position: r for r in records if r.part == part}


# -- the projector --------------------------------------------------------------------------------
def test_the_projector_quarantines_poison_events_applies_the_rest_and_resumes_after_them(
    app: Stratus, handlers: Handlers, quarantine: Quarantine, db_settings: Settings, database_url: str,
    settings: Settings,
) -> None:  # fmt: skip
    handlers.create_flavor(CreateFlavor("1", "tiny", 1, 64, 1))
    server = handlers.create_server(CreateServer("vm", "p", "u", "1")).id
    nul_at = nul_in_metadata(app, server)
    garbled_at = garbled(app, get_topic(Flavor.Created))  # type: ignore[attr-defined]
    headless_at = garbled_envelope(app.recorder.bridge, settings, get_topic(Flavor.Created))  # type: ignore[attr-defined]
    unknown(app)
    inst: Any = app.repository.get(UUID(server))
    inst.update_metadata({"ok": "yes"})  # a good event of the same server, after its poisoned one
    app.save(inst)
    handlers.create_flavor(CreateFlavor("2", "small", 1, 64, 1))
    end = head(app)

    with read_models(database_url) as rm:
        with projector_thread(db_settings):  # fails the test if the projector dies
            eventually(lambda: queries.current_position(rm) == end)
        assert [f.flavorid for f in queries.list_flavors(rm)] == ["1", "2"]
        row = queries.get_server(rm, server, None)
        assert row is not None and row["metadata"] == {"ok": "yes"}

        records = by_position(quarantine.list(), "projector")
        # (the unknown type is not the read models' concern: it only advances the position)
        assert sorted(records) == [nul_at, garbled_at, headless_at]
        assert records[headless_at].topic.startswith(f"subject {settings.subject_prefix}.flavor.")
        assert (records[headless_at].originator_id, records[headless_at].error) == ("?", "KeyError")
        assert records[nul_at].error == "UntranslatableCharacter"
        assert records[nul_at].originator_id == server
        assert records[nul_at].topic == get_topic(Instance.MetadataUpdated)  # type: ignore[attr-defined]
        assert "\u0000" not in records[nul_at].reason and "a\u0000b" not in records[nul_at].to_json().decode()
        assert records[garbled_at].topic == get_topic(Flavor.Created)  # type: ignore[attr-defined]

        # A restart resumes after the quarantined events, and follows what comes next.
        handlers.create_flavor(CreateFlavor("3", "medium", 1, 64, 1))
        with projector_thread(db_settings):
            eventually(lambda: queries.current_position(rm) == head(app))
        assert [f.flavorid for f in queries.list_flavors(rm)] == ["1", "2", "3"]
        assert sorted(by_position(quarantine.list(), "projector")) == [nul_at, garbled_at, headless_at]

    # What an operator sees.
    shown = stratus_cli(settings, "quarantine", "list")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split()[:3] == ["POSITION", "PART", "AT"]
    shown_records = [line.split()[:2] for line in lines[1:]]
    assert shown_records == [[str(p), "projector"] for p in (nul_at, garbled_at, headless_at)]
    assert "UntranslatableCharacter" in lines[1] and "a\u0000b" not in shown.stdout
    as_json = stratus_cli(settings, "quarantine", "list", "--json", "--part", "projector")
    assert [orjson.loads(line)["position"] for line in as_json.stdout.splitlines()] == [
        nul_at,
        garbled_at,
        headless_at,
    ]
    assert (
        stratus_cli(settings, "quarantine", "list", "--part", "notifier").stdout == "no quarantined events\n"
    )


def stratus_cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **settings.to_env()}
    return subprocess.run(
        [sys.executable, "-m", "processes.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_a_rebuild_quarantines_poison_events_and_swaps_in_the_rest(
    app: Stratus, handlers: Handlers, quarantine: Quarantine, database_url: str
) -> None:
    handlers.create_flavor(CreateFlavor("1", "tiny", 1, 64, 1))
    server = handlers.create_server(CreateServer("vm", "p", "u", "1")).id
    nul_at = nul_in_metadata(app, server)
    handlers.create_flavor(CreateFlavor("2", "small", 1, 64, 1))
    with read_models(database_url) as rm:
        result = rebuild(rm, app.recorder, app.mapper, batch_size=3, quarantine=quarantine)  # type: ignore[arg-type]
        assert result.position == head(app) == queries.current_position(rm)
        assert [f.flavorid for f in queries.list_flavors(rm)] == ["1", "2"]
        row = queries.get_server(rm, server, None)
        assert row is not None and row["metadata"] == {}
    assert sorted(by_position(quarantine.list(), "rebuild")) == [nul_at]


@pytest.mark.parametrize("batch_size", [2, 3])
def test_a_rebuild_bisecting_a_batch_applies_its_other_events_to_the_rows_last_committed(
    app: Stratus, handlers: Handlers, quarantine: Quarantine, database_url: str, batch_size: int
) -> None:
    # the server's row is carried from batch to batch (a fresh schema's view): a batch that fails
    # must leave it as the tables hold it, for its halves and the batches after
    handlers.create_flavor(CreateFlavor("1", "tiny", 1, 64, 1))
    server = handlers.create_server(CreateServer("vm", "p", "u", "1")).id
    inst: Any = app.repository.get(UUID(server))
    inst.update_metadata({"a": "1"})
    app.save(inst)
    nul_at = nul_in_metadata(app, server)
    inst = app.repository.get(UUID(server))
    inst.update_metadata({"b": "2"})
    app.save(inst)
    with read_models(database_url) as rm:
        rebuild(rm, app.recorder, app.mapper, batch_size=batch_size, quarantine=quarantine)  # type: ignore[arg-type]
        row = queries.get_server(rm, server, None)
        assert row is not None and row["metadata"] == {"a": "1", "b": "2"}
    assert sorted(by_position(quarantine.list(), "rebuild")) == [nul_at]


def test_a_replay_whose_batch_fails_reads_on_one_reader_at_a_time(
    app: Stratus,
    handlers: Handlers,
    quarantine: Quarantine,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the batch that fails in the writer (a NUL) is read again on the replay's own thread: the
    # read ahead, still running on the reader thread, must be done first (the raw log's open read
    # is one generator: two threads in it raised "generator already executing")
    inside, overlapped = [0], []
    lock = threading.Lock()
    read = RawLog.read_messages

    def slow_read(self: RawLog, *args: Any, **kw: Any) -> Any:
        with lock:
            inside[0] += 1
            overlapped.append(inside[0] > 1)
        try:
            time.sleep(0.05)
            return read(self, *args, **kw)
        finally:
            with lock:
                inside[0] -= 1

    monkeypatch.setattr(RawLog, "read_messages", slow_read)
    handlers.create_flavor(CreateFlavor("1", "tiny", 1, 64, 1))
    server = handlers.create_server(CreateServer("vm", "p", "u", "1")).id
    nul_at = nul_in_metadata(app, server)
    inst: Any = app.repository.get(UUID(server))
    inst.update_metadata({"b": "2"})
    app.save(inst)
    with read_models(database_url) as rm:
        rebuild(rm, app.recorder, app.mapper, batch_size=2, quarantine=quarantine)  # type: ignore[arg-type]
        row = queries.get_server(rm, server, None)
        assert row is not None and row["metadata"] == {"b": "2"}
    assert sorted(by_position(quarantine.list(), "rebuild")) == [nul_at]
    assert overlapped and not any(overlapped)


def test_a_transient_postgresql_failure_is_retried_not_quarantined(
    app: Stratus, handlers: Handlers, quarantine: Quarantine, db_settings: Settings, database_url: str
) -> None:
    handlers.create_flavor(CreateFlavor("1", "tiny", 1, 64, 1))
    end = head(app)
    with read_models(database_url) as rm, psycopg.connect(database_url, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (WRITER_LOCK,))  # the projector's batch waits
        waiting = (
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'stratus-projector' "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        with projector_thread(db_settings):
            pid = eventually(lambda: other.execute(waiting).fetchone())[0]
            other.execute("SELECT pg_cancel_backend(%s)", (pid,))  # its statement fails: QueryCanceled
            pid = eventually(lambda: other.execute(waiting).fetchone())[0]  # and it tries again
            other.execute("SELECT pg_terminate_backend(%s)", (pid,))  # its connection is lost
            eventually(lambda: other.execute(waiting).fetchone())  # it reconnects and tries again
            other.execute("SELECT pg_advisory_unlock(%s)", (WRITER_LOCK,))
            eventually(lambda: queries.current_position(rm) == end)
        assert [f.flavorid for f in queries.list_flavors(rm)] == ["1"]
    assert quarantine.list() == []


def test_a_table_missing_is_the_databases_failure_not_the_events(
    app: Stratus, handlers: Handlers, quarantine: Quarantine, db_settings: Settings, database_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    handlers.create_flavor(CreateFlavor("1", "tiny", 1, 64, 1))
    with read_models(database_url) as rm:
        rm.execute("ALTER TABLE stratus_rm.flavors RENAME TO flavors_away")  # a botched migration, say
        with projector_thread(db_settings):
            eventually(lambda: "UndefinedTable" in caplog.text)  # it failed the batch, and goes on trying
            rm.execute("ALTER TABLE stratus_rm.flavors_away RENAME TO flavors")
            eventually(lambda: queries.current_position(rm) == head(app))
        assert [f.flavorid for f in queries.list_flavors(rm)] == ["1"]
    assert quarantine.list() == []


def _stopping(target: Any) -> tuple[threading.Thread, threading.Event, list[BaseException]]:
    stop = threading.Event()
    errors: list[BaseException] = []

    def main() -> None:
        try:
            target(stop)
        except BaseException as e:
            errors.append(e)
            raise

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    return thread, stop, errors


# -- the notifier ---------------------------------------------------------------------------------
def _notifier(bridge: NatsBridge, settings: Settings) -> notifications.Notifier:
    factory = Factory(bridge=bridge, settings=settings)
    return notifications.Notifier(
        Stratus(factory),
        factory.application_recorder(),
        stream=f"{settings.stream}_NOTIFICATIONS",
        prefix=f"{settings.subject_prefix}_vn",
    )


def _follow(n: notifications.Notifier, until: int) -> None:
    thread, stop, errors = _stopping(lambda stop: n.run(stop, idle_wait=0.05))
    try:
        eventually(lambda: n.position >= until or not thread.is_alive())
    finally:
        stop.set()
        thread.join(10)
    assert not errors, errors
    assert n.position >= until


def test_the_notifier_quarantines_poison_events_and_resumes_after_them(
    app: Stratus, handlers: Handlers, quarantine: Quarantine, bridge: NatsBridge, settings: Settings
) -> None:
    handlers.create_flavor(CreateFlavor("1", "tiny", 1, 64, 1))
    handlers.register_host(RegisterHost("cmp-1", 4, 8192, 40))
    server = handlers.create_server(CreateServer("vm", "p", "u", "1")).id
    unknown_at = unknown(app)
    garbled_at = garbled(app, get_topic(Instance.Spawned))  # type: ignore[attr-defined]
    handlers.place_instance(PlaceInstance(server, "cmp-1"))
    handlers.start_spawning(StartSpawning(server, "cmp-1"))
    last = handlers.finish_spawning(FinishSpawning(server, PowerState.RUNNING)).position
    first = _notifier(bridge, settings)
    try:
        _follow(first, last)
        kinds = [n.event_type for _, n in _published(first)]
        assert kinds.count("instance.create.end") == 1  # the good events after the poison
        assert sorted(by_position(quarantine.list(), "notifier")) == [unknown_at, garbled_at]

        # A poison event last in the log: a restart continues after it, without recording it again.
        tail = unknown(app)
        _follow(_notifier(bridge, settings), tail)
        again = _notifier(bridge, settings)
        _follow(again, tail)
        records = [r for r in quarantine.list() if r.part == "notifier"]
        assert [r.position for r in records] == [unknown_at, garbled_at, tail]
    finally:

        async def delete() -> None:
            await bridge.js.delete_stream(first.stream)

        bridge.run(delete, 5)


def _published(n: notifications.Notifier) -> list[tuple[int, notifications.Notification]]:
    async def read() -> list[tuple[int, notifications.Notification]]:
        info = await n.bridge.js.stream_info(n.stream)
        out = []
        for seq in range(1, info.state.last_seq + 1):
            msg = await n.bridge.js.get_msg(n.stream, seq)
            body = orjson.loads(msg.data or b"{}")
            out.append((seq, notifications.Notification(body["event_type"], body["priority"], body, "")))
        return out

    return n.bridge.run(read, 10)


# -- the scheduler and its host feed --------------------------------------------------------------
def test_the_scheduler_quarantines_poison_events_and_places_the_rest(
    app: Stratus, handlers: Handlers, quarantine: Quarantine, bridge: NatsBridge, settings: Settings
) -> None:
    handlers.create_flavor(CreateFlavor("1", "tiny", 1, 64, 1))
    handlers.register_host(RegisterHost("cmp-1", 4, 8192, 40))
    first = handlers.create_server(CreateServer("vm1", "p", "u", "1")).id
    request_at = garbled(app, get_topic(Instance.Requested))  # type: ignore[attr-defined]
    headless_at = garbled_envelope(bridge, settings, get_topic(Instance.Requested))  # type: ignore[attr-defined]
    host_garbled_at = garbled(app, get_topic(Host.Registered))  # type: ignore[attr-defined]
    app.recorder.insert_events([StoredEvent(uuid4(), 1, "commands.host:Host.Exploded", b"{}")])
    host_unknown_at = head(app)
    second = handlers.create_server(CreateServer("vm2", "p", "u", "1")).id

    def placed(server: str) -> bool:
        return handlers.instance(server).host == "cmp-1"

    def run(stop: threading.Event) -> None:
        scheduler.run(settings, bridge=bridge, app=make_app(bridge, settings), stop=stop, poll=0.1)

    worker = Worker(run)
    try:
        eventually(lambda: placed(first) and placed(second))
        eventually(lambda: len(by_position(quarantine.list(), "host-feed")) == 2)
    finally:
        worker.close()  # fails the test if the scheduler died
    assert sorted(by_position(quarantine.list(), scheduler.DURABLE)) == [request_at, headless_at]
    assert sorted(by_position(quarantine.list(), "host-feed")) == [host_garbled_at, host_unknown_at]

    # Restarted, it is not handed the quarantined request again and places what comes next.
    third = handlers.create_server(CreateServer("vm3", "p", "u", "1")).id
    worker = Worker(run)
    try:
        eventually(lambda: placed(third))
    finally:
        worker.close()
    assert sorted(by_position(quarantine.list(), scheduler.DURABLE)) == [request_at, headless_at]


def test_a_request_the_scheduler_quarantines_leaves_its_server_in_error_not_building(
    app: Stratus, handlers: Handlers, quarantine: Quarantine, bridge: NatsBridge, settings: Settings
) -> None:
    handlers.register_host(RegisterHost("cmp-1", 4, 8192, 40))
    # A request whose flavor no code can size (appended past the commands' checks): it loads, but
    # placing it fails in a way no step classifies.
    odd = Flavor.create(flavorid="odd", name="odd", vcpus=1, ram=64, disk=1, ephemeral=0)
    flavor = {**odd.snapshot_for_instance(), "vcpus": "many"}
    inst = Instance.request(
        uuid4(), name="odd", project_id="p", user_id="u", flavor=flavor, image_ref="", metadata={},
        availability_zone=None, request_key=None, scheduling={"num_instances": 1, "group_id": None},
    )  # fmt: skip
    app.save(inst)
    request_at = head(app)

    def run(stop: threading.Event) -> None:
        scheduler.run(settings, bridge=bridge, app=make_app(bridge, settings), stop=stop, poll=0.1)

    worker = Worker(run)
    try:
        failed = eventually(lambda: in_error(handlers, inst.server_id))
    finally:
        worker.close()
    assert failed.task_state is None and failed.fault is not None
    assert f"position {request_at} was quarantined" in failed.fault["details"]
    [record] = quarantine.list(scheduler.DURABLE)
    assert (record.position, record.error) == (request_at, "ValueError")
    assert "many" not in record.reason  # the value it choked on is not repeated


# -- a hypervisor worker --------------------------------------------------------------------------
HOST_XML = """<?xml version="1.0"?>
<node>
  <cpu><mhz>2000</mhz><model>x86_64</model><nodes>1</nodes><sockets>1</sockets><cores>4</cores>
    <threads>1</threads><active>4</active><max>4</max></cpu>
  <memory>8388608</memory>
</node>
"""


def test_a_hypervisor_worker_quarantines_poison_events_and_spawns_the_rest(
    app: Stratus, handlers: Handlers, quarantine: Quarantine, bridge: NatsBridge, settings: Settings,
    tmp_path: Path,
) -> None:  # fmt: skip
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    (tmp_path / "host.xml").write_text(HOST_XML)
    conn = libvirt.open(f"test://{tmp_path / 'host.xml'}")
    driver = LibvirtDriver(lambda: conn, instances_path=tmp_path)
    host = "cmp-q"
    # One consumer thread: a poison event that stopped it would stop the host.
    s = dataclasses.replace(settings, host_name=host, host_concurrency=1)
    part = hypervisor.durable_name(host)

    def run(stop: threading.Event) -> None:
        hypervisor.run(s, bridge=bridge, app=app, driver=driver, stop=stop, instances_path=tmp_path / "i",
                       retry=RetryPolicy(delays=(0.05,)), poll=0.1)  # fmt: skip

    def spawned(server: str) -> bool:
        return handlers.instance(server).vm_state == VmState.ACTIVE

    def place(name: str) -> str:
        server = handlers.create_server(CreateServer(name, "p", "u", "1")).id
        handlers.place_instance(PlaceInstance(server, host))
        return server

    handlers.create_flavor(CreateFlavor("1", "tiny", 1, 64, 1))
    worker = Worker(run)
    try:
        eventually(lambda: host in {h.hostname for h in _hosts(handlers, host)})
        garbled_at = garbled(app, get_topic(Instance.Scheduled))  # type: ignore[attr-defined]
        # an unknown event type (its class is nowhere) in a valid envelope, on a placement's subject
        unknown_type = StoredEvent(
            uuid4(), 1, "commands.instance_v9:Instance.Scheduled", b'{"host": "cmp-q"}'
        )
        app.recorder.insert_events([unknown_type])
        unknown_at = head(app)
        good = place("vm1")
        eventually(lambda: spawned(good))
    finally:
        worker.close()  # fails the test if the worker died
    assert sorted(by_position(quarantine.list(), part)) == [garbled_at, unknown_at]
    assert all(r.error and r.reason for r in quarantine.list())

    worker = Worker(run)
    try:
        after = place("vm2")
        eventually(lambda: spawned(after))
    finally:
        worker.close()
    assert sorted(by_position(quarantine.list(), part)) == [garbled_at, unknown_at]
    conn.close()


def _hosts(handlers: Handlers, host: str) -> list[Any]:
    try:
        return [handlers.host(host)]
    except NotFound:
        return []


def test_a_hypervisor_worker_starts_although_a_server_it_would_recover_cannot_be_loaded(
    app: Stratus, handlers: Handlers, quarantine: Quarantine, bridge: NatsBridge, settings: Settings,
    tmp_path: Path,
) -> None:  # fmt: skip
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    (tmp_path / "host.xml").write_text(HOST_XML)
    conn = libvirt.open(f"test://{tmp_path / 'host.xml'}")
    driver = LibvirtDriver(lambda: conn, instances_path=tmp_path)
    host = "cmp-r"
    s = dataclasses.replace(settings, host_name=host, host_concurrency=1)
    handlers.create_flavor(CreateFlavor("1", "tiny", 1, 64, 1))
    handlers.register_host(RegisterHost(host, 4, 8192, 40))
    # A server left spawning on this host (its worker died), whose history then got a garbled event.
    stuck = handlers.create_server(CreateServer("stuck", "p", "u", "1")).id
    handlers.place_instance(PlaceInstance(stuck, host))
    handlers.start_spawning(StartSpawning(stuck, host))
    version = handlers.instance(stuck).version
    topic = get_topic(Instance.Updated)  # type: ignore[attr-defined]
    app.recorder.insert_events([StoredEvent(UUID(stuck), version + 1, topic, b"\x00\xffgarbled")])

    def run(stop: threading.Event) -> None:
        hypervisor.run(s, bridge=bridge, app=app, driver=driver, stop=stop, instances_path=tmp_path / "i",
                       retry=RetryPolicy(delays=(0.05,)), poll=0.1)  # fmt: skip

    worker = Worker(run)
    try:
        good = handlers.create_server(CreateServer("good", "p", "u", "1")).id
        handlers.place_instance(PlaceInstance(good, host))
        eventually(lambda: handlers.instance(good).vm_state == VmState.ACTIVE)
    finally:
        worker.close()  # fails the test if the worker died at start
    # The stuck server's placement, delivered to the worker, could not load it either: quarantined.
    records = [r for r in quarantine.list(hypervisor.durable_name(host)) if r.originator_id == stuck]
    assert [r.topic for r in records] == [get_topic(Instance.Scheduled)]  # type: ignore[attr-defined]
    conn.close()


class BuggyDriver:
    """Our port around the real test driver, whose spawn fails with an error no step classifies."""

    def __init__(self, inner: LibvirtDriver) -> None:
        self.inner = inner

    def inventory(self) -> HostInventory:
        return self.inner.inventory()

    def spawn(self, guest: GuestSpec) -> int:
        raise RuntimeError("a bug in the driver")

    def destroy(self, uuid: str) -> None:
        self.inner.destroy(uuid)

    def power_state(self, uuid: str) -> int:
        return self.inner.power_state(uuid)

    def list_domains(self) -> Sequence[DomainInfo]:
        return self.inner.list_domains()

    def close(self) -> None:
        self.inner.close()


def test_a_spawn_the_hypervisor_quarantines_leaves_its_server_in_error_not_building(
    app: Stratus, handlers: Handlers, quarantine: Quarantine, bridge: NatsBridge, settings: Settings,
    tmp_path: Path,
) -> None:  # fmt: skip
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    (tmp_path / "host.xml").write_text(HOST_XML)
    conn = libvirt.open(f"test://{tmp_path / 'host.xml'}")
    driver = BuggyDriver(LibvirtDriver(lambda: conn, instances_path=tmp_path))
    host = "cmp-b"
    s = dataclasses.replace(settings, host_name=host, host_concurrency=1)
    handlers.create_flavor(CreateFlavor("1", "tiny", 1, 64, 1))
    handlers.register_host(RegisterHost(host, 4, 8192, 40))
    server = handlers.create_server(CreateServer("vm", "p", "u", "1")).id
    placed_at = handlers.place_instance(PlaceInstance(server, host)).position

    def run(stop: threading.Event) -> None:
        hypervisor.run(s, bridge=bridge, app=app, driver=driver, stop=stop, instances_path=tmp_path / "i",
                       retry=RetryPolicy(delays=(0.05,)), poll=0.1)  # fmt: skip

    worker = Worker(run)
    try:
        failed = eventually(lambda: in_error(handlers, server))
    finally:
        worker.close()
    assert failed.fault is not None and failed.fault["code"] == "compute.spawn_failed"
    assert f"position {placed_at} was quarantined" in failed.fault["details"]
    [record] = quarantine.list(hypervisor.durable_name(host))
    assert (record.position, record.error, record.reason) == (
        placed_at,
        "RuntimeError",
        "a bug in the driver",
    )
    conn.close()
