"""The supervisor's parts: unique names, a part that cannot start; the restart policy and its settings."""

from __future__ import annotations

import io

import pytest

from processes.devrun import restart_policy
from processes.supervisor import NO_RESTARTS, ChildProcess, PartFailed, RestartPolicy, Supervisor
from stratus.config import Settings


def test_part_names_are_unique() -> None:
    with pytest.raises(ValueError):
        Supervisor([ChildProcess("api", ["true"]), ChildProcess("api", ["true"])])


def test_a_missing_executable_is_a_start_failure() -> None:
    log = io.StringIO()
    assert Supervisor([ChildProcess("api", ["/nonexistent/gunicorn"])], log=log).run() == 1
    assert "api could not be started" in log.getvalue()
    assert isinstance(PartFailed("x", "y"), Exception)


def test_the_backoff_doubles_with_each_recent_death_up_to_its_maximum() -> None:
    policy = RestartPolicy(backoff=0.5, max_backoff=3.0, crash_loop_deaths=10)
    assert [policy.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert NO_RESTARTS.crash_loop_deaths == 1


def test_an_impossible_restart_policy_is_refused() -> None:
    with pytest.raises(ValueError):
        RestartPolicy(crash_loop_deaths=0)
    with pytest.raises(ValueError):
        RestartPolicy(backoff=5.0, max_backoff=1.0)


def test_stratus_run_takes_its_restart_policy_from_the_settings() -> None:
    env = {
        "STRATUS_RESTART_BACKOFF": "0.25",
        "STRATUS_RESTART_BACKOFF_MAX": "8",
        "STRATUS_CRASH_LOOP_DEATHS": "3",
        "STRATUS_CRASH_LOOP_WINDOW": "120",
    }
    s = Settings.from_env(env)
    assert restart_policy(s) == RestartPolicy(
        backoff=0.25, max_backoff=8.0, crash_loop_deaths=3, crash_loop_window=120.0
    )
    assert Settings.from_env(s.to_env()) == s
    assert restart_policy(Settings()) == RestartPolicy()
    with pytest.raises(ValueError, match="STRATUS_CRASH_LOOP_DEATHS"):
        Settings.from_env({"STRATUS_CRASH_LOOP_DEATHS": "0"})
    with pytest.raises(ValueError, match="STRATUS_RESTART_BACKOFF"):
        Settings.from_env({"STRATUS_RESTART_BACKOFF": "-1"})
