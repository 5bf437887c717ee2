"""An instance request recorded with a user-data digest reads as a filed id (Instance.Requested v4 to v5)."""

from __future__ import annotations

from typing import Any

from commands.instance import Instance


def test_requests_recorded_with_a_user_data_digest_are_read_as_filed_ids() -> None:
    """Instance.Requested v4 recorded {"sha256", "size"}; v5 reads the same blob as {"id", "size"}."""
    state: dict[str, Any] = {"user_data": {"sha256": "ab" * 32, "size": 5}}
    Instance.Requested.upcast_v4_v5(state)  # type: ignore[attr-defined]
    assert state["user_data"] == {"id": "ab" * 32, "size": 5}
    empty: dict[str, Any] = {"user_data": None}
    Instance.Requested.upcast_v4_v5(empty)  # type: ignore[attr-defined]
    assert empty["user_data"] is None
