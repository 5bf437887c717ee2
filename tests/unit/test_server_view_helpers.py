"""The shortcuts a page of servers takes give what the general helpers give: ``minor_of`` against
``at_least``, ``isotime`` against ``strftime``, links' ids against urllib's ``quote``, the hostname
derived from a name against Nova's regular expressions."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from urllib.parse import quote

import pytest
from falcon import testing

from api.links import bookmark, resource_links
from api.server_views import isotime
from api.versions import Microversion, at_least, minor_of
from stratus.hostname import hostname_for


@pytest.mark.parametrize(
    "version",
    [
        None,
        Microversion(1, 0),
        Microversion(1, 50),
        *(Microversion(2, m) for m in range(101)),
        Microversion(3, 0),
    ],
)
def test_minor_of_answers_as_at_least(version: Microversion | None) -> None:
    req = testing.create_req()
    req.context.microversion = version
    assert [minor_of(req) >= n for n in range(120)] == [at_least(req, n) for n in range(120)]


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 11, 26, 16, 52, 21, 991679, tzinfo=UTC),
        datetime(2026, 11, 26, 23, 59, 59, tzinfo=timezone(timedelta(hours=-5))),
        datetime(2026, 1, 1, 3, 0, 0, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC),
        datetime(1000, 1, 1, tzinfo=UTC),
    ],
)
def test_isotime_is_novas_strftime(value: datetime) -> None:
    assert isotime(value) == value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(
    "item", ["3f2c9a1e-0d4b-4c55-9c1e-2b7d5f0a8e11", "m1.small", "a~b_c", "a b", "a/b", "é", "x?y#z", ""]
)
def test_links_quote_ids_as_urllib_does(item: str) -> None:
    req = testing.create_req()
    assert resource_links(req, "servers", item)[0]["href"].endswith(f"/v2.1/servers/{quote(item, safe='')}")
    assert bookmark(req, "images", item)[0]["href"].endswith(f"/images/{quote(item, safe='')}")


@pytest.mark.parametrize("name", ["vm-1", "My_Server.Name é!", "a..b  c", "--x--", "", "é", "A" * 80 + "-b"])
def test_hostname_for_is_novas_sanitize_hostname(name: str) -> None:
    text = re.sub(r"[ _.]", "-", name.lower())
    text = re.sub(r"[^\w-]+", "", text, flags=re.ASCII).strip("-.")
    assert hostname_for(name) == (text[:63].rstrip("-") or "server")
