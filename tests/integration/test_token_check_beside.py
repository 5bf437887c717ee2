"""A list read beside its token's check (api/auth.py): the check sent again in one pipeline with the
list's first statement, the answer held until the check's row is read, and the request answered again
with the check first whenever the check does not find what the request acted on.

On the real stack (the fixture's app reads beside the check as ``api.app.build``'s does). Each test
uses a token once first, so that this process has checked it and its next request reads beside.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import REGISTRY
from psycopg import pq

from api.auth import Authenticated, Authenticator
from projections import identity_queries
from tests.fixtures.api import ADMIN, Stack
from tests.fixtures.identity import password_auth

TOKENS = "/identity/v3/auth/tokens"


def _login(stack: Stack, user: str, project: str) -> dict[str, str]:
    stack.identities.user(user, f"{user}-pw", {project: ("member",)})
    r = stack.client.simulate_post(TOKENS, json=password_auth(user, f"{user}-pw", project))
    assert r.status_code == 201, r.text
    return {"X-Auth-Token": r.headers["X-Subject-Token"]}


class Beside:
    """What the checks beside requests did: each one sent (whether its connection was in pipeline
    mode then), whether each confirmed, the checks made alone, and whether the next one sent fails."""

    def __init__(self) -> None:
        self.sent: list[bool] = []
        self.confirmed: list[bool] = []
        self.alone = 0
        self.fail = False


@pytest.fixture
def beside(monkeypatch: pytest.MonkeyPatch) -> Iterator[Beside]:
    seen = Beside()
    send, confirmed, alone = identity_queries.send_subject, Authenticator.confirmed, Authenticator._subject

    def sending(conn: Any, *args: Any) -> Any:
        seen.sent.append(conn.pgconn.pipeline_status != pq.PipelineStatus.OFF)
        if seen.fail:  # a statement PostgreSQL fails: the pipeline is aborted, the page's statement too
            conn.cursor().execute("SELECT 1 / 0")
        return send(conn, *args)

    def confirming(self: Authenticator, authenticated: Authenticated) -> bool:
        answer = confirmed(self, authenticated)
        if authenticated.pending is not None:
            seen.confirmed.append(answer)
        return answer

    def checking_alone(self: Authenticator, req: Any, claims: Any) -> Any:
        seen.alone += 1
        return alone(self, req, claims)

    monkeypatch.setattr(identity_queries, "send_subject", sending)
    monkeypatch.setattr(Authenticator, "confirmed", confirming)
    monkeypatch.setattr(Authenticator, "_subject", checking_alone)
    yield seen


def _answered(route: str, status: int) -> float:
    labels = {"method": "GET", "route": route, "status": str(status)}
    return REGISTRY.get_sample_value("stratus_api_requests_total", labels) or 0.0


def test_a_list_sends_its_check_in_one_pipeline_with_its_read(stack: Stack, beside: Beside) -> None:
    token = _login(stack, "ida", "p1")
    assert stack.client.simulate_get("/v2.1/servers", headers=token).status_code == 200  # checked first
    assert beside.sent == [] and beside.confirmed == []
    alone = beside.alone
    r = stack.client.simulate_get("/v2.1/servers", headers=token)
    assert r.status_code == 200, r.text
    # sent once, on the page's connection in pipeline mode, and its answer confirmed the request
    assert beside.sent == [True] and beside.confirmed == [True] and beside.alone == alone


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
    assert beside.sent == [True] and beside.confirmed == [False]  # read beside, not confirmed: again
    # one request, one answer counted: the dropped one is not
    assert (_answered("/v2.1/servers", 200), _answered("/v2.1/servers", 401)) == (ok, refused + 1)


def test_a_revoked_tokens_page_read_in_the_checks_pipeline_never_leaves(stack: Stack, beside: Beside) -> None:
    token = _login(stack, "pia", "p1")
    created = stack.client.simulate_post(
        "/v2.1/os-keypairs", headers=token, json={"keypair": {"name": "k-pia-secret"}}
    )
    assert created.status_code == 200, created.text
    listed = stack.client.simulate_get("/v2.1/os-keypairs", headers=token)
    assert "k-pia-secret" in listed.text  # listed while the token is good: its page has this row
    subject = {**token, "X-Subject-Token": token["X-Auth-Token"]}
    assert stack.client.simulate_delete(TOKENS, headers=subject).status_code == 204
    sent = len(beside.sent)
    r = stack.client.simulate_get("/v2.1/os-keypairs", headers=token)
    # the page was read in the check's pipeline (the token's last check let it in), and dropped
    assert beside.sent[sent:] == [True] and beside.confirmed[-1] is False
    assert r.status_code == 401, r.text
    assert "k-pia-secret" not in r.text and "keypairs" not in r.json


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


def test_an_aborted_pipeline_answers_the_request_again_with_the_check_first(
    stack: Stack, beside: Beside
) -> None:
    token = _login(stack, "lou", "p1")
    assert stack.client.simulate_get("/v2.1/os-keypairs", headers=token).status_code == 200
    alone = beside.alone
    beside.fail = True
    r = stack.client.simulate_get("/v2.1/os-keypairs", headers=token)
    assert r.status_code == 200, r.text
    assert r.json == {"keypairs": []}
    # the page read again alone, the request not confirmed, and answered again with its check first
    assert beside.sent == [True] and beside.confirmed == [False] and beside.alone == alone + 1


def test_a_list_that_reads_nothing_is_checked_before_it_answers(stack: Stack, beside: Beside) -> None:
    token = _login(stack, "ned", "p1")
    assert stack.client.simulate_get("/v2.1/flavors", headers=token).status_code == 200
    subject = {**token, "X-Subject-Token": token["X-Auth-Token"]}
    assert stack.client.simulate_delete(TOKENS, headers=subject).status_code == 204
    r = stack.client.simulate_get("/v2.1/flavors?sort_key=bogus", headers=token)  # refused before a read
    assert r.status_code == 401, r.text  # not the 400 a live token gets
    assert beside.sent == [] and beside.confirmed == [False]


def test_a_write_is_never_made_beside_its_check(stack: Stack, beside: Beside) -> None:
    token = _login(stack, "max", "p1")
    assert stack.client.simulate_get("/v2.1/os-keypairs", headers=token).status_code == 200
    body = {"keypair": {"name": "k-beside"}}
    r = stack.client.simulate_post("/v2.1/os-keypairs", headers=token, json=body)
    assert r.status_code == 200, r.text
    assert beside.sent == [] and beside.confirmed == []
