"""A list read beside its token's check (api/auth.py): held until the check answers, and answered
again with the check first whenever the check does not find what the request acted on.

On the real stack (the fixture's app reads beside the check as ``api.app.build``'s does). Each test
uses a token once first, so that this process has checked it and its next request reads beside.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import REGISTRY

from api.app import TOKEN_CHECK_THREADS
from api.auth import Authenticated, Authenticator
from tests.fixtures.api import ADMIN, Stack
from tests.fixtures.identity import password_auth

TOKENS = "/identity/v3/auth/tokens"


def _login(stack: Stack, user: str, project: str) -> dict[str, str]:
    stack.identities.user(user, f"{user}-pw", {project: ("member",)})
    r = stack.client.simulate_post(TOKENS, json=password_auth(user, f"{user}-pw", project))
    assert r.status_code == 201, r.text
    return {"X-Auth-Token": r.headers["X-Subject-Token"]}


class Beside:
    """What the checks beside requests did: whether each confirmed, and a gate they wait at."""

    def __init__(self) -> None:
        self.confirmed: list[bool] = []
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.gate.set()
        self.fail = False


@pytest.fixture
def beside(monkeypatch: pytest.MonkeyPatch) -> Iterator[Beside]:
    seen = Beside()
    subject, confirmed = Authenticator._subject, Authenticator.confirmed

    def checking(self: Authenticator, req: Any, claims: Any) -> Any:
        if threading.current_thread().name.startswith(TOKEN_CHECK_THREADS):  # beside its request
            seen.entered.set()
            assert seen.gate.wait(10)
            if seen.fail:
                raise RuntimeError("the read model failed the check beside")
        return subject(self, req, claims)

    def confirming(self: Authenticator, authenticated: Authenticated) -> bool:
        answer = confirmed(self, authenticated)
        if authenticated.pending is not None:
            seen.confirmed.append(answer)
        return answer

    monkeypatch.setattr(Authenticator, "_subject", checking)
    monkeypatch.setattr(Authenticator, "confirmed", confirming)
    yield seen
    seen.gate.set()


def _answered(route: str, status: int) -> float:
    labels = {"method": "GET", "route": route, "status": str(status)}
    return REGISTRY.get_sample_value("stratus_api_requests_total", labels) or 0.0


def test_a_list_is_held_until_the_check_beside_it_answers(stack: Stack, beside: Beside) -> None:
    token = _login(stack, "ida", "p1")
    assert stack.client.simulate_get("/v2.1/servers", headers=token).status_code == 200  # checked first
    assert beside.confirmed == []
    beside.gate.clear()
    answers: list[Any] = []
    request = threading.Thread(
        target=lambda: answers.append(stack.client.simulate_get("/v2.1/servers", headers=token))
    )
    request.start()
    try:
        assert beside.entered.wait(10), "the second request's check did not run beside it"
        request.join(0.5)
        assert request.is_alive() and answers == [], "the answer left before its check did"
    finally:
        beside.gate.set()
        request.join(10)
    assert answers[0].status_code == 200, answers[0].text
    assert beside.confirmed == [True]


def test_a_token_revoked_since_its_check_gets_a_401_and_the_read_is_dropped(
    stack: Stack, beside: Beside
) -> None:
    token = _login(stack, "jay", "p1")
    assert stack.client.simulate_get("/v2.1/servers", headers=token).status_code == 200
    subject = {**token, "X-Subject-Token": token["X-Auth-Token"]}
    assert stack.client.simulate_delete(TOKENS, headers=subject).status_code == 204
    ok, refused = _answered("/v2.1/servers", 200), _answered("/v2.1/servers", 401)
    r = stack.client.simulate_get("/v2.1/servers", headers=token)
    assert r.status_code == 401, r.text
    assert "servers" not in r.json and r.headers["WWW-Authenticate"].startswith("Keystone uri=")
    assert beside.confirmed == [False]  # read beside, not confirmed: answered again, checked first
    # one request, one answer counted: the dropped one is not
    assert (_answered("/v2.1/servers", 200), _answered("/v2.1/servers", 401)) == (ok, refused + 1)


def test_a_role_granted_since_its_check_is_answered_with_the_new_roles(stack: Stack, beside: Beside) -> None:
    stack.flavor(name="secret", id="private-beside", **{"os-flavor-access:is_public": False})
    token = _login(stack, "kim", "p1")
    listed = "/v2.1/flavors/detail?is_public=none"
    assert "private-beside" not in {
        f["id"] for f in stack.client.simulate_get(listed, headers=token).json["flavors"]
    }
    roles = {r["name"]: r["id"] for r in stack.request("GET", "/identity/v3/roles", ADMIN).json["roles"]}
    grant = (
        f"/identity/v3/projects/{stack.project_id('p1')}/users/{stack.user_id('kim')}/roles/{roles['admin']}"
    )
    assert stack.request("PUT", grant, ADMIN).status_code == 204
    r = stack.client.simulate_get(listed, headers=token)
    assert r.status_code == 200, r.text
    assert "private-beside" in _flavors(r)  # as an admin now, not as before
    assert beside.confirmed == [False]
    r = stack.client.simulate_get(listed, headers=token)  # and the new roles are the ones read beside
    assert "private-beside" in _flavors(r)
    assert beside.confirmed == [False, True]


def _flavors(r: Any) -> set[str]:
    assert r.status_code == 200, r.text
    return {f["id"] for f in r.json["flavors"]}


def test_a_check_beside_that_fails_is_made_again_first(stack: Stack, beside: Beside) -> None:
    token = _login(stack, "lou", "p1")
    assert stack.client.simulate_get("/v2.1/os-keypairs", headers=token).status_code == 200
    beside.fail = True
    r = stack.client.simulate_get("/v2.1/os-keypairs", headers=token)
    assert r.status_code == 200, r.text
    assert r.json == {"keypairs": []}
    assert beside.confirmed == [False]


def test_a_write_is_never_made_beside_its_check(stack: Stack, beside: Beside) -> None:
    token = _login(stack, "max", "p1")
    assert stack.client.simulate_get("/v2.1/os-keypairs", headers=token).status_code == 200
    body = {"keypair": {"name": "k-beside"}}
    r = stack.client.simulate_post("/v2.1/os-keypairs", headers=token, json=body)
    assert r.status_code == 200, r.text
    assert not beside.entered.is_set() and beside.confirmed == []
