"""The read models' PostgreSQL: DATABASE_URL or the embedded server, and the test databases."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import psycopg
import pytest

from stratus.config import Settings
from stratus.postgres import (
    DatabaseAlreadyExists,
    EmbeddedPostgres,
    PostgresUnavailable,
    check_connection,
    create_database,
    database_url,
    drop_database,
)
from tests.fixtures.postgres import _Spares, empty_database


def _scalar(url: str, query: str) -> object:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


_OWN_SCHEMAS = (
    "SELECT count(*) FROM pg_namespace WHERE nspname NOT IN ('pg_catalog', 'information_schema', "
    "'pg_toast', 'public') AND nspname NOT LIKE 'pg_%temp_%'"
)


def test_each_test_gets_an_empty_database_of_its_own(database_url: str) -> None:
    assert str(_scalar(database_url, "SELECT current_database()")).startswith("t_")
    tables = _scalar(
        database_url, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
    )
    assert tables == 0
    assert _scalar(database_url, _OWN_SCHEMAS) == 0


def test_a_database_is_emptied_for_the_next_test(pg_admin_url: str) -> None:
    url = create_database(pg_admin_url, "stratus-test-recycled")
    try:
        with psycopg.connect(url, autocommit=True) as conn, psycopg.connect(url) as lingering:
            conn.execute("CREATE SCHEMA stratus_rm; CREATE TABLE stratus_rm.t (x int)")
            conn.execute("CREATE TABLE public.u (x serial); INSERT INTO public.u DEFAULT VALUES")
            lingering.execute("SELECT 1")  # a session left open (a test's projector, say)
            empty_database(url)
            assert lingering.closed or lingering.broken or _terminated(lingering)
        assert _scalar(url, _OWN_SCHEMAS) == 0
        assert _scalar(url, "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace") == 0
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE public.u (x int)")  # public is usable again
    finally:
        drop_database(pg_admin_url, "stratus-test-recycled")


def test_a_database_that_held_the_live_schema_is_reset_for_the_next_projector(pg_admin_url: str) -> None:
    """A test running the projector gets the live schema with the rows a new one starts with
    (``tracking`` at 0, no servers), whatever the test before it wrote; a database whose catalog
    a test changed is emptied instead, and a test without the projector never gets tables."""
    spares = _Spares(pg_admin_url)
    try:
        spares.standard()
        url = spares.take(live=True)
        assert _scalar(url, "SELECT position FROM stratus_rm.tracking") == 0
        with psycopg.connect(url, autocommit=True) as conn, psycopg.connect(url) as lingering:
            conn.execute("UPDATE stratus_rm.tracking SET position = 42")
            conn.execute(
                "INSERT INTO stratus_rm.keypairs (id, user_id, name, public_key, fingerprint, type, "
                "created_at, version, position) VALUES (gen_random_uuid(), 'u', 'k', 'ssh-ed25519 x', "
                "'f', 'ssh', now(), 1, 1)"
            )
            lingering.execute("SELECT 1")  # the projector's session, still open
            spares.give_back(url)
            assert _terminated(lingering)
        again = spares.take(live=True)
        assert again == url
        assert _scalar(again, "SELECT position FROM stratus_rm.tracking") == 0
        assert _scalar(again, "SELECT count(*) FROM stratus_rm.keypairs") == 0

        with psycopg.connect(again, autocommit=True) as conn:
            conn.execute("ALTER TABLE stratus_rm.keypairs ADD COLUMN extra int")
        spares.give_back(again)
        assert spares.live == []
        emptied = spares.take(live=False)
        assert emptied == again
        assert _scalar(emptied, _OWN_SCHEMAS) == 0

        spares.give_back(emptied)  # empty: kept empty, not taken for live
        spares.live.append(str(psycopg.conninfo.conninfo_to_dict(spares.take(live=True))["dbname"]))
        fresh = spares.take(live=False)
        spares.empty.append(str(psycopg.conninfo.conninfo_to_dict(fresh)["dbname"]))
        assert fresh != url
        assert _scalar(fresh, _OWN_SCHEMAS) == 0
    finally:
        spares.drop_all()


def _terminated(conn: psycopg.Connection[object]) -> bool:
    try:
        conn.execute("SELECT 1")
    except psycopg.OperationalError:
        return True
    return False


def test_create_and_drop_database(pg_admin_url: str) -> None:
    url = create_database(pg_admin_url, "stratus-Test_create")
    try:
        assert _scalar(url, "SELECT current_database()") == "stratus-Test_create"
        with pytest.raises(DatabaseAlreadyExists):
            create_database(pg_admin_url, "stratus-Test_create")
        # Open sessions do not keep a database alive.
        with psycopg.connect(url):
            drop_database(pg_admin_url, "stratus-Test_create")
    finally:
        drop_database(pg_admin_url, "stratus-Test_create")
    with pytest.raises(PostgresUnavailable):
        check_connection(url)
    drop_database(pg_admin_url, "stratus-Test_create")  # dropping twice is no error


def test_database_url_prefers_the_environment(tmp_path: Path) -> None:
    env = {"DATABASE_URL": "postgresql://elsewhere/db", "STRATUS_DATA_DIR": str(tmp_path)}
    settings = Settings.from_env(env)
    assert database_url(settings) == "postgresql://elsewhere/db"
    assert not (tmp_path / "pg").exists()


def test_database_url_starts_the_embedded_server_under_the_data_dir(pg_tmp_path: Path) -> None:
    settings = dataclasses.replace(Settings.from_env({}), data_dir=pg_tmp_path)
    url = database_url(settings)
    server = EmbeddedPostgres(pg_tmp_path / "pg")
    try:
        assert url == server.url
        assert server.is_running() and server.is_alive()
        assert str(_scalar(url, "SHOW server_version")).startswith("16.")
        # A second part on the same machine shares the running server.
        assert database_url(settings) == url
    finally:
        server.stop()
    assert not server.is_running() and not server.is_alive()


def test_embedded_server_keeps_data_across_restarts(pg_tmp_path: Path) -> None:
    server = EmbeddedPostgres(pg_tmp_path / "pg")
    with server, psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (v text)")
        conn.execute("INSERT INTO kept VALUES ('still here')")
    assert not server.is_running()
    with pytest.raises(PostgresUnavailable):
        check_connection(server.url, timeout=1)
    with server:
        assert _scalar(server.url, "SELECT v FROM kept") == "still here"


def test_embedded_server_with_a_long_data_path_uses_a_short_socket_dir(pg_tmp_path: Path) -> None:
    deep = pg_tmp_path / ("d" * 60) / ("e" * 60)
    server = EmbeddedPostgres(deep / "pg")
    assert server.socket_dir != server.pgdata
    with server:
        assert _scalar(server.url, "SELECT 1") == 1
    assert not server.socket_dir.exists()
