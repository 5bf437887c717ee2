"""Identity and policy through the API on the real stack (JetStream, PostgreSQL, the projector).

Tokens are issued by ``/identity/v3/auth/tokens`` and checked on every request; what a token may
do is ``api/policy.py``'s table. The stack and its personas are ``tests.fixtures.api``'s.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from api.identity.credentials import SCHEMA, verify_password
from stratus.config import Settings
from tests.fixtures.api import ADMIN, P1, P2, Stack
from tests.fixtures.identity import ADMIN_PASSWORD, password_auth

TOKENS = "/identity/v3/auth/tokens"


def _issue(stack: Stack, user: str, password: str, project: str) -> Any:
    return stack.client.simulate_post(TOKENS, json=password_auth(user, password, project))


def _envelopes(stack: Stack) -> list[dict[str, Any]]:
    recorder = stack.handlers.app.recorder
    return [e.to_dict() for e in recorder.read_envelopes(1, 10_000)]  # type: ignore[attr-defined]


def test_discovery_needs_no_token(stack: Stack) -> None:
    r = stack.client.simulate_get("/identity")
    assert r.status_code == 300
    (v3,) = r.json["versions"]["values"]
    assert v3["id"].startswith("v3.") and v3["links"][0]["href"].endswith("/identity/v3/")
    r = stack.client.simulate_get("/identity/v3")
    assert r.status_code == 200 and r.json["version"]["status"] == "stable"


def test_token_issue_validate_revoke(stack: Stack) -> None:
    r = _issue(stack, "admin", ADMIN_PASSWORD, "admin")
    assert r.status_code == 201, r.text
    token = r.headers["X-Subject-Token"]
    body = r.json["token"]
    assert body["user"]["name"] == "admin" and body["user"]["domain"] == {"id": "default", "name": "Default"}
    assert body["project"]["name"] == "admin"
    assert [role["name"] for role in body["roles"]] == ["admin", "manager", "member", "reader"]
    assert body["methods"] == ["password"]
    expires = dt.datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00"))
    assert dt.timedelta(minutes=59) < expires - dt.datetime.now(dt.UTC) <= dt.timedelta(hours=1)
    urls = {(s["type"], e["interface"]): e["url"] for s in body["catalog"] for e in s["endpoints"]}
    base = "http://falconframework.org"
    assert urls[("compute", "public")] == f"{base}/v2.1"
    assert urls[("identity", "public")] == f"{base}/identity"
    assert urls[("image", "public")] == f"{base}/image"

    # Validating: the admin may look at anyone's token, a user at their own.
    member = stack.auth(P1)["X-Auth-Token"]
    r = stack.client.simulate_get(TOKENS, headers={"X-Auth-Token": token, "X-Subject-Token": member})
    assert r.status_code == 200 and r.json["token"]["user"]["id"] == stack.user_id("bob")
    assert [role["name"] for role in r.json["token"]["roles"]] == ["member", "reader"]
    other = stack.auth(P2)
    r = stack.client.simulate_get(TOKENS, headers={**other, "X-Subject-Token": member})
    assert r.status_code == 403 and r.json["error"]["code"] == 403

    # Revoking (their own): recorded as an event naming the token's id, never the token.
    r = stack.client.simulate_delete(TOKENS, headers={"X-Auth-Token": member, "X-Subject-Token": member})
    assert r.status_code == 204
    assert stack.client.simulate_get("/v2.1/servers", headers={"X-Auth-Token": member}).status_code == 401
    r = stack.client.simulate_get(TOKENS, headers={"X-Auth-Token": token, "X-Subject-Token": member})
    assert r.status_code == 404
    revoked = [e for e in _envelopes(stack) if e["type"] == "stratus.token.revoked"]
    assert len(revoked) == 1 and revoked[0]["data"]["user_id"] == stack.user_id("bob")
    assert all(member not in str(e) and token not in str(e) for e in _envelopes(stack))


def test_wrong_password_and_unknown_user_look_alike(stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        wrong = _issue(stack, "admin", "not-the-password", "admin")
        unknown = _issue(stack, "nobody", "not-the-password", "admin")
        no_project = _issue(stack, "admin", ADMIN_PASSWORD, "nowhere")
    for r in (wrong, unknown, no_project):
        assert r.status_code == 401, r.text
        assert r.json == {
            "error": {
                "code": 401,
                "title": "Unauthorized",
                "message": "The request you have made requires authentication.",
            }
        }
        assert r.headers["X-Stratus-Error-Code"] == "api.unauthorized"
    assert "not-the-password" not in caplog.text and ADMIN_PASSWORD not in caplog.text


def test_a_user_without_a_role_in_the_project_gets_no_token(stack: Stack) -> None:
    stack.identities.project("p3")
    stack.identities.user("dave", "dave-pw", {"p1": ("member",)})
    assert _issue(stack, "dave", "dave-pw", "p1").status_code == 201
    assert _issue(stack, "dave", "dave-pw", "p3").status_code == 401


def test_readers_read_members_act_admins_administer(stack: Stack) -> None:
    flavor_id, _ = stack.flavor()
    reader = stack.identities.persona("rita", "p1", "reader")
    server = {"server": {"name": "vm", "flavorRef": flavor_id}}
    assert stack.request("GET", "/v2.1/servers", reader).status_code == 200
    r = stack.request("POST", "/v2.1/servers", reader, json=server)
    assert r.status_code == 403 and "member role" in r.json["forbidden"]["message"]
    r = stack.request("POST", "/v2.1/servers", P1, json=server)
    assert r.status_code == 202
    sid = r.json["server"]["id"]
    assert stack.request("DELETE", f"/v2.1/servers/{sid}", reader).status_code == 403
    r = stack.request("POST", f"/v2.1/servers/{sid}/action", reader, json={"os-stop": None})
    assert r.status_code == 403 and "member role" in r.text
    assert stack.request("GET", f"/v2.1/servers/{sid}/os-instance-actions", reader).status_code == 200
    # every other write is refused to a reader too, whatever the route's own rule says
    for method, path, body in (
        ("PUT", f"/v2.1/servers/{sid}", {"server": {"name": "renamed"}}),
        ("PUT", f"/v2.1/servers/{sid}/metadata", {"metadata": {"a": "b"}}),
        ("POST", "/v2.1/os-server-groups", {"server_group": {"name": "g", "policies": ["affinity"]}}),
        ("POST", "/image/v2/images", {"name": "img", "disk_format": "raw", "container_format": "bare"}),
    ):
        r = stack.request(method, path, reader, json=body)
        assert r.status_code == 403 and "member role" in r.json["forbidden"]["message"], (path, r.text)
    assert stack.request("GET", f"/v2.1/servers/{sid}/metadata", reader).status_code == 200
    # admin-only: flavors, hypervisors, every project's servers, identity administration
    for method, path in (
        ("GET", "/v2.1/os-hypervisors"),
        ("GET", "/v2.1/servers?all_tenants=1"),
        ("GET", "/identity/v3/users"),
        ("GET", "/identity/v3/role_assignments"),
    ):
        assert stack.request(method, path, P1).status_code == 403, path
        assert stack.request(method, path, ADMIN).status_code == 200, path
    flavor: dict[str, Any] = {"flavor": {"name": "x", "ram": 1, "vcpus": 1, "disk": 0}}
    assert stack.request("POST", "/v2.1/flavors", P1, json=flavor).status_code == 403
    # another project's project is not there for a member
    p2 = stack.identities.project("p2")
    assert stack.request("GET", f"/identity/v3/projects/{p2}", P1).status_code == 404
    assert stack.request("GET", f"/identity/v3/projects/{stack.project_id('p1')}", P1).status_code == 200


def test_disabling_a_user_stops_their_tokens(stack: Stack) -> None:
    token = stack.auth(P2)
    assert stack.request("GET", "/v2.1/servers", token).status_code == 200
    carol = stack.user_id("carol")
    r = stack.request("PATCH", f"/identity/v3/users/{carol}", ADMIN, json={"user": {"enabled": False}})
    assert r.status_code == 200 and r.json["user"]["enabled"] is False
    assert stack.request("GET", "/v2.1/servers", token).status_code == 401
    assert _issue(stack, "carol", "carol-password", "p2").status_code == 401
    r = stack.request("PATCH", f"/identity/v3/users/{carol}", ADMIN, json={"user": {"enabled": True}})
    # Re-enabling does not revive the tokens the disable ended (Keystone's revocation by user):
    assert stack.request("GET", "/v2.1/servers", token).status_code == 401
    fresh = _issue(stack, "carol", "carol-password", "p2")
    assert fresh.status_code == 201
    fresh_token = {"X-Auth-Token": fresh.headers["X-Subject-Token"]}
    assert stack.request("GET", "/v2.1/servers", fresh_token).status_code == 200


def test_passwords_stay_out_of_the_log_and_are_hashed(stack: Stack, api_settings: Settings) -> None:
    secret = "correct horse battery staple"
    r = stack.request(
        "POST", "/identity/v3/users", ADMIN, json={"user": {"name": "erin", "password": secret}}
    )
    assert r.status_code == 201 and "password" not in r.json["user"]
    erin = r.json["user"]["id"]
    events = _envelopes(stack)
    mine = [e for e in events if str(uuid.UUID(erin)) in e["subject"] or erin in e["subject"]]
    assert {e["type"] for e in mine} >= {"stratus.user.created", "stratus.user.passwordset"}
    (password_set,) = [e for e in mine if e["type"] == "stratus.user.passwordset"]
    assert set(password_set["data"]) == {"timestamp"}
    assert password_set["actoruser"] == stack.user_id("alice")  # ADMIN is alice
    assert all(secret not in str(e) and "$argon2" not in str(e) for e in events)
    with psycopg.connect(api_settings.database_url or "") as conn:
        row = conn.execute(
            f"SELECT password_hash FROM {SCHEMA}.credentials WHERE user_id = %s", (erin,)
        ).fetchone()
    assert row is not None
    (stored,) = row
    cost = f"m={api_settings.password_hash_memory_kib},t={api_settings.password_hash_iterations},p=4"
    assert stored.startswith(f"$argon2id$v=19${cost}$") and secret not in stored
    assert verify_password(secret, stored) and not verify_password("wrong", stored)
    # A password that fails the schema is not echoed back.
    r = stack.request("PATCH", f"/identity/v3/users/{erin}", ADMIN, json={"user": {"password": "x" * 5000}})
    assert r.status_code == 400 and "xxxx" not in r.text


def test_grants_are_events_naming_who_granted(stack: Stack) -> None:
    bob = stack.identities.user("bob", "bob-password", {"p1": ("member",)})
    granted = [e for e in _envelopes(stack) if e["type"] == "stratus.project.rolegranted"]
    ours = [e for e in granted if e["data"]["user_id"] == bob]
    assert len(ours) == 1 and ours[0]["actoruser"] == stack.identities.users["admin"]
    r = stack.request("GET", f"/identity/v3/role_assignments?user.id={bob}&include_names=1", ADMIN)
    assert [(a["role"]["name"], a["scope"]["project"]["name"]) for a in r.json["role_assignments"]] == [
        ("member", "p1")
    ]
    r = stack.request("GET", f"/identity/v3/role_assignments?user.id={bob}&effective=1", ADMIN)
    assert len(r.json["role_assignments"]) == 2  # member, and reader which it implies


def test_identity_requests_are_validated(stack: Stack) -> None:
    r = stack.request("POST", "/identity/v3/projects", ADMIN, json={"project": {"name": "x", "color": "red"}})
    assert r.status_code == 400 and "project.color" in r.json["error"]["message"]
    r = stack.request("POST", "/identity/v3/projects", ADMIN, json={"project": {"name": "admin"}})
    assert r.status_code == 409 and r.json["error"]["title"] == "Conflict"
    r = stack.client.simulate_post(TOKENS, json={"auth": {"identity": {"methods": ["totp"]}}})
    assert r.status_code == 400


def test_stratus_bootstrap_seeds_once_and_shows_a_generated_password_once(
    settings: Settings, database_url: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATUS_")}
    env.update(dataclasses.replace(settings, database_url=database_url, data_dir=tmp_path).to_env())
    argv = [sys.executable, "-m", "processes.cli", "bootstrap"]
    first = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert "identity seeded: user admin" in first.stdout
    password = first.stdout.split("the admin password, shown once: ")[1].strip()
    assert len(password) >= 20
    again = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "shown once" not in again.stdout and password not in again.stdout
    with psycopg.connect(database_url) as conn:
        row = conn.execute(f"SELECT password_hash FROM {SCHEMA}.credentials").fetchone()
    assert row is not None and verify_password(password, row[0])


def test_users_and_projects_can_be_deleted_and_their_names_given_again(
    stack: Stack, api_settings: Settings
) -> None:
    """Keystone's DELETE /v3/users/{id} and /v3/projects/{id} (405 before): grants, tokens and the
    password go with a user; grants and tokens with a project; the names may be given again."""
    token = stack.identities.persona("del", "p-del", "member")
    uid, pid = stack.user_id("del"), stack.project_id("p-del")
    assert stack.request("GET", "/v2.1/servers", token).status_code == 200
    assert stack.request("DELETE", f"/identity/v3/users/{uid}", P1).status_code == 403
    r = stack.request("DELETE", f"/identity/v3/users/{uid}", ADMIN)
    assert r.status_code == 204, r.text
    assert stack.request("GET", "/v2.1/servers", token).status_code == 401
    assert stack.request("GET", f"/identity/v3/users/{uid}", ADMIN).status_code == 404
    assert _issue(stack, "del", "del-password", "p-del").status_code == 401
    with psycopg.connect(api_settings.database_url or "") as conn:
        row = conn.execute(f"SELECT 1 FROM {SCHEMA}.credentials WHERE user_id = %s", (uid,)).fetchone()
    assert row is None
    assert stack.request("DELETE", f"/identity/v3/users/{uid}", ADMIN).status_code == 404
    # the name is free again: a new user, a new id
    body = {"user": {"name": "del", "password": "x" * 8}}
    again = stack.request("POST", "/identity/v3/users", ADMIN, json=body)
    assert again.status_code == 201 and again.json["user"]["id"] != uid
    dup = stack.request("POST", "/identity/v3/users", ADMIN, json={"user": {"name": "del"}})
    assert dup.status_code == 409
    # a project
    member = stack.identities.persona("stay", "p-del", "member")
    assert stack.request("DELETE", f"/identity/v3/projects/{pid}", ADMIN).status_code == 204
    assert stack.request("GET", "/v2.1/servers", member).status_code == 401
    assert stack.request("GET", f"/identity/v3/projects/{pid}", ADMIN).status_code == 404
    r = stack.request("POST", "/identity/v3/projects", ADMIN, json={"project": {"name": "p-del"}})
    assert r.status_code == 201 and r.json["project"]["id"] != pid
