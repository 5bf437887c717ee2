"""Tokens as Keystone's: chains, revocation of a whole chain, and the events that end a user's
tokens (a password change, a disable, a role removal), on the real stack.

Each of these was found open by an attacker's probe: a token obtained with a token had a fresh
full lifetime, revoking a parent left its child valid, a password change left old tokens valid,
re-enabling a user revived tokens, and a correctly signed token with bad claims answered 500.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import orjson
import psycopg
from cryptography.fernet import Fernet

from api.identity.credentials import SCHEMA, LoginThrottle, ThrottlePolicy, hash_password, verify_password
from api.identity.tokens import load_or_create_key
from stratus.config import Settings
from tests.fixtures.api import ADMIN, Stack
from tests.fixtures.identity import password_auth

TOKENS = "/identity/v3/auth/tokens"
SERVERS = "/v2.1/servers"


def _login(stack: Stack, user: str, password: str, project: str) -> str:
    r = stack.client.simulate_post(TOKENS, json=password_auth(user, password, project))
    assert r.status_code == 201, r.text
    return str(r.headers["X-Subject-Token"])


def _exchange(stack: Stack, token: str) -> Any:
    body = {"auth": {"identity": {"methods": ["token"], "token": {"id": token}}}}
    return stack.client.simulate_post(TOKENS, json=body, headers={"X-Auth-Token": token})


def _works(stack: Stack, token: str) -> bool:
    status = stack.client.simulate_get(SERVERS, headers={"X-Auth-Token": token}).status_code
    assert status in (200, 401), status
    return status == 200


def _user(stack: Stack, name: str) -> str:
    stack.identities.user(name, f"{name}-pw", {"p1": ("member",)})
    return stack.user_id(name)


def test_a_token_from_a_token_keeps_its_parents_expiry_and_chain(stack: Stack) -> None:
    _user(stack, "dora")
    parent = _login(stack, "dora", "dora-pw", "p1")
    shown = stack.client.simulate_get(TOKENS, headers={"X-Auth-Token": parent, "X-Subject-Token": parent})
    r = _exchange(stack, parent)
    assert r.status_code == 201, r.text
    child = r.json["token"]
    assert child["expires_at"] == shown.json["token"]["expires_at"]  # not a fresh hour
    assert child["audit_ids"][1] == shown.json["token"]["audit_ids"][0]  # the parent's chain
    assert child["methods"] == ["token"]
    grandchild = _exchange(stack, r.headers["X-Subject-Token"]).json["token"]
    assert grandchild["audit_ids"][1] == shown.json["token"]["audit_ids"][0]
    assert grandchild["expires_at"] == shown.json["token"]["expires_at"]


def test_revoking_any_token_of_a_chain_revokes_the_whole_chain(stack: Stack) -> None:
    _user(stack, "eve")
    for revoke in ("parent", "child"):
        parent = _login(stack, "eve", "eve-pw", "p1")
        child = _exchange(stack, parent).headers["X-Subject-Token"]
        other = _login(stack, "eve", "eve-pw", "p1")  # another chain of the same user
        assert _works(stack, parent) and _works(stack, child)
        target = parent if revoke == "parent" else child
        r = stack.client.simulate_delete(TOKENS, headers={"X-Auth-Token": target, "X-Subject-Token": target})
        assert r.status_code == 204, r.text
        assert not _works(stack, parent) and not _works(stack, child), revoke
        assert _works(stack, other)


def test_a_password_change_ends_the_tokens_issued_before_it(stack: Stack) -> None:
    uid = _user(stack, "finn")
    old = _login(stack, "finn", "finn-pw", "p1")
    child = _exchange(stack, old).headers["X-Subject-Token"]
    r = stack.request("PATCH", f"/identity/v3/users/{uid}", ADMIN, json={"user": {"password": "finn-new-pw"}})
    assert r.status_code == 200, r.text
    assert not _works(stack, old) and not _works(stack, child)
    assert _works(stack, _login(stack, "finn", "finn-new-pw", "p1"))


def test_a_role_removal_ends_the_tokens_issued_before_it(stack: Stack) -> None:
    uid = _user(stack, "gus")
    stack.identities.user("gus", "gus-pw", {"p2": ("member",)})
    old = _login(stack, "gus", "gus-pw", "p2")
    roles = {r["name"]: r["id"] for r in stack.request("GET", "/identity/v3/roles", ADMIN).json["roles"]}
    p1 = stack.project_id("p1")
    stack.identities.user("gus", "gus-pw", {"p1": ("manager",)})
    in_p1 = _login(stack, "gus", "gus-pw", "p1")
    r = stack.request("DELETE", f"/identity/v3/projects/{p1}/users/{uid}/roles/{roles['manager']}", ADMIN)
    assert r.status_code == 204, r.text
    assert not _works(stack, in_p1)  # though gus is still a member there: issued before the removal
    assert _works(stack, _login(stack, "gus", "gus-pw", "p1"))
    # As Keystone revokes by user and project: the user's tokens on other projects live on.
    assert _works(stack, old)
    assert _works(stack, _login(stack, "gus", "gus-pw", "p2"))


def test_a_correctly_encrypted_token_with_bad_claims_is_a_401(stack: Stack, api_settings: Settings) -> None:
    fernet = Fernet(base64.urlsafe_b64encode(load_or_create_key(api_settings.token_key_path)[0]))
    for claims in (
        {"v": 2},
        {"v": 2, "id": 1, "c": "", "u": "x", "p": "y", "iat": 0, "exp": 2**62, "m": []},
        {"v": 2, "id": "zz", "c": "", "u": "x", "p": "y", "iat": 0, "exp": 2**62, "m": ["password"]},
        {"v": 2, "id": "ab", "c": "", "u": "x", "p": "y", "iat": "0", "exp": 2**62, "m": ["password"]},
        {"v": 2, "id": "ab", "c": "", "u": "x", "p": "y", "iat": 0, "exp": 2**63 - 1, "m": ["password"]},
        [1, 2, 3],
    ):
        token = fernet.encrypt(orjson.dumps(claims)).decode()
        assert stack.client.simulate_get(SERVERS, headers={"X-Auth-Token": token}).status_code == 401, claims


def test_an_old_scrypt_hash_is_upgraded_to_argon2id_at_the_next_login(
    stack: Stack, api_settings: Settings
) -> None:
    uid = _user(stack, "hal")
    # As a release of the scrypt era stored it (n=2**14, r=8, p=1, 16-byte salt).
    salt = b"0123456789abcdef"
    digest = hashlib.scrypt(b"hal-pw", salt=salt, n=2**14, r=8, p=1, dklen=32)
    old = f"scrypt$16384$8$1${base64.b64encode(salt).decode()}${base64.b64encode(digest).decode()}"
    with psycopg.connect(api_settings.database_url or "", autocommit=True) as conn:
        conn.execute(f"UPDATE {SCHEMA}.credentials SET password_hash = %s WHERE user_id = %s", (old, uid))
        assert stack.client.simulate_post(TOKENS, json=password_auth("hal", "wrong", "p1")).status_code == 401
        assert _stored(conn, uid) == old  # a failed login upgrades nothing
        assert _works(stack, _login(stack, "hal", "hal-pw", "p1"))
        upgraded = _stored(conn, uid)
    assert upgraded.startswith("$argon2id$") and verify_password("hal-pw", upgraded)
    assert _works(stack, _login(stack, "hal", "hal-pw", "p1"))


def test_a_hash_of_another_cost_is_replaced_at_the_next_login(stack: Stack, api_settings: Settings) -> None:
    uid = _user(stack, "ida")
    default_cost = hash_password("ida-pw")  # RFC 9106's profile; the tests' deployment hashes cheaper
    assert "$m=65536,t=3,p=4$" in default_cost and api_settings.password_hash_memory_kib != 65536
    with psycopg.connect(api_settings.database_url or "", autocommit=True) as conn:
        conn.execute(
            f"UPDATE {SCHEMA}.credentials SET password_hash = %s WHERE user_id = %s", (default_cost, uid)
        )
        assert _works(stack, _login(stack, "ida", "ida-pw", "p1"))
        replaced = _stored(conn, uid)
    cost = f"m={api_settings.password_hash_memory_kib},t={api_settings.password_hash_iterations},p=4"
    assert f"${cost}$" in replaced and verify_password("ida-pw", replaced)


def _stored(conn: psycopg.Connection[Any], user_id: str) -> str:
    row = conn.execute(
        f"SELECT password_hash FROM {SCHEMA}.credentials WHERE user_id = %s", (user_id,)
    ).fetchone()
    assert row is not None
    return str(row[0])


def test_failed_logins_are_throttled_per_user_with_a_429_and_retry_after(stack: Stack) -> None:
    _user(stack, "ivy")
    limit = ThrottlePolicy().per_user
    for _ in range(limit):
        r = stack.client.simulate_post(TOKENS, json=password_auth("ivy", "guess", "p1"))
        assert r.status_code == 401
    r = stack.client.simulate_post(TOKENS, json=password_auth("ivy", "ivy-pw", "p1"))  # even the right one
    assert r.status_code == 429, r.text
    assert r.json["error"]["code"] == 429 and r.json["error"]["title"] == "Too Many Requests"
    assert 0 < int(r.headers["Retry-After"]) <= ThrottlePolicy().window_seconds + 1
    # Another user is not held up by ivy's attacker, and an unknown name is counted like a real one.
    _user(stack, "jon")
    assert _works(stack, _login(stack, "jon", "jon-pw", "p1"))
    for _ in range(limit):
        assert stack.client.simulate_post(TOKENS, json=password_auth("nobody", "x", "p1")).status_code == 401
    assert stack.client.simulate_post(TOKENS, json=password_auth("nobody", "x", "p1")).status_code == 429


def test_failed_logins_are_throttled_per_source_address(stack: Stack, api_settings: Settings) -> None:
    for name in ("kim", "lou"):
        _user(stack, name)
    with psycopg.connect(api_settings.database_url or "", autocommit=True) as conn:
        throttle = LoginThrottle(lambda: psycopg.connect(api_settings.database_url or "", autocommit=True))
        for i in range(throttle.policy.per_source):
            throttle.failed(f"someone-{i}", "127.0.0.1")  # many names, one address (the test client's)
        r = stack.client.simulate_post(TOKENS, json=password_auth("kim", "kim-pw", "p1"))
        assert r.status_code == 429 and int(r.headers["Retry-After"]) > 0
        conn.execute(f"DELETE FROM {SCHEMA}.login_failures WHERE key LIKE 'source:%%'")
    assert _works(stack, _login(stack, "lou", "lou-pw", "p1"))


def test_concurrent_logins_do_not_exhaust_the_read_models_pool(stack: Stack) -> None:
    """A login used to hold a read-model connection while the password check took a second one
    from the same pool: enough logins at once answered 503."""
    from concurrent.futures import ThreadPoolExecutor

    _user(stack, "par")

    def login(_: int) -> int:
        r = stack.client.simulate_post(TOKENS, json=password_auth("par", "par-pw", "p1"))
        return int(r.status_code)

    with ThreadPoolExecutor(12) as pool:
        assert set(pool.map(login, range(24))) == {201}
