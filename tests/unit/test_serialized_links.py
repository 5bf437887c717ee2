"""A list's links already serialized (``api.links.serialized_links_of``, ``orjson.Fragment``) are the
bytes of the plain links (``links_of``), whatever the request's prefix holds (quotes, backslashes,
characters beyond ASCII, which JSON escapes or keeps) and whatever the id needs quoted; and a page's
flavors viewed with them serialize as the plain views, at the microversions that change a view, as
a page of the servers' brief list does."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from falcon import testing

from api.flavors import detail_view_of
from api.links import links_of, serialized_links_of
from api.server_views import brief_view_of
from api.versions import Microversion
from projections.queries import ServerRow
from stratus.serialization import dumps

PREFIXES = [
    {},
    {"host": 'h"x\\é', "root_path": '/c"mp\\ute'},
    {"host": "example.org", "scheme": "https", "port": 8774, "root_path": "/compute"},
]
IDS = ["1", "3f2c9a1e-0d4b-4c55-9c1e-2b7d5f0a8e11", 'odd/fläv "or"\\x', ""]
FLAVOR = {
    "flavorid": "x", "name": 'n "ü"', "ram": 1, "vcpus": 2, "disk": 3, "ephemeral": 4, "swap": 0,
    "is_public": True, "rxtx_factor": 1.5, "description": None, "extra_specs": '{"a": "b"}',
}  # fmt: skip


@pytest.mark.parametrize("where", PREFIXES)
def test_serialized_links_are_the_plain_links_bytes(where: dict) -> None:
    req = testing.create_req(path="/v2.1/flavors/detail", **where)
    plain, serialized = links_of(req, "flavors"), serialized_links_of(req, "flavors")
    for item in IDS:
        assert dumps({"links": serialized(item)}) == dumps({"links": plain(item)})


@pytest.mark.parametrize("minor", [1, 55, 61, 75, 102])
@pytest.mark.parametrize("where", PREFIXES)
def test_a_pages_flavors_serialize_as_the_plain_views(minor: int, where: dict) -> None:
    req = testing.create_req(path="/v2.1/flavors/detail", **where)
    req.context.microversion = Microversion(2, minor)
    rows = [SimpleNamespace(**{**FLAVOR, "flavorid": item}) for item in IDS]
    plain, listed = detail_view_of(req), detail_view_of(req, listed=True)
    assert dumps([listed(row) for row in rows]) == dumps([plain(row) for row in rows])


@pytest.mark.parametrize("where", PREFIXES)
def test_a_pages_brief_servers_serialize_as_the_plain_views(where: dict) -> None:
    req = testing.create_req(path="/v2.1/servers", **where)
    links = links_of(req, "servers")
    rows = [ServerRow._make([sid, name, *[None] * 33]) for sid, name in ((IDS[1], 'n "ü"'), (IDS[1], ""))]
    brief = brief_view_of(req)
    plain = [{"id": row.id, "name": row.name, "links": links(row.id)} for row in rows]
    assert dumps([brief(row, None) for row in rows]) == dumps(plain)
