"""PostgreSQL URLs: an unreachable server is reported, and a URL with another database name."""

from __future__ import annotations

import psycopg
import pytest

from stratus.postgres import PostgresUnavailable, check_connection, with_database


def test_unreachable_server_is_reported_as_unavailable() -> None:
    with pytest.raises(PostgresUnavailable) as caught:
        check_connection("postgresql://postgres@/postgres?host=/nonexistent", timeout=1)
    assert isinstance(caught.value.__cause__, psycopg.OperationalError)


def test_with_database_replaces_only_the_name() -> None:
    assert (
        with_database("postgresql://u:p@db.example:5433/postgres?sslmode=require", "x y")
        == "postgresql://u:p@db.example:5433/x%20y?sslmode=require"
    )
    assert (
        with_database("postgresql://postgres@/postgres?host=/tmp/pg", "t_1")
        == "postgresql://postgres@/t_1?host=/tmp/pg"
    )
    dsn = with_database("host=localhost dbname=postgres user=me", "t_2")
    assert "dbname=t_2" in dsn and "user=me" in dsn
