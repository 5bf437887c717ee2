"""A page's views (``server_view(..., listed=True)``: links, images and flavors already serialized as
``orjson.Fragment``) serialize to the same bytes as the plain views, whatever the request's prefix
holds (quotes, backslashes, characters beyond ASCII, which JSON escapes or keeps) and whatever the
rows show, at every microversion that changes a view, for an admin and a member."""

from __future__ import annotations

import pytest
from falcon import testing

from api.server_views import ServerExtras, server_view
from api.versions import Microversion
from projections.queries import ServerRow
from stratus.context import Actor
from stratus.serialization import dumps

ROW = ServerRow(
    id="3f2c9a1e-0d4b-4c55-9c1e-2b7d5f0a8e11", name="vm \"ü\"", project_id="proj", user_id="user",
    flavor='{"id": "f/ü x", "name": "flav", "vcpus": 3, "ram": 64, "extra_specs": {"a": "b"}}',
    image_ref="img/ü \"x\"", metadata='{"m": "1", "é": "\\n"}', availability_zone=None,
    description="desc", key_name="key",
    ports='[{"address": "10.0.0.9", "mac": "mac", "network_name": "net"}]', tags='["t", "u"]',
    reservation_id="r-1", image='{"kernel_id": "kern", "os_command_line": "cmd"}',
    user_data=None, launch_index=7, locked_by="owner", locked_reason="why", access_ip_v4="4.4.4.4",
    access_ip_v6="::6", hostname=None, disk_config="AUTO", config_drive=True, vm_state="error",
    task_state=None, power_state=4, status="ERROR", host="h1",
    fault='{"code": 500, "message": "f", "details": "trace"}', created="created", updated="updated",
    launched_at="launched", terminated_at=None, deleted=False, host_zone="zone",
)  # fmt: skip
ROWS = [
    ROW,
    ROW._replace(
        id="00000000-0000-4000-8000-000000000001", status="ACTIVE", fault=None, image_ref="", host=None
    ),
    ROW._replace(id="00000000-0000-4000-8000-000000000002", flavor='{"id": "1"}', metadata="{}", ports="[]"),
]
PREFIXES = [
    {},
    {"host": 'h"x\\é', "root_path": '/c"mp\\ute'},
    {"host": "example.org", "scheme": "https", "port": 8774, "root_path": "/compute"},
]


@pytest.mark.parametrize("minor", [1, 3, 16, 47, 73, 96, 98, 100])
@pytest.mark.parametrize("roles", [("admin",), ("member",)])
@pytest.mark.parametrize("where", PREFIXES)
def test_a_pages_views_serialize_as_the_plain_views(minor: int, roles: tuple[str, ...], where: dict) -> None:
    req = testing.create_req(path="/v2.1/servers/detail", **where)
    req.context.microversion = Microversion(2, minor)
    actor = Actor("u", "proj", roles)
    extras = ServerExtras({"h1": {"forced_down": False, "disabled": True}}, None, None)
    plain = server_view(req, actor, extras, down={"h1"})
    listed = server_view(req, actor, extras, down={"h1"}, listed=True)
    for group in (None, "g"):
        expected = dumps({"servers": [plain(row, group) for row in ROWS]})
        assert dumps({"servers": [listed(row, group) for row in ROWS]}) == expected
