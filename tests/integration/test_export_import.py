"""An exported log imported into an empty stream gives the same read models, row for row (real
JetStream, real projector, two PostgreSQL databases); and old events replay into a newer shape."""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import orjson
import psycopg
import pytest
from eventsourcing.persistence import StoredEvent
from psycopg import sql
from psycopg.rows import dict_row

import schemas
from commands.app import Stratus
from commands.flavors.create import CreateFlavor
from commands.hosts.register import RegisterHost
from commands.instance import Instance
from commands.servers.create import CreateServer
from commands.servers.delete import DeleteServer, FinishDeletion
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import FailInstance, FinishSpawning, StartSpawning
from commands.states import PowerState
from projections import asof, runner
from projections.queries import current_position
from projections.schema import LIVE_SCHEMA, TABLES, ensure_live_schema
from stratus.audit import export, history, verify
from stratus.config import Settings
from stratus.context import Actor, CommandContext, acting
from stratus.eventstore import Factory, JetStreamApplicationRecorder, NatsBridge
from stratus.postgres import create_database, drop_database
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.nats import unique_settings


@pytest.fixture
def second_database(pg_admin_url: str) -> Iterator[str]:
    name = f"t_import_{uuid.uuid4().hex[:8]}"
    yield create_database(pg_admin_url, name)
    drop_database(pg_admin_url, name)


def project(settings: Settings, until: int) -> None:
    """Run the real projector on ``settings``' stream and database until it applied ``until``."""
    url = settings.database_url or ""
    with psycopg.connect(url, autocommit=True) as conn:
        ensure_live_schema(conn)
    stop = threading.Event()
    thread = threading.Thread(
        target=runner.run, args=(settings, stop), kwargs={"idle_wait": 0.05}, daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + 30
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            while current_position(conn) < until:
                assert time.monotonic() < deadline, "the projector did not catch up"
                time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=15)


def rows(url: str) -> dict[str, list[dict[str, Any]]]:
    out = {}
    with psycopg.connect(url, row_factory=dict_row) as conn:
        for table, key in TABLES:
            order = sql.SQL(", ").join(sql.Identifier(k) for k in key)
            query = sql.SQL("SELECT * FROM {}.{} ORDER BY {}").format(
                sql.Identifier(LIVE_SCHEMA), sql.Identifier(table), order
            )
            found = conn.execute(query).fetchall()
            if table == "tracking":  # when the projector wrote it (its own clock), not a fact of the log
                found = [{k: v for k, v in r.items() if k != "updated_at"} for r in found]
            out[table] = found
    return out


def test_import_into_an_empty_cluster_gives_the_same_read_models(
    bridge: NatsBridge, settings: Settings, database_url: str, second_database: str
) -> None:
    handlers = Handlers(Stratus(Factory(bridge=bridge, settings=settings)))
    with acting(CommandContext(actor=Actor("bob", "p1", ("member",)))):
        handlers.create_flavor(CreateFlavor("1", "m1.tiny", 1, 512, 1))
        handlers.create_flavor(CreateFlavor("2", "m1.small", 2, 2048, 10))
        handlers.register_host(RegisterHost("cmp-1", 8, 16384, 100))
        handlers.register_host(RegisterHost("cmp-2", 4, 8192, 50))
        kept = handlers.create_server(CreateServer("kept", "p1", "bob", "2", metadata={"a": "b"}))
        handlers.place_instance(PlaceInstance(kept.id, "cmp-2"))
        handlers.start_spawning(StartSpawning(kept.id, "cmp-2"))
        handlers.finish_spawning(FinishSpawning(kept.id, PowerState.RUNNING))
        gone = handlers.create_server(CreateServer("gone", "p1", "bob", "1"))
        handlers.place_instance(PlaceInstance(gone.id, "cmp-1"))
        handlers.delete_server(DeleteServer(gone.id, "p1"))
        handlers.finish_deletion(FinishDeletion(gone.id))
        bad = handlers.create_server(CreateServer("bad", "p2", "carol", "1"))
        handlers.place_instance(PlaceInstance(bad.id, "cmp-1"))
        last = handlers.fail_instance(FailInstance(bad.id, "compute.spawn_failed", "no", "trace")).position

    lines = list(export.export_lines(settings.nats_urls, settings.stream, settings.subject_prefix))
    target = dataclasses.replace(unique_settings(settings.nats_urls[0]), database_url=second_database)
    target_recorder = JetStreamApplicationRecorder.from_settings(bridge, target)
    target_recorder.ensure_stream()
    try:
        assert (
            export.import_events(bridge, target.stream, target.subject_prefix, export.read_lines(lines))
            == last
        )
        assert target_recorder.max_notification_id() == last

        project(dataclasses.replace(settings, database_url=database_url), last)
        project(target, last)
        original, imported = rows(database_url), rows(second_database)
        assert sum(len(v) for v in original.values()) >= 8
        assert original["instances"] and original["host_claims"] and original["flavors"]
        assert imported == original
        anchor = verify.verify(settings.nats_urls, settings.stream, settings.subject_prefix).global_hash
        again = verify.verify(target.nats_urls, target.stream, target.subject_prefix, anchors={last: anchor})
        assert again.ok
    finally:
        target_recorder.delete_stream()


def test_version_1_events_replay_into_the_current_shape(
    recorder: JetStreamApplicationRecorder, bridge: NatsBridge, settings: Settings
) -> None:
    """The rule for changing events (docs/audit.md): a stored v1 ``Instance.Requested`` stays as it
    was written, validates against its v1 schema, and loads (and reconstructs as of the past) in the
    v2 shape through ``upcast_v1_v2``."""
    server_id = uuid.uuid4()
    v1 = {
        "timestamp": {"_type_": "datetime_iso", "_data_": "2026-01-02T03:04:05.123456+00:00"},
        "originator_topic": "commands.instance:Instance",
        "name": "old",
        "project_id": "p1",
        "user_id": "u1",
        "flavor": {"id": "1", "name": "m1.tiny", "vcpus": 1, "ram": 512, "disk": 1, "ephemeral": 0},
        "image_ref": "cirros",
        "metadata": {},
        "availability_zone": None,
        "request_key": None,
    }
    stored = StoredEvent(server_id, 1, "commands.instance:Instance.Requested", orjson.dumps(v1))
    [position] = recorder.append([stored])
    [entry] = history.all_entries(recorder, server_id)
    assert entry.envelope.schemaversion == 1
    app = Stratus(Factory(bridge=bridge, settings=settings))
    instance: Any = app.repository.get(server_id)
    assert isinstance(instance, Instance)
    assert (instance.name, instance.tags, instance.ports, instance.key_name) == ("old", [], [], None)
    # and through upcast_v2_v3 into version 3: launch index 0, the flavor without extra specs
    assert (instance.launch_index, instance.flavor["extra_specs"]) == (0, {})
    past = asof.state_at(app, recorder, server_id, asof.AsOf(position=position))
    assert past is not None and past.state["tags"] == [] and past.state["description"] is None
    # what is stored is untouched: still version 1, and the chain still holds
    assert verify.verify(settings.nats_urls, settings.stream, settings.subject_prefix).ok
    assert schemas.event_schema_name("instance", "requested", 1) in schemas.event_schema_names()
    assert schemas.event_schema_name("instance", "requested", 2) in schemas.event_schema_names()
    assert schemas.event_schema_name("instance", "requested", 3) in schemas.event_schema_names()
