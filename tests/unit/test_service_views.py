"""Compute services' views: the state the last event set, and the uptime line."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from api.hypervisors import uptime_line


def test_service_state_follows_the_last_event() -> None:
    from api.services import service_view

    now = datetime(2026, 1, 1, tzinfo=UTC)
    row = {
        "id": "h", "hostname": "h", "availability_zone": None, "disabled": False, "disabled_reason": None,
        "forced_down": False, "updated_at": now - timedelta(seconds=59),
    }  # fmt: skip
    assert service_view(row, now)["state"] == "up"
    assert service_view({**row, "updated_at": now - timedelta(seconds=61)}, now)["state"] == "down"
    assert service_view({**row, "forced_down": True}, now)["state"] == "down"


def test_uptime_line_reads_as_uptime_prints_it() -> None:
    now = 1_700_000_000.0  # 22:13:20 UTC
    assert uptime_line(now, now - 300, [0.5, 0.25, 0.125]) == (
        " 22:13:20 up 5 min,  0 users,  load average: 0.50, 0.25, 0.12"
    )
    assert uptime_line(now, now - (93 * 86400 + 18 * 3600 + 25 * 60), [1, 2, 3]).startswith(
        " 22:13:20 up 93 days, 18:25,  0 users"
    )
    assert " up 1 day,  2:03," in uptime_line(now, now - (86400 + 2 * 3600 + 3 * 60), [0, 0, 0])
