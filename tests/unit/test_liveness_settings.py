"""The workers' heartbeat intervals are settings."""

from __future__ import annotations

import pytest

from stratus.config import Settings


def test_the_workers_intervals_are_settings() -> None:
    env = {"STRATUS_HEARTBEAT_INTERVAL": "2.5", "STRATUS_RECONCILE_INTERVAL": "0"}
    s = Settings.from_env({**env, "STRATUS_SHUTDOWN_TIMEOUT": "7"})
    intervals = (s.heartbeat_interval_seconds, s.reconcile_interval_seconds, s.shutdown_timeout_seconds)
    assert intervals == (2.5, 0, 7)
    assert Settings.from_env(s.to_env()) == s
    with pytest.raises(ValueError, match="STRATUS_HEARTBEAT_INTERVAL must be a number of seconds"):
        Settings.from_env({"STRATUS_HEARTBEAT_INTERVAL": "soon"})
    with pytest.raises(ValueError, match="STRATUS_HOST_DOWN_AFTER must not be negative"):
        Settings.from_env({"STRATUS_HOST_DOWN_AFTER": "-1"})
