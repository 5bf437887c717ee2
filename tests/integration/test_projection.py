"""The read models from real events on JetStream, applied to a real PostgreSQL: rows, batches, positions.

The helpers at the top (``populate``, ``snapshot``, the ``app``/``rm`` fixtures) are shared with
the crash and rebuild tests.
"""

from __future__ import annotations

import threading
import time
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest
from eventsourcing.persistence import StoredEvent
from psycopg import sql

from commands.app import Stratus
from commands.flavor import Flavor
from commands.flavors.create import CreateFlavor
from commands.hosts.register import RegisterHost
from commands.servers.create import CreateServer
from commands.servers.delete import DeleteServer, FinishDeletion
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import FailInstance, FinishSpawning, StartSpawning
from projections import queries
from projections.schema import POSITION_CHANNEL
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.projections import head, make_projector, populate, public_image

# -- shared helpers (the crash and rebuild tests use them too) ----------------------------------


# -- rows -----------------------------------------------------------------------------------------
def test_a_realistic_sequence_produces_the_right_rows(
    app: Stratus, handlers: Handlers, rm: psycopg.Connection[Any]
) -> None:
    h = handlers
    h.create_flavor(CreateFlavor("1", "m1.tiny", 1, 512, 1))
    h.create_flavor(CreateFlavor("2", "m1.small", 2, 2048, 20, ephemeral=5, is_public=False, description="s"))
    h.create_flavor(CreateFlavor("3", "m1.gone", 1, 256, 1))
    app.save(_deleted(h.flavor("3")))
    c1 = h.register_host(RegisterHost("c1", 4, 8192, 100)).id
    h.register_host(RegisterHost("c2", 2, 1024, 10))

    image = public_image(app)

    def server(name: str, flavor: str = "1", project: str = "p1") -> str:
        # any_flavor: booted as an admin may boot the private flavor "2"
        cmd = CreateServer(
            name, project, "u1", flavor, image_ref=image, metadata={"k": name}, any_flavor=True
        )
        return h.create_server(cmd).id

    a = server("vm-a")
    h.place_instance(PlaceInstance(a, "c1"))
    h.start_spawning(StartSpawning(a, "c1"))
    h.finish_spawning(FinishSpawning(a, 1))
    b = server("vm-b", flavor="2")
    h.place_instance(PlaceInstance(b, "c1"))
    h.start_spawning(StartSpawning(b, "c1"))
    c = server("vm-c")
    h.fail_instance(FailInstance(c, "compute.no_valid_host", "No valid host was found."))
    d = server("vm-d")
    h.place_instance(PlaceInstance(d, "c2"))
    h.start_spawning(StartSpawning(d, "c2"))
    h.finish_spawning(FinishSpawning(d, 1))
    h.delete_server(DeleteServer(d, "p1"))
    e = server("vm-e", project="p2")
    h.delete_server(DeleteServer(e, "p2"))  # never placed: deleted at once
    f = server("vm-f")
    h.place_instance(PlaceInstance(f, "c2"))
    last = h.fail_instance(FailInstance(f, "compute.spawn_failed", "boom", "trace")).position

    p = make_projector(app, rm)
    assert p.catch_up() == last == head(app)
    assert queries.current_position(rm) == last
    d_row = queries.get_server(rm, d, "p1")  # the in-between state: deletion under way
    assert d_row is not None
    assert (d_row["vm_state"], d_row["task_state"], d_row["status"]) == ("active", "deleting", "ACTIVE")
    h.finish_deletion(FinishDeletion(d))
    assert p.catch_up() == head(app)

    def row(server_id: str) -> dict[str, Any]:
        found = queries.get_server(rm, server_id, None)
        assert found is not None
        return found

    ra = row(a)
    assert pick(ra, "vm_state", "task_state", "power_state", "status") == ("active", None, 1, "ACTIVE")
    assert ra["host"] == "c1"
    assert ra["launched_at"] is not None and ra["fault"] is None and not ra["deleted"]
    assert ra["flavor"]["id"] == "1" and ra["metadata"] == {"k": "vm-a"} and ra["image_ref"] == image
    assert ra["version"] == app.repository.get(UUID(a)).version
    rb = row(b)
    assert pick(rb, "vm_state", "task_state", "status", "host") == ("building", "spawning", "BUILD", "c1")
    rc = row(c)
    assert (rc["vm_state"], rc["status"], rc["host"]) == ("error", "ERROR", None)
    assert rc["fault"]["code"] == "compute.no_valid_host"
    assert rc["fault"]["message"] == "No valid host was found."
    assert rc["fault"]["created"].endswith("Z")
    rd = row(d)
    assert pick(rd, "vm_state", "task_state", "power_state", "status") == ("deleted", None, 0, "DELETED")
    assert rd["deleted"] and rd["deleted_at"] is not None
    assert row(e)["deleted"] and row(e)["host"] is None
    rf = row(f)
    assert (rf["status"], rf["host"], rf["fault"]["details"]) == ("ERROR", "c2", "trace")
    # the same append released vm-f's claim on c2 and its project's usage, after the fault itself
    assert last - 2 <= rf["position"] < last

    # Hosts: c1 holds vm-a (tiny) and vm-b (small: disk 20 + ephemeral 5); c2's claims were released.
    host1 = queries.get_host(rm, "c1")
    assert host1 is not None and queries.get_host(rm, c1) == host1
    assert pick(host1, "vcpus_used", "memory_mb_used", "disk_gb_used", "running_vms") == (3, 2560, 26, 2)
    assert pick(host1, "vcpus_capacity", "vcpus_free", "memory_mb_free", "disk_gb_free") == (16, 13, 5632, 74)
    host2 = queries.get_host(rm, "c2")
    assert host2 is not None
    assert pick(host2, "vcpus_used", "memory_mb_used", "disk_gb_used", "running_vms") == (0, 0, 0, 0)
    # vm-d's release, in the last append (with the project's usage after it)
    assert head(app) - 1 <= host2["position"] <= head(app)
    assert [h.hostname for h in queries.list_hosts(rm)] == ["c1", "c2"]
    claims = rm.execute("SELECT instance_id FROM stratus_rm.host_claims ORDER BY instance_id").fetchall()
    assert sorted(x[0] for x in claims) == sorted([a, b])

    # Flavors.
    assert [fl.flavorid for fl in queries.list_flavors(rm)] == ["1", "2"]
    assert [fl.flavorid for fl in queries.list_flavors(rm, include_private=False)] == ["1"]
    assert [fl.flavorid for fl in queries.list_flavors(rm, limit=1, marker="1")] == ["2"]
    gone = queries.get_flavor(rm, "3")
    assert gone is not None and gone["deleted"] and gone["deleted_at"] is not None
    small = queries.get_flavor(rm, "2")
    assert small is not None
    assert pick(small, "vcpus", "ram", "disk", "ephemeral", "is_public") == (2, 2048, 20, 5, False)
    assert small["description"] == "s"

    # Listing: newest first, paging by marker, filters, projects.
    def listed(**kw: Any) -> list[str]:
        return [r.name for r in queries.list_servers(rm, limit=10, marker=None, **kw)]

    assert listed(project_id="p1") == ["vm-f", "vm-c", "vm-b", "vm-a"]
    page1 = queries.list_servers(rm, project_id="p1", limit=2, marker=None)
    page2 = queries.list_servers(rm, project_id="p1", limit=2, marker=page1[-1].id)
    assert [r.name for r in page1 + page2] == ["vm-f", "vm-c", "vm-b", "vm-a"]
    assert listed(project_id="p1", status="error") == ["vm-f", "vm-c"]
    assert listed(project_id="p1", host="c1") == ["vm-b", "vm-a"]
    assert listed(project_id="p1", name="^vm-[ab]$") == ["vm-b", "vm-a"]
    assert "vm-d" in listed(project_id="p1", include_deleted=True)
    assert listed(project_id=None, include_deleted=True) == ["vm-f", "vm-e", "vm-d", "vm-c", "vm-b", "vm-a"]
    assert queries.get_server(rm, a, "p2") is None
    with pytest.raises(queries.MarkerNotFound):
        queries.list_servers(rm, project_id="p2", limit=10, marker=a)
    with pytest.raises(queries.InvalidFilter):
        queries.list_servers(rm, project_id="p1", limit=10, marker=None, name="(")


def pick(row: dict[str, Any], *keys: str) -> tuple[Any, ...]:
    return tuple(row[k] for k in keys)


def _deleted(flavor: Flavor) -> Flavor:
    flavor.delete()
    return flavor


# -- batches and positions ------------------------------------------------------------------------
def test_each_batch_commits_its_rows_and_one_tracking_update(
    app: Stratus, handlers: Handlers, rm: psycopg.Connection[Any], database_url: str
) -> None:
    for i in range(23):
        handlers.create_flavor(CreateFlavor(f"f{i:02}", f"flavor {i}", 1, 64, 1))
    end = head(app)
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(POSITION_CHANNEL)))
        p = make_projector(app, rm, batch_size=5)
        results = []
        position = p.position()
        while batch := p.read(position):
            result = p.apply(batch, position)
            # Each committed batch leaves the rows and the position in step: nothing half-applied.
            assert queries.current_position(rm) == result.position
            assert len(queries.list_flavors(rm)) == result.position
            results.append(result)
            position = result.position
        announced = [int(n.payload) for n in listener.notifies(timeout=0.5, stop_after=len(results))]
    assert [r.position for r in results] == [5, 10, 15, 20, 23] == announced
    assert end == 23
    assert all(r.applied and r.events == r.processed for r in results)


def test_log_entries_the_read_models_do_not_show_still_advance_the_position(
    app: Stratus, handlers: Handlers, rm: psycopg.Connection[Any]
) -> None:
    handlers.create_flavor(CreateFlavor("1", "tiny", 1, 64, 1))
    foreign = StoredEvent(
        originator_id=uuid4(), originator_version=1, topic="elsewhere.billing:Invoice.Sent", state=b"{}"
    )
    app.recorder.insert_events([foreign])
    handlers.create_flavor(CreateFlavor("2", "small", 1, 64, 1))
    p = make_projector(app, rm)
    result = p.step(0)
    assert (result.position, result.events, result.processed) == (3, 3, 2)
    assert queries.current_position(rm) == 3
    assert [f.flavorid for f in queries.list_flavors(rm)] == ["1", "2"]


def test_a_batch_read_before_another_writer_moved_the_position_is_discarded(
    app: Stratus, handlers: Handlers, rm: psycopg.Connection[Any], database_url: str
) -> None:
    handlers.create_flavor(CreateFlavor("1", "tiny", 1, 64, 1))
    handlers.register_host(RegisterHost("c1", 8, 8192, 100))
    for i in range(3):
        server = handlers.create_server(CreateServer(f"vm{i}", "p", "u", "1")).id
        handlers.place_instance(PlaceInstance(server, "c1"))
    slow = make_projector(app, rm)
    stale = slow.read(0)
    with psycopg.connect(database_url, autocommit=True) as other_conn:
        assert make_projector(app, other_conn).catch_up() == head(app)
    result = slow.apply(stale, 0)
    assert not result.applied and result.position == head(app)
    assert slow.step(result.position).events == 0
    host = queries.get_host(rm, "c1")
    assert host is not None and (host["vcpus_used"], host["running_vms"]) == (3, 3)


def test_two_projectors_racing_apply_every_event_exactly_once(
    app: Stratus, rm: psycopg.Connection[Any], database_url: str
) -> None:
    expected = populate(app, instances=300, hosts=3, chunk=50)
    end = head(app)
    stop = threading.Event()
    errors: list[BaseException] = []

    def follow() -> None:
        try:
            with psycopg.connect(database_url, autocommit=True) as conn:
                make_projector(app, conn, batch_size=37).run(stop, idle_wait=0.05)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=follow) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        assert queries.wait_for_position(rm, end, timeout=60)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert not errors
    hosts = queries.list_hosts(rm)
    assert [h.running_vms for h in hosts] == [expected["running"][i] for i in range(3)]
    assert [h.vcpus_used for h in hosts] == [expected["running"][i] for i in range(3)]
    counts = rm.execute("SELECT count(*), count(*) FILTER (WHERE deleted) FROM stratus_rm.instances")
    assert counts.fetchone() == (expected["instances"], expected["deleted"])
    versions = rm.execute("SELECT DISTINCT version FROM stratus_rm.instances ORDER BY 1").fetchall()
    assert [v[0] for v in versions] == [4, 6]


# -- the runner and read-your-writes --------------------------------------------------------------
def test_wait_for_position_returns_once_the_runner_reaches_it_and_times_out_otherwise(
    handlers: Handlers, app: Stratus, rm: psycopg.Connection[Any], database_url: str, runner: threading.Thread
) -> None:
    handlers.create_flavor(CreateFlavor("1", "tiny", 1, 64, 1))
    for i in range(5):
        written = handlers.create_server(CreateServer(f"vm{i}", "p", "u", "1"))
        started = time.monotonic()
        assert queries.wait_for_position(rm, written.position, timeout=10)
        assert time.monotonic() - started < 2.0
        assert queries.get_server(rm, written.id, "p") is not None

    started = time.monotonic()
    assert not queries.wait_for_position(rm, head(app) + 100, timeout=0.4)
    assert 0.4 <= time.monotonic() - started < 2.0

    # A connection inside a transaction (not autocommit) polls instead of listening.
    with psycopg.connect(database_url) as in_tx:
        written = handlers.create_server(CreateServer("vm-polled", "p", "u", "1"))
        assert queries.wait_for_position(in_tx, written.position, timeout=10)
        assert not queries.wait_for_position(in_tx, written.position + 100, timeout=0.2)


def test_the_runner_reconnects_when_its_database_session_is_killed(
    handlers: Handlers, rm: psycopg.Connection[Any], runner: threading.Thread
) -> None:
    handlers.create_flavor(CreateFlavor("1", "tiny", 1, 64, 1))
    first = handlers.create_server(CreateServer("before", "p", "u", "1"))
    assert queries.wait_for_position(rm, first.position, timeout=10)
    killed = rm.execute(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE application_name = 'stratus-projector' AND datname = current_database()"
    ).fetchone()
    assert killed == (1,)
    second = handlers.create_server(CreateServer("after", "p", "u", "1"))
    assert queries.wait_for_position(rm, second.position, timeout=15)
    assert [s.name for s in queries.list_servers(rm, project_id="p", limit=10, marker=None)] == [
        "after",
        "before",
    ]
    assert runner.is_alive()
