"""The live projector back after downtime: while more than a batch behind the log's head it catches
up reading below nats-py (``projections.runner.catch_up``, the raw reader a rebuild replays with),
then follows the log through nats-py; the tables are those a replay through nats-py makes. A raw
connection lost mid catch-up is not an error: the catch-up reads on through nats-py.

The module's stream is on a JetStream server of its own (``own_nats_server``): its monitoring tells
which reads went below nats-py (``raw_reads``), and one test restarts it."""

from __future__ import annotations

import logging
import threading
from typing import Any

import psycopg
import pytest

from commands.app import Stratus
from commands.servers.create import CreateServer
from commands.servers.delete import DeleteServer, FinishDeletion
from commands.servers.scheduling import PlaceInstance
from projections import queries
from projections.projector import Projector
from projections.rebuild import OLD_SCHEMA, rebuild
from projections.runner import CATCH_UP_BATCH, catch_up
from projections.schema import LIVE_SCHEMA
from stratus.config import Settings
from stratus.natsserver import NatsServer
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.operations import Operations
from tests.fixtures.nats import raw_reads, unique_settings
from tests.fixtures.projections import head, populate, projector_thread, snapshot
from tests.fixtures.workers import eventually

BATCH = 500  # the runner's batch size


@pytest.fixture
def settings(own_nats_server: NatsServer) -> Settings:
    """This module's stream on a JetStream server of its own."""
    return unique_settings(own_nats_server.url)


def _servers(app: Stratus, handlers: Handlers, n: int) -> None:
    """``n`` servers created and placed (after ``populate``: its flavor and hosts)."""
    Operations(app).set_quota("proj-w", {"instances": -1, "cores": -1, "ram": -1}, {})
    for i in range(n):
        server = handlers.create_server(CreateServer(f"later-{i}", "proj-w", "u", "p1")).id
        handlers.place_instance(PlaceInstance(server, "pop-0"))


def _sent(server: NatsServer, before: dict[int, dict[str, Any]]) -> list[int]:
    """Messages sent to each raw reader connection that is not in ``before``."""
    return [c["out_msgs"] for cid, c in raw_reads(server).items() if cid not in before]


def test_the_catch_up_applies_in_a_rebuilds_batches_then_follows_in_its_own(
    app: Stratus, rm: psycopg.Connection[Any], own_nats_server: NatsServer
) -> None:
    populate(app, instances=60, hosts=3, chunk=30)
    projector = Projector(app.recorder, app.mapper, rm, batch_size=50)  # type: ignore[arg-type]
    applied: list[int] = []  # the batches read (and applied): their lengths
    fetch = projector.fetch

    def counted(after: int) -> Any:
        batch = fetch(after)
        if batch.entries:
            applied.append(len(batch.entries))
        return batch

    projector.fetch = counted  # type: ignore[method-assign]
    assert catch_up(projector, app.recorder, threading.Event()) == head(app)  # type: ignore[arg-type]
    assert head(app) > CATCH_UP_BATCH // 10 and applied == [head(app)], applied  # one batch, not 50s
    assert projector.batch_size == 50 and projector.log is app.recorder  # following as before


@pytest.mark.timeout(120)
def test_a_runner_back_after_downtime_catches_up_below_nats_py_then_follows_live(
    app: Stratus,
    handlers: Handlers,
    db_settings: Settings,
    rm: psycopg.Connection[Any],
    own_nats_server: NatsServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    populate(app, instances=60, hosts=3, chunk=30)
    with projector_thread(db_settings):
        assert queries.wait_for_position(rm, head(app), timeout=30)
    stopped_at = head(app)
    _servers(app, handlers, 200)  # written while the projector is down: more than a batch
    behind = head(app) - stopped_at
    assert behind > BATCH
    before = raw_reads(own_nats_server)

    with caplog.at_level(logging.INFO), projector_thread(db_settings):
        assert queries.wait_for_position(rm, head(app), timeout=30)
        # the catch-up's raw connection, once the monitoring lists it (it may be a moment late)
        caught_up = eventually(lambda: raw_reads(own_nats_server) or None)
        _servers(app, handlers, 3)  # live: followed through nats-py
        assert queries.wait_for_position(rm, head(app), timeout=30)
        assert raw_reads(own_nats_server).keys() == caught_up.keys()

    assert f"projector catching up from position {stopped_at} to {stopped_at + behind}" in caplog.text
    assert "through nats-py" not in caplog.text and "raw reader failed" not in caplog.text
    (sent,) = _sent(own_nats_server, before)
    assert sent >= behind  # the whole gap below nats-py, and the end-of-batch replies
    # the tables equal a replay through nats-py, row for row
    rebuild(rm, app.recorder, app.mapper, raw_read=False, keep_old=True)  # type: ignore[arg-type]
    assert snapshot(rm, OLD_SCHEMA) == snapshot(rm, LIVE_SCHEMA)
    assert len(snapshot(rm)["instances"]) == 60 + 200 + 3


@pytest.mark.timeout(120)
def test_a_catch_up_that_changes_rows_the_live_tables_hold_leaves_what_a_replay_makes(
    app: Stratus,
    handlers: Handlers,
    db_settings: Settings,
    rm: psycopg.Connection[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a catch-up's writer COPYs the rows new to the live tables and deletes and COPYs the changed
    # ones it knows the tables hold (``ReadModelView.copies``): servers the tables held deleted,
    # their claims released, their hosts' usage changed, beside new servers and claims
    populate(app, instances=60, hosts=3, chunk=30)
    with projector_thread(db_settings):
        assert queries.wait_for_position(rm, head(app), timeout=30)
    active = "SELECT id::text FROM stratus_rm.instances WHERE status = 'ACTIVE' ORDER BY id LIMIT 15"
    held = [server for (server,) in rm.execute(active)]
    assert len(held) == 15
    for server in held:
        handlers.delete_server(DeleteServer(server, None))
        handlers.finish_deletion(FinishDeletion(server))
    _servers(app, handlers, 200)
    with caplog.at_level(logging.INFO), projector_thread(db_settings):
        assert queries.wait_for_position(rm, head(app), timeout=30)
    assert "projector catching up from position" in caplog.text
    assert "failed in the writer" not in caplog.text  # no batch fell back to upserts on its own
    rebuild(rm, app.recorder, app.mapper, raw_read=False, keep_old=True)  # type: ignore[arg-type]
    assert snapshot(rm, OLD_SCHEMA) == snapshot(rm, LIVE_SCHEMA)
    statuses = rm.execute("SELECT status FROM stratus_rm.instances WHERE id::text = ANY(%s)", (held,))
    assert [status for (status,) in statuses] == ["DELETED"] * 15


def test_a_runner_a_batch_behind_or_less_reads_nothing_below_nats_py(
    app: Stratus, rm: psycopg.Connection[Any], own_nats_server: NatsServer
) -> None:
    populate(app, instances=20, hosts=2, chunk=10)
    assert head(app) <= BATCH
    projector = Projector(app.recorder, app.mapper, rm, batch_size=BATCH)  # type: ignore[arg-type]
    assert catch_up(projector, app.recorder, threading.Event()) == 0  # type: ignore[arg-type]
    assert raw_reads(own_nats_server) == {}


@pytest.mark.timeout(120)
def test_a_catch_up_whose_raw_connection_is_lost_reads_on_through_nats_py(
    app: Stratus, rm: psycopg.Connection[Any], own_nats_server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    populate(app, instances=150, hosts=3, chunk=50)
    restarted: list[int] = []

    def restart_once(position: int) -> None:  # after the first batch: the connection drops
        if not restarted:
            restarted.append(position)
            own_nats_server.restart()

    projector = Projector(app.recorder, app.mapper, rm, batch_size=100)  # type: ignore[arg-type]
    projector.progress = restart_once
    with caplog.at_level(logging.WARNING, "stratus.rebuild"):
        position = catch_up(projector, app.recorder, threading.Event(), batch_size=100)  # type: ignore[arg-type]
    assert restarted == [100] and position == head(app)
    assert "the raw reader failed" in caplog.text and "reading on through nats-py" in caplog.text
    assert projector.log is app.recorder  # following through nats-py from here
    live = snapshot(rm)
    rebuild(rm, app.recorder, app.mapper, raw_read=False)  # type: ignore[arg-type]
    assert snapshot(rm) == live and len(live["instances"]) == 150


def test_a_catch_up_whose_tables_a_rebuild_swaps_between_its_batches_goes_on_from_the_new_ones(
    app: Stratus, rm: psycopg.Connection[Any], database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The catch-up applies a batch on rows it carried from the batches it wrote; a rebuild swapping
    in other tables meanwhile must not have those rows written over its own (the batch is refused
    and applied again from the new tables' position)."""
    populate(app, instances=90, hosts=3, chunk=30)
    projector = Projector(app.recorder, app.mapper, rm, batch_size=50)  # type: ignore[arg-type]
    swapped: list[int] = []

    def swap_once(position: int) -> None:
        if not swapped:
            with psycopg.connect(database_url, autocommit=True) as other:
                swapped.append(rebuild(other, app.recorder, app.mapper).position)  # type: ignore[arg-type]

    projector.progress = swap_once  # after the first committed batch
    with caplog.at_level(logging.WARNING, "stratus.projector"):
        assert projector.catch_up() == head(app)
    assert "failed in the writer (_Moved)" in caplog.text
    assert swapped == [head(app)]
    caught_up = snapshot(rm, LIVE_SCHEMA)
    rebuild(rm, app.recorder, app.mapper)  # type: ignore[arg-type]
    assert caught_up == snapshot(rm, LIVE_SCHEMA)
