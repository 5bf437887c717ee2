"""Keystone's directory beyond projects and users, through the API on the real stack: domains,
groups and their roles, roles made and deleted, the catalog as an API, application credentials.

The stack and its personas are ``tests.fixtures.api``'s.
"""

from __future__ import annotations

from typing import Any

from tests.fixtures.api import ADMIN, P1, Stack
from tests.fixtures.identity import ADMIN_PASSWORD

V3 = "/identity/v3"


def _ok(r: Any, status: int = 200) -> Any:
    assert r.status_code == status, (r.status_code, r.text)
    return r.json


def _error(r: Any, status: int) -> None:
    assert r.status_code == status, (r.status_code, r.text)
    if not r.text:  # HEAD
        return
    assert set(r.json) == {"error"} and r.json["error"]["code"] == status, r.json
    assert set(r.json["error"]) >= {"code", "message", "title"}


def _token(stack: Stack, body: dict[str, Any]) -> Any:
    return stack.client.simulate_post(f"{V3}/auth/tokens", json={"auth": body})


def _password(user_id: str, password: str, project_id: str) -> dict[str, Any]:
    return {
        "identity": {"methods": ["password"], "password": {"user": {"id": user_id, "password": password}}},
        "scope": {"project": {"id": project_id}},
    }


def test_domains_lifecycle(stack: Stack) -> None:
    r = stack.request("GET", f"{V3}/domains/default")
    assert _ok(r)["domain"]["name"] == "Default"
    d = _ok(stack.request("POST", f"{V3}/domains", json={"domain": {"name": "eng"}}), 201)["domain"]
    assert set(d) == {"id", "name", "description", "enabled", "tags", "options", "links"}
    assert d["description"] == "" and d["enabled"] is True
    _error(stack.request("POST", f"{V3}/domains", json={"domain": {"name": "eng"}}), 409)
    _error(stack.request("POST", f"{V3}/domains", json={"domain": {"name": "a" * 65}}), 400)
    names = [x["name"] for x in _ok(stack.request("GET", f"{V3}/domains?name=eng"))["domains"]]
    assert names == ["eng"]
    # A project and a user in it; a password login naming the domain.
    pid = _ok(
        stack.request("POST", f"{V3}/projects", json={"project": {"name": "web", "domain_id": d["id"]}}), 201
    )["project"]["id"]
    user = {"user": {"name": "eve", "domain_id": d["id"], "password": "eve-secret"}}
    uid = _ok(stack.request("POST", f"{V3}/users", json=user), 201)["user"]["id"]
    member = _role_id(stack, "member")
    _ok(stack.request("PUT", f"{V3}/projects/{pid}/users/{uid}/roles/{member}"), 204)
    login = {
        "identity": {
            "methods": ["password"],
            "password": {"user": {"name": "eve", "domain": {"name": "eng"}, "password": "eve-secret"}},
        },
        "scope": {"project": {"name": "web", "domain": {"id": d["id"]}}},
    }
    token = _ok(_token(stack, login), 201)["token"]
    assert token["user"]["domain"] == {"id": d["id"], "name": "eng"}
    _error(stack.request("POST", f"{V3}/users", json={"user": {"name": "x", "domain_id": "nope"}}), 404)
    # Deleting: only once disabled; what is in it goes with it.
    _error(stack.request("DELETE", f"{V3}/domains/{d['id']}"), 403)
    upd = {"domain": {"enabled": False, "description": "gone soon", "name": "eng2"}}
    d2 = _ok(stack.request("PATCH", f"{V3}/domains/{d['id']}", json=upd))["domain"]
    assert (d2["enabled"], d2["description"], d2["name"]) == (False, "gone soon", "eng2")
    assert _token(stack, login).status_code == 401  # a disabled domain's users cannot log in
    _ok(stack.request("DELETE", f"{V3}/domains/{d['id']}"), 204)
    _error(stack.request("GET", f"{V3}/domains/{d['id']}"), 404)
    _error(stack.request("GET", f"{V3}/users/{uid}"), 404)
    _error(stack.request("GET", f"{V3}/projects/{pid}"), 404)
    _error(stack.request("DELETE", f"{V3}/domains/{d['id']}"), 404)
    # The name is free again.
    _ok(stack.request("POST", f"{V3}/domains", json={"domain": {"name": "eng2"}}), 201)
    # Policy: members cannot make domains.
    _error(stack.request("POST", f"{V3}/domains", P1, json={"domain": {"name": "x"}}), 403)


def _role_id(stack: Stack, name: str) -> str:
    roles = _ok(stack.request("GET", f"{V3}/roles?name={name}"))["roles"]
    return str(roles[0]["id"])


def test_group_roles_reach_member_tokens(stack: Stack) -> None:
    g = _ok(stack.request("POST", f"{V3}/groups", json={"group": {"name": "ops", "description": "d"}}), 201)
    gid = g["group"]["id"]
    assert set(g["group"]) == {"id", "name", "domain_id", "description", "links"}
    _error(stack.request("POST", f"{V3}/groups", json={"group": {"name": "ops"}}), 409)
    pid = stack.project_id("groupy")
    uid = _ok(
        stack.request("POST", f"{V3}/users", json={"user": {"name": "gus", "password": "gus-pw"}}), 201
    )["user"]["id"]
    _ok(stack.request("PUT", f"{V3}/groups/{gid}/users/{uid}"), 204)
    _ok(stack.request("HEAD", f"{V3}/groups/{gid}/users/{uid}"), 204)
    assert [u["id"] for u in _ok(stack.request("GET", f"{V3}/groups/{gid}/users"))["users"]] == [uid]
    groups = _ok(stack.request("GET", f"{V3}/users/{uid}/groups"))["groups"]
    assert [x["id"] for x in groups] == [gid] and groups[0]["membership_expires_at"] is None
    # No role yet: no token.
    assert _token(stack, _password(uid, "gus-pw", pid)).status_code == 401
    member = _role_id(stack, "member")
    _ok(stack.request("PUT", f"{V3}/projects/{pid}/groups/{gid}/roles/{member}"), 204)
    _ok(stack.request("HEAD", f"{V3}/projects/{pid}/groups/{gid}/roles/{member}"), 204)
    roles = _ok(stack.request("GET", f"{V3}/projects/{pid}/groups/{gid}/roles"))["roles"]
    assert [x["id"] for x in roles] == [member]
    token = _ok(_token(stack, _password(uid, "gus-pw", pid)), 201)["token"]
    assert [x["name"] for x in token["roles"]] == ["member", "reader"]
    # role_assignments: the group's; effective: its member's, through it.
    listed = _ok(stack.request("GET", f"{V3}/role_assignments?group.id={gid}"))["role_assignments"]
    assert listed == [
        {
            "role": {"id": member},
            "group": {"id": gid},
            "scope": {"project": {"id": pid}},
            "links": {
                "assignment": f"http://falconframework.org{V3}/projects/{pid}/groups/{gid}/roles/{member}"
            },
        }
    ]
    eff = _ok(stack.request("GET", f"{V3}/role_assignments?effective=true&user.id={uid}&include_names=1"))
    by_role = {a["role"]["name"]: a for a in eff["role_assignments"]}
    assert set(by_role) == {"member", "reader"}
    assert by_role["member"]["user"]["name"] == "gus" and "membership" in by_role["member"]["links"]
    # Domain assignments, to groups and users.
    _ok(stack.request("PUT", f"{V3}/domains/default/groups/{gid}/roles/{member}"), 204)
    _ok(stack.request("PUT", f"{V3}/domains/default/users/{uid}/roles/{member}"), 204)
    _ok(stack.request("HEAD", f"{V3}/domains/default/users/{uid}/roles/{member}"), 204)
    on_domain = _ok(stack.request("GET", f"{V3}/role_assignments?scope.domain.id=default"))[
        "role_assignments"
    ]
    assert {next(k for k in a if k in ("user", "group")) for a in on_domain} == {"user", "group"}
    gus = {"X-Auth-Token": _token(stack, _password(uid, "gus-pw", pid)).headers["X-Subject-Token"]}
    assert [d["id"] for d in _ok(stack.request("GET", f"{V3}/auth/domains", gus))["domains"]] == ["default"]
    assert _ok(stack.request("GET", f"{V3}/auth/system", gus))["system"] == []
    _ok(stack.request("DELETE", f"{V3}/domains/default/users/{uid}/roles/{member}"), 204)
    _error(stack.request("HEAD", f"{V3}/domains/default/users/{uid}/roles/{member}"), 404)
    # Leaving the group takes the role away.
    _ok(stack.request("DELETE", f"{V3}/groups/{gid}/users/{uid}"), 204)
    _error(stack.request("HEAD", f"{V3}/groups/{gid}/users/{uid}"), 404)
    assert _token(stack, _password(uid, "gus-pw", pid)).status_code == 401
    renamed = _ok(stack.request("PATCH", f"{V3}/groups/{gid}", json={"group": {"name": "ops2"}}))["group"]
    assert renamed["name"] == "ops2" and renamed["description"] == "d"
    _ok(stack.request("DELETE", f"{V3}/groups/{gid}"), 204)
    _error(stack.request("GET", f"{V3}/groups/{gid}"), 404)
    assert _ok(stack.request("GET", f"{V3}/role_assignments?group.id={gid}"))["role_assignments"] == []


def test_roles_made_renamed_deleted_builtins_stay(stack: Stack) -> None:
    role = _ok(stack.request("POST", f"{V3}/roles", json={"role": {"name": "auditor"}}), 201)["role"]
    assert set(role) == {"id", "name", "domain_id", "description", "options", "links"}
    _error(stack.request("POST", f"{V3}/roles", json={"role": {"name": "auditor"}}), 409)
    renamed = _ok(stack.request("PATCH", f"{V3}/roles/{role['id']}", json={"role": {"name": "inspector"}}))
    assert renamed["role"]["name"] == "inspector"
    _ok(stack.request("POST", f"{V3}/roles", json={"role": {"name": "auditor"}}), 201)  # the old name is free
    pid, uid = stack.project_id("p1"), stack.user_id("alice")
    _ok(stack.request("PUT", f"{V3}/projects/{pid}/users/{uid}/roles/{role['id']}"), 204)
    _ok(stack.request("DELETE", f"{V3}/roles/{role['id']}"), 204)
    _error(stack.request("GET", f"{V3}/roles/{role['id']}"), 404)
    listed = _ok(stack.request("GET", f"{V3}/role_assignments?user.id={uid}"))["role_assignments"]
    assert role["id"] not in {a["role"]["id"] for a in listed}
    admin = _role_id(stack, "admin")
    _error(stack.request("DELETE", f"{V3}/roles/{admin}"), 403)
    _error(stack.request("PATCH", f"{V3}/roles/{admin}", json={"role": {"name": "boss"}}), 403)
    _error(stack.request("POST", f"{V3}/roles", P1, json={"role": {"name": "x"}}), 403)


def test_catalog_is_an_api(stack: Stack) -> None:
    stack.auth(ADMIN)
    token = _ok(
        _token(stack, _password(stack.user_id("alice"), "alice-password", stack.project_id("p1"))), 201
    )
    seeded = {s["type"]: s for s in token["token"]["catalog"]}
    assert set(seeded) == {"compute", "identity", "image", "placement"}
    urls = {e["interface"]: e["url"] for e in seeded["compute"]["endpoints"]}
    assert urls == dict.fromkeys(("public", "internal", "admin"), "http://falconframework.org/v2.1")
    assert _ok(stack.request("GET", f"{V3}/regions/RegionOne"))["region"]["parent_region_id"] is None
    region = _ok(
        stack.request("POST", f"{V3}/regions", json={"region": {"id": "west", "description": "w"}}), 201
    )
    assert region["region"] == {
        "id": "west",
        "description": "w",
        "parent_region_id": None,
        "links": {"self": f"http://falconframework.org{V3}/regions/west"},
    }
    _error(stack.request("POST", f"{V3}/regions", json={"region": {"id": "west"}}), 409)
    svc = _ok(
        stack.request("POST", f"{V3}/services", json={"service": {"type": "volumev3", "name": "cinder"}}), 201
    )
    sid = svc["service"]["id"]
    body = {
        "endpoint": {
            "service_id": sid,
            "interface": "public",
            "url": "http://vol:8776/v3",
            "region_id": "west",
        }
    }
    ep = _ok(stack.request("POST", f"{V3}/endpoints", json=body), 201)["endpoint"]
    assert (ep["region"], ep["region_id"], ep["enabled"]) == ("west", "west", True)
    _error(
        stack.request(
            "POST", f"{V3}/endpoints", json={"endpoint": {**body["endpoint"], "service_id": "0" * 32}}
        ),
        404,
    )
    catalog = _ok(stack.request("GET", f"{V3}/auth/catalog"))["catalog"]
    volume = next(s for s in catalog if s["type"] == "volumev3")
    assert [e["url"] for e in volume["endpoints"]] == ["http://vol:8776/v3"]
    patch = {"endpoint": {"enabled": False, "region": "east"}}  # an older client's region: made
    patched = _ok(stack.request("PATCH", f"{V3}/endpoints/{ep['id']}", json=patch))
    assert patched["endpoint"]["enabled"] is False and patched["endpoint"]["region_id"] == "east"
    _ok(stack.request("GET", f"{V3}/regions/east"))
    catalog = _ok(stack.request("GET", f"{V3}/auth/catalog"))["catalog"]
    assert next(s for s in catalog if s["type"] == "volumev3")["endpoints"] == []
    _ok(stack.request("PATCH", f"{V3}/services/{sid}", json={"service": {"description": "blocks"}}))
    _ok(stack.request("DELETE", f"{V3}/services/{sid}"), 204)  # its endpoints go with it
    _error(stack.request("GET", f"{V3}/endpoints/{ep['id']}"), 404)
    _ok(stack.request("DELETE", f"{V3}/regions/west"), 204)
    _error(stack.request("GET", f"{V3}/regions/west"), 404)
    _error(stack.request("POST", f"{V3}/services", P1, json={"service": {"type": "x"}}), 403)


def test_application_credentials(stack: Stack) -> None:
    headers = stack.auth(P1)
    uid, pid = stack.user_id("bob"), stack.project_id("p1")
    path = f"{V3}/users/{uid}/application_credentials"
    rules = [{"service": "compute", "path": "/v2.1/servers", "method": "GET"}]
    body = {"application_credential": {"name": "ci", "roles": [{"name": "reader"}], "access_rules": rules}}
    made = _ok(stack.request("POST", path, headers, json=body), 201)["application_credential"]
    secret = made["secret"]
    assert made["project_id"] == pid and made["unrestricted"] is False and made["expires_at"] is None
    assert [r["name"] for r in made["roles"]] == ["reader"]
    assert made["access_rules"][0]["service"] == "compute"
    _error(stack.request("POST", path, headers, json=body), 409)
    shown = _ok(stack.request("GET", f"{path}/{made['id']}", headers))["application_credential"]
    assert "secret" not in shown
    listed = _ok(stack.request("GET", f"{path}?name=ci", headers))["application_credentials"]
    assert [c["id"] for c in listed] == [made["id"]]
    assert len(_ok(stack.request("GET", f"{V3}/users/{uid}/access_rules", headers))["access_rules"]) == 1
    # Another user may not make one for bob.
    _error(
        stack.request("POST", path, stack.auth(ADMIN), json={"application_credential": {"name": "x"}}), 403
    )
    # Authenticating with it: the credential's project and roles only.
    auth = {
        "identity": {
            "methods": ["application_credential"],
            "application_credential": {"id": made["id"], "secret": secret},
        }
    }
    r = _token(stack, auth)
    token = _ok(r, 201)["token"]
    assert token["project"]["id"] == pid and [x["name"] for x in token["roles"]] == ["reader"]
    assert token["application_credential"] == {"id": made["id"], "name": "ci", "restricted": True}
    by_name = {
        "identity": {
            "methods": ["application_credential"],
            "application_credential": {"name": "ci", "user": {"id": uid}, "secret": secret},
        }
    }
    assert _token(stack, by_name).status_code == 201
    wrong = {
        "identity": {
            "methods": ["application_credential"],
            "application_credential": {"id": made["id"], "secret": "no"},
        }
    }
    _error(_token(stack, wrong), 401)
    cred_token = {"X-Auth-Token": r.headers["X-Subject-Token"]}
    # A reader's token: it may look, not make (a member's server create is refused).
    assert stack.request("GET", "/v2.1/servers", cred_token).status_code == 200
    # A restricted credential cannot make credentials.
    _error(stack.request("POST", path, cred_token, json={"application_credential": {"name": "more"}}), 403)
    # The secret is nowhere in the log.
    recorder = stack.handlers.app.recorder
    assert not any(secret in str(e.to_dict()) for e in recorder.read_envelopes(1, 100_000))  # type: ignore[attr-defined]
    # Deleted: gone, and so is its token.
    _ok(stack.request("DELETE", f"{path}/{made['id']}", headers), 204)
    _error(stack.request("GET", f"{path}/{made['id']}", headers), 404)
    assert stack.request("GET", "/v2.1/servers", cred_token).status_code == 401
    _error(_token(stack, auth), 401)
    assert ADMIN_PASSWORD  # (the admin persona's password is the fixture's)


def test_system_scope(stack: Stack) -> None:
    """A system reader (tempest's system_reader) reads identity data, changes nothing."""
    uid = _ok(
        stack.request("POST", f"{V3}/users", json={"user": {"name": "sysr", "password": "sysr-pw"}}), 201
    )["user"]["id"]
    reader = _role_id(stack, "reader")
    _ok(stack.request("PUT", f"{V3}/system/users/{uid}/roles/{reader}"), 204)
    _ok(stack.request("HEAD", f"{V3}/system/users/{uid}/roles/{reader}"), 204)
    assert [r["id"] for r in _ok(stack.request("GET", f"{V3}/system/users/{uid}/roles"))["roles"]] == [reader]
    listed = _ok(stack.request("GET", f"{V3}/role_assignments?scope.system=all&user.id={uid}"))
    assert [a["scope"] for a in listed["role_assignments"]] == [{"system": {"all": True}}]
    login = {
        "identity": {"methods": ["password"], "password": {"user": {"id": uid, "password": "sysr-pw"}}},
        "scope": {"system": {"all": True}},
    }
    r = _token(stack, login)
    token = _ok(r, 201)["token"]
    assert token["system"] == {"all": True} and "project" not in token
    assert [x["name"] for x in token["roles"]] == ["reader"]
    headers = {"X-Auth-Token": r.headers["X-Subject-Token"]}
    assert _ok(stack.request("GET", f"{V3}/auth/system", headers))["system"] == [{"all": True}]
    assert _ok(stack.request("GET", f"{V3}/domains", headers))["domains"]
    assert _ok(stack.request("GET", f"{V3}/users", headers))["users"]
    _ok(stack.request("GET", f"{V3}/projects/{stack.project_id('p1')}", headers))
    _error(stack.request("POST", f"{V3}/domains", headers, json={"domain": {"name": "nope"}}), 403)
    validated = stack.request(
        "GET", f"{V3}/auth/tokens", {**headers, "X-Subject-Token": headers["X-Auth-Token"]}
    )
    assert _ok(validated)["token"]["system"] == {"all": True}
    _ok(stack.request("DELETE", f"{V3}/system/users/{uid}/roles/{reader}"), 204)
    assert stack.request("GET", f"{V3}/domains", headers).status_code == 401  # no role left on the system


def test_user_renamed_and_password_changed_by_its_user(stack: Stack) -> None:
    pid = stack.project_id("p1")
    body = {"user": {"name": "ren", "password": "ren-pw-1", "default_project_id": pid}}
    uid = _ok(stack.request("POST", f"{V3}/users", json=body), 201)["user"]["id"]
    _ok(stack.request("PUT", f"{V3}/projects/{pid}/users/{uid}/roles/{_role_id(stack, 'member')}"), 204)
    update = {"user": {"id": uid, "name": "ren2", "project_id": pid, "team": {"on_call": True}}}
    renamed = _ok(stack.request("PATCH", f"{V3}/users/{uid}", json=update))
    assert renamed["user"]["name"] == "ren2"
    # Attributes Keystone does not know are kept as given (its "extra"), never over its own.
    shown = _ok(stack.request("GET", f"{V3}/users/{uid}"))["user"]
    assert shown["project_id"] == pid and shown["team"] == {"on_call": True} and shown["id"] == uid
    _ok(stack.request("POST", f"{V3}/users", json={"user": {"name": "ren"}}), 201)  # the old name is free
    _error(stack.request("PATCH", f"{V3}/users/{uid}", json={"user": {"name": "ren"}}), 409)
    change = {"user": {"original_password": "wrong", "password": "ren-pw-2"}}
    _error(stack.client.simulate_post(f"{V3}/users/{uid}/password", json=change), 401)
    change["user"]["original_password"] = "ren-pw-1"
    assert stack.client.simulate_post(f"{V3}/users/{uid}/password", json=change).status_code == 204
    assert _token(stack, _password(uid, "ren-pw-1", pid)).status_code == 401
    _ok(_token(stack, _password(uid, "ren-pw-2", pid)), 201)


def test_access_rules_outlive_their_credential_until_deleted(stack: Stack) -> None:
    headers = stack.auth(P1)
    uid = stack.user_id("bob")
    rules = [{"service": "monitoring", "path": "/v2.1/servers/*/ips", "method": "GET"}]
    body = {"application_credential": {"name": "mon", "access_rules": rules}}
    made = _ok(stack.request("POST", f"{V3}/users/{uid}/application_credentials", headers, json=body), 201)
    rule_id = made["application_credential"]["access_rules"][0]["id"]
    path = f"{V3}/users/{uid}/access_rules/{rule_id}"
    _error(stack.request("DELETE", path, headers), 403)  # in use
    cred = made["application_credential"]["id"]
    _ok(stack.request("DELETE", f"{V3}/users/{uid}/application_credentials/{cred}", headers), 204)
    assert _ok(stack.request("GET", path, headers))["access_rule"]["service"] == "monitoring"
    _ok(stack.request("DELETE", path, headers), 204)
    _error(stack.request("GET", path, headers), 404)


def test_implied_roles(stack: Stack) -> None:
    ids = [
        _ok(stack.request("POST", f"{V3}/roles", json={"role": {"name": n}}), 201)["role"]["id"]
        for n in "xyz"
    ]
    x, y, z = ids
    made = _ok(stack.request("PUT", f"{V3}/roles/{x}/implies/{y}"), 201)["role_inference"]
    assert made["prior_role"]["id"] == x and made["implies"]["id"] == y and "links" in made["implies"]
    _ok(stack.request("PUT", f"{V3}/roles/{y}/implies/{z}"), 201)
    _ok(stack.request("HEAD", f"{V3}/roles/{x}/implies/{y}"), 204)
    listed = _ok(stack.request("GET", f"{V3}/roles/{x}/implies"))["role_inference"]
    assert [r["id"] for r in listed["implies"]] == [y]
    rules = _ok(stack.request("GET", f"{V3}/role_inferences"))["role_inferences"]
    assert {r["prior_role"]["id"] for r in rules} >= {x, y}
    # Effective assignments and tokens: x brings y and z.
    pid, uid = stack.project_id("p1"), stack.user_id("alice")
    _ok(stack.request("PUT", f"{V3}/projects/{pid}/users/{uid}/roles/{x}"), 204)
    query = f"{V3}/role_assignments?effective&user.id={uid}&scope.project.id={pid}"
    held = {a["role"]["id"]: a for a in _ok(stack.request("GET", query))["role_assignments"]}
    assert {x, y, z} <= set(held) and held[z]["links"]["prior_role"].endswith(f"/roles/{y}")
    token = _ok(_token(stack, _password(uid, "alice-password", pid)), 201)["token"]
    assert {x, y, z} <= {r["id"] for r in token["roles"]}
    _ok(stack.request("DELETE", f"{V3}/roles/{x}/implies/{y}"), 204)
    _error(stack.request("GET", f"{V3}/roles/{x}/implies/{y}"), 404)
    held = {a["role"]["id"] for a in _ok(stack.request("GET", query))["role_assignments"]}
    assert x in held and y not in held and z not in held


def test_project_renamed(stack: Stack) -> None:
    pid = _ok(stack.request("POST", f"{V3}/projects", json={"project": {"name": "old"}}), 201)["project"][
        "id"
    ]
    renamed = _ok(stack.request("PATCH", f"{V3}/projects/{pid}", json={"project": {"name": "new"}}))
    assert renamed["project"]["name"] == "new"
    _ok(stack.request("POST", f"{V3}/projects", json={"project": {"name": "old"}}), 201)  # free again
    _error(stack.request("PATCH", f"{V3}/projects/{pid}", json={"project": {"name": "old"}}), 409)
