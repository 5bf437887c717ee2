"""Hostile and careless input: refused at the edge with a 400 naming the field, never a 500, never
on the log.

Each case here answered 200 (and later stopped the projector) or 500 before: NUL in a metadata value
or key, NUL in a path or query parameter (PostgreSQL refuses NUL in text), positions in other
scripts' digits or beyond 64 bits, a body nested a thousand levels deep, and user data echoed in a
validation error.
"""

from __future__ import annotations

from tests.fixtures.api import ADMIN, P1, P2, Stack


def test_nul_in_metadata_is_refused_naming_the_field_and_nothing_reaches_the_log(stack: Stack) -> None:
    stack.flavor(id="tiny")
    server, position = stack.server("tiny", P1)
    for body in ({"metadata": {"k": "a\u0000b"}}, {"metadata": {"a\u0000b": "v"}}):
        r = stack.request("POST", f"/v2.1/servers/{server}/metadata", P1, json=body)
        assert r.status_code == 400, r.text
        assert "metadata" in r.json["badRequest"]["message"]
        assert "NUL" in r.json["badRequest"]["message"]
    r = stack.request("POST", "/v2.1/servers", P1, json={"server": {"name": "x\u0000", "flavorRef": "tiny"}})
    assert r.status_code == 400 and "server.name" in r.json["badRequest"]["message"], r.text
    assert stack.handlers.app.recorder.max_notification_id() == position
    r = stack.get(f"/v2.1/servers/{server}/metadata", P1, after=position)
    assert r.status_code == 200 and r.json == {"metadata": {}}


# Paths, queries and headers refused with a 400: (path and query, extra headers, the member of the
# body holding the message — Nova's badRequest or Keystone's error —, a word the message holds).
REFUSED: list[tuple[str, dict[str, str], str | None, str]] = [
    # NUL in a path or a query: PostgreSQL refuses it in text
    ("/v2.1/servers/%00", {}, "badRequest", "NUL"),
    ("/v2.1/servers?name=a%00b", {}, "badRequest", "NUL"),
    ("/v2.1/servers/detail?name=%00", {}, "badRequest", "NUL"),
    ("/v2.1/flavors/a%00b", {}, "badRequest", "NUL"),
    ("/v2.1/flavors?marker=%00", {}, "badRequest", "NUL"),
    ("/v2.1/os-keypairs?marker=%00", {}, "badRequest", "NUL"),
    ("/v2.1/os-quota-sets/%00", {}, "badRequest", "NUL"),
    ("/v2.1/os-hypervisors/%00", {}, "badRequest", "NUL"),
    ("/image/v2/images?name=%00", {}, "badRequest", "NUL"),
    ("/identity/v3/users/a%00b", {}, "error", "NUL"),
    ("/identity/v3/projects?name=%00", {}, "error", "NUL"),
    # positions and limits are ASCII digits within 64 bits
    ("/v2.1/servers", {"X-Stratus-Min-Position": "\u0661\u0662"}, None, ""),
    ("/v2.1/servers", {"X-Stratus-Min-Position": "99999999999999999999"}, None, ""),
    ("/v2.1/servers?min_position=9223372036854775808", {}, None, ""),
    ("/v2.1/servers?limit=\u0661", {}, None, ""),
    ("/v2.1/flavors?limit=1_0", {}, None, ""),
    ("/v2.1/stratus/usage/p1?as_of=99999999999999999999999999", {}, None, ""),
    ("/v2.1/stratus/usage/p1?as_of=\u0661\u0662", {}, None, ""),
]


def test_hostile_paths_queries_and_headers_are_a_400(stack: Stack) -> None:
    """Every row of ``REFUSED``, on one stack (the rows change nothing)."""
    for path_and_query, headers, member, word in REFUSED:
        path, _, query = path_and_query.partition("?")
        r = stack.client.simulate_get(path, query_string=query, headers={**stack.auth(ADMIN), **headers})
        assert r.status_code == 400, (path_and_query, headers, r.text)
        if member is not None:
            assert r.json[member]["code"] == 400 and word in r.json[member]["message"], (
                path_and_query,
                r.text,
            )


def test_a_body_nested_a_thousand_levels_deep_is_a_400(stack: Stack) -> None:
    stack.flavor(id="tiny")
    server, _ = stack.server("tiny", P1)
    deep = "[" * 1000 + "]" * 1000
    for path in ("/v2.1/servers", f"/v2.1/servers/{server}/action"):
        body = '{"server": {"name": "x", "flavorRef": "tiny", "metadata": {"k": ' + deep + "}}}"
        headers = {**stack.auth(P1), "Content-Type": "application/json"}
        r = stack.client.simulate_post(path, body=body, headers=headers)
        assert r.status_code == 400, r.text
        assert "nested too deeply" in r.json["badRequest"]["message"]


def test_validation_errors_never_echo_user_data(stack: Stack) -> None:
    stack.flavor(id="tiny")
    secret = "c2VjcmV0LXRva2VuLWluLXVzZXItZGF0YQ" * 2000  # valid base64 alphabet, too long
    body = {"server": {"name": "x", "flavorRef": "tiny", "user_data": secret}}
    r = stack.request("POST", "/v2.1/servers", P1, json=body)
    assert r.status_code == 400, r.text
    assert "user_data" in r.text and "c2VjcmV0" not in r.text


def test_nul_in_a_placement_body_is_placement_s_400(stack: Stack) -> None:
    consumer = "00000000-0000-0000-0000-000000000001"
    body = {"allocations": {}, "project_id": "p\u0000", "user_id": "u", "consumer_generation": None}
    headers = {**stack.auth(ADMIN), "OpenStack-API-Version": "placement 1.39"}
    r = stack.client.simulate_put(f"/placement/allocations/{consumer}", json=body, headers=headers)
    assert r.status_code == 400, r.text
    assert "NUL" in r.json["errors"][0]["detail"]


def test_a_private_flavor_does_not_leak_through_the_marker(stack: Stack) -> None:
    stack.flavor(id="a-public", name="a")
    stack.flavor(id="b-private", name="b", **{"os-flavor-access:is_public": False})
    stack.flavor(id="c-public", name="c")
    unknown = stack.request("GET", "/v2.1/flavors?marker=b-nothing", P1)
    private = stack.request("GET", "/v2.1/flavors?marker=b-private", P1)
    assert unknown.status_code == private.status_code == 400
    assert private.json["badRequest"]["message"] == unknown.json["badRequest"]["message"].replace(
        "b-nothing", "b-private"
    )
    assert stack.request("GET", "/v2.1/flavors?is_public=none&marker=b-private", ADMIN).status_code == 200


def test_a_member_cannot_read_another_users_quota_usage(stack: Stack) -> None:
    p1 = stack.project_id("p1")
    stack.auth(P1)
    stack.auth(ADMIN)
    alice = stack.user_id("alice")
    bob = stack.user_id("bob")
    r = stack.request("GET", f"/v2.1/os-quota-sets/{p1}/detail?user_id={alice}", P1)
    assert r.status_code == 403, r.text
    assert stack.request("GET", f"/v2.1/os-quota-sets/{p1}/detail?user_id={bob}", P1).status_code == 200
    assert stack.request("GET", f"/v2.1/os-quota-sets/{p1}/detail?user_id={bob}", ADMIN).status_code == 200


def test_no_read_shows_one_project_anything_of_another(stack: Stack) -> None:
    """Every GET of the API document with ids of p1's resources, as a member of p2: nothing of p1's
    comes back (a 200 carries none of p1's ids), whatever the route."""
    import json as _json

    from api.openapi import DOCUMENT

    stack.flavor(id="tiny")
    server, position = stack.server("tiny", P1, metadata={"secret": "p1-only"})
    stack.request("POST", "/v2.1/os-keypairs", P1, json={"keypair": {"name": "p1-key"}})
    image = stack.request("POST", "/image/v2/images", P1, json={"name": "p1-image"}).json["id"]
    spec = {"server_group": {"name": "p1-g", "policies": ["affinity"]}}
    group = stack.request("POST", "/v2.1/os-server-groups", P1, json=spec).json["server_group"]["id"]
    p1 = stack.project_id("p1")
    ids = {
        "server_id": server, "image_id": image, "group_id": group, "name": "p1-key", "project_id": p1,
        "tenant_id": p1, "kind": "server", "resource_id": server, "consumer": server, "key": "secret",
    }  # fmt: skip
    secrets = (server, image, group, "p1-key", "p1-only", "p1-image")
    stack.get("/v2.1/servers", P1, after=position)
    leaks = []
    for path, ops in _json.loads(DOCUMENT.read_text())["paths"].items():
        if "get" not in ops or path == "/v2.1/stratus/events":
            continue
        names = [p.strip("{}") for p in path.split("/") if p.startswith("{")]
        if not names or any(n not in ids for n in names):
            continue
        url = path
        for n in names:
            url = url.replace("{" + n + "}", ids[n])
        for query in ("", "all_tenants=1", f"project_id={p1}", f"tenant_id={p1}"):
            r = stack.client.simulate_get(url, query_string=query, headers=stack.headers(P2))
            if r.status_code < 300 and any(s in r.text for s in secrets):
                leaks.append((url, query, r.status_code))
    assert leaks == []
    # the lists, too
    for path in ("/v2.1/servers/detail", "/v2.1/os-keypairs", "/image/v2/images", "/v2.1/os-server-groups"):
        for query in ("", "all_tenants=1", f"project_id={p1}"):
            r = stack.client.simulate_get(path, query_string=query, headers=stack.headers(P2))
            assert not any(s in r.text for s in secrets), (path, query, r.status_code)
