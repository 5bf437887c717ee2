"""Compute services' views: the state the last event set, the uptime line, the integer ids."""

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


def test_an_integer_id_from_a_uuids_text_is_the_uuids() -> None:
    from uuid import UUID

    from api.services import integer_id

    for text in (
        "00000000-0000-4000-8000-000000000000", "00000001-ffff-4fff-bfff-ffffffffffff",
        "ffffffff-0000-4000-8000-000000000001", "7a3c9e12-5b0d-4c4e-9f6a-1b2c3d4e5f60",
        "80000000-0000-4000-8000-000000000000", "abc00010-0000-4000-8000-000300000000",
    ):  # fmt: skip
        assert integer_id(text) == (int(UUID(text).int >> 97) or 1)
        assert integer_id(text) == integer_id(UUID(text))
