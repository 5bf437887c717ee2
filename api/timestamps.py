"""The timestamps Nova's and Glance's bodies show: ``YYYY-MM-DDTHH:MM:SSZ`` in UTC."""

from __future__ import annotations

from datetime import UTC, datetime


def isotime(value: datetime | None) -> str | None:
    """``value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")`` (None stays None), at a fraction of
    strftime's cost: a page of a list formats two a row."""
    if value is None:
        return None
    utc = value.astimezone(UTC)
    if utc.year < 1000:  # isoformat pads the year to four digits; strftime's %Y does not
        return utc.strftime("%Y-%m-%dT%H:%M:%SZ")
    # "YYYY-MM-DDTHH:MM:SS" then the offset ("+00:00"), which "Z" replaces
    return utc.isoformat(timespec="seconds")[:19] + "Z"
