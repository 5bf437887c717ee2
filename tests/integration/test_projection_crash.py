"""kill -9 of the projector process in the middle of a batch loses no event and applies none twice.

The projector runs as a real process (``stratus projector``) over a log of tens of
thousands of events, with large batches. It is killed with SIGKILL whenever PostgreSQL shows it
inside a batch transaction (holding the writers' lock), restarted, killed again, and finally
allowed to finish and stopped with SIGTERM. The read models must then equal a fresh rebuild row
for row, and the counts the events imply.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from commands.app import Stratus
from projections import queries
from projections.projector import FIRST_REPLAY_BATCH, _growing
from projections.rebuild import OLD_SCHEMA, rebuild
from projections.schema import LIVE_SCHEMA, WRITER_LOCK
from stratus.config import Settings
from tests.fixtures.projections import head, populate, snapshot

ROOT = Path(__file__).resolve().parents[2]
BATCH = 2000
KILLS = 3


def _start(settings: Settings, log_path: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, **settings.to_env()}
    with log_path.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "processes.cli", "projector", "--batch-size", str(BATCH)],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def _in_batch(conn: psycopg.Connection[Any]) -> bool:
    """The projector's session holds the writers' advisory lock: it is inside a batch transaction."""
    row = conn.execute(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE a.application_name = 'stratus-projector' AND a.datname = current_database() "
        "AND l.locktype = 'advisory' AND l.granted AND l.database = a.datid "
        "AND ((l.classid::bigint << 32) | l.objid::bigint) = %s",
        (WRITER_LOCK,),
    ).fetchone()
    return bool(row and row[0])


def _boundaries(start: int, end: int) -> set[int]:
    """Where a projector's life that starts at ``start`` commits its batches: a replay's first
    batches are smaller (``FIRST_REPLAY_BATCH``, doubling up to ``BATCH``), the last one ends at ``end``."""
    sizes = _growing(FIRST_REPLAY_BATCH if end - start > BATCH else BATCH, BATCH)
    at, found = start, set()
    while at < end:
        at = min(at + next(sizes), end)
        found.add(at)
    return found


def _position(conn: psycopg.Connection[Any]) -> int:
    try:
        return queries.current_position(conn)
    except queries.ReadModelUnavailable:
        return 0


@pytest.mark.timeout(240)
def test_kill_9_mid_batch_then_restart_loses_nothing_and_doubles_nothing(
    app: Stratus, db_settings: Settings, database_url: str, tmp_path: Path
) -> None:
    expected = populate(app, instances=5000, hosts=7, chunk=150)
    end = head(app)
    assert end > 6 * BATCH
    log_path = tmp_path / "projector.log"
    kills: list[int] = []  # the tracking position seen right after each kill
    with psycopg.connect(database_url, autocommit=True) as conn:
        for _ in range(KILLS):
            before = _position(conn)
            proc = _start(db_settings, log_path)
            try:
                deadline = time.monotonic() + 60
                # Wait until this life has committed a batch and is inside the next one, then kill.
                while not (_position(conn) > before and _in_batch(conn)):
                    assert proc.poll() is None, log_path.read_text()
                    assert time.monotonic() < deadline, "the projector made no progress"
                    time.sleep(0.002)
                proc.send_signal(signal.SIGKILL)
            finally:
                proc.wait(10)
            assert proc.returncode == -signal.SIGKILL
            position = _position(conn)
            kills.append(position)
            # Only whole batches ever commit: the position is a batch boundary, short of the end.
            assert position in _boundaries(before, end) and position < end, (before, position, end)

        proc = _start(db_settings, log_path)
        try:
            assert queries.wait_for_position(conn, end, timeout=120), log_path.read_text()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
        assert proc.returncode == 0, log_path.read_text()
        assert kills == sorted(kills) and kills[-1] > 0

        # The counts the events imply: one row per instance, the claims of the running ones.
        counts = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE deleted), sum(version) FROM stratus_rm.instances"
        ).fetchone()
        running = expected["instances"] - expected["deleted"]
        assert counts == (expected["instances"], expected["deleted"], 4 * running + 6 * expected["deleted"])
        hosts = queries.list_hosts(conn)
        assert [h.running_vms for h in hosts] == [expected["running"][i] for i in range(7)]
        assert [h.disk_gb_used for h in hosts] == [2 * expected["running"][i] for i in range(7)]
        claims = conn.execute("SELECT count(*) FROM stratus_rm.host_claims").fetchone()
        assert claims == (running,)

        # And a replay from scratch, in one uninterrupted go, gives the same tables row for row.
        live = snapshot(conn)
        rebuild(conn, app.recorder, app.mapper, keep_old=True)  # type: ignore[arg-type]
        assert snapshot(conn, OLD_SCHEMA) == live
        assert snapshot(conn, LIVE_SCHEMA) == live
