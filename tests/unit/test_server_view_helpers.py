"""The shortcuts a page of servers takes give what the general helpers give: ``minor_of`` against
``at_least``, ``isotime`` against ``strftime``, links' ids against urllib's ``quote``, the hostname
derived from a name against Nova's regular expressions; and the view reads each column of a
``ServerRow`` (it unpacks one by position)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from urllib.parse import quote

import pytest
from falcon import testing

from api.links import bookmark, resource_links
from api.server_views import server_view
from api.timestamps import isotime
from api.versions import Microversion, at_least, minor_of
from projections.queries import ServerRow
from stratus.context import Actor
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


def test_the_view_reads_each_column_of_a_server_row() -> None:
    """``server_view`` unpacks ``ServerRow`` by position: each column lands where Nova shows it."""
    row = ServerRow(
        id="3f2c9a1e-0d4b-4c55-9c1e-2b7d5f0a8e11", name="vm-name", project_id="proj", user_id="user",
        flavor='{"name": "flav", "vcpus": 3}', image_ref="img", metadata='{"m": "1"}', availability_zone="az",
        description="desc", key_name="key",
        ports='[{"address": "10.0.0.9", "mac": "mac", "network_name": "net"}]', tags='["t"]',
        reservation_id="r-1", image='{"kernel_id": "kern", "os_command_line": "cmd"}',
        user_data=None, launch_index=7, locked_by="owner", locked_reason="why", access_ip_v4="4.4.4.4",
        access_ip_v6="::6", hostname="hn", disk_config="AUTO", config_drive=True, vm_state="vm",
        task_state="task", power_state=4, status="ERROR", host="h1", fault='{"code": 409, "message": "f"}',
        created="created", updated="updated", launched_at="launched", terminated_at="terminated",
        deleted=False, host_zone="zone",
    )  # fmt: skip
    req = testing.create_req()
    req.context.microversion = Microversion(2, 100)
    shown = server_view(req, Actor("u", "p", ("admin", "member", "reader")), single=True)(row, "group")
    assert {k: shown[k] for k in ("id", "name", "tenant_id", "user_id", "status", "created", "updated")} == {
        "id": row.id, "name": "vm-name", "tenant_id": "proj", "user_id": "user", "status": "ERROR",
        "created": "created", "updated": "updated",
    }  # fmt: skip
    assert shown["flavor"]["original_name"] == "flav" and shown["flavor"]["vcpus"] == 3
    assert shown["image"]["id"] == "img" and shown["image"]["properties"] == {"os_command_line": "cmd"}
    assert shown["metadata"] == {"m": "1"} and shown["tags"] == ["t"]
    assert shown["addresses"]["net"][0]["addr"] == "10.0.0.9"
    assert (shown["accessIPv4"], shown["accessIPv6"], shown["OS-DCF:diskConfig"]) == (
        "4.4.4.4",
        "::6",
        "AUTO",
    )
    assert (shown["key_name"], shown["config_drive"], shown["OS-EXT-AZ:availability_zone"]) == (
        "key",
        "True",
        "az",
    )
    states = ("OS-EXT-STS:vm_state", "OS-EXT-STS:task_state", "OS-EXT-STS:power_state")
    assert tuple(shown[k] for k in states) == ("vm", "task", 4)
    assert (shown["OS-SRV-USG:launched_at"], shown["OS-SRV-USG:terminated_at"]) == ("launched", "terminated")
    assert (shown["OS-EXT-SRV-ATTR:host"], shown["OS-EXT-SRV-ATTR:reservation_id"]) == ("h1", "r-1")
    assert (shown["OS-EXT-SRV-ATTR:launch_index"], shown["OS-EXT-SRV-ATTR:hostname"]) == (7, "hn")
    assert shown["OS-EXT-SRV-ATTR:kernel_id"] == "kern"
    assert (shown["locked"], shown["locked_reason"], shown["description"]) == (True, "why", "desc")
    assert (shown["pinned_availability_zone"], shown["server_groups"]) == ("az", ["group"])
    assert shown["fault"] == {"code": 409, "message": "f", "created": "updated"}
    # a server on a host that stopped beating: its power state unknown; a deleted one's as recorded
    down = server_view(req, Actor("u", "p", ("member", "reader")), down={"h1"})
    assert down(row, None)["OS-EXT-STS:power_state"] == 0
    assert down(row._replace(deleted=True), None)["OS-EXT-STS:power_state"] == 4
    assert down(row._replace(availability_zone=None), None)["OS-EXT-AZ:availability_zone"] == "zone"
