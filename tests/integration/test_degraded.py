"""Degrading clearly: with PostgreSQL or JetStream away, the API answers what it can, and 503 with
``Retry-After`` for the rest, in each API's own error shape; never 500.

PostgreSQL away: an app whose read-model pool points at a port where nothing listens, beside the real
stack (its log, its token key): writes still go to the log, reads answer 503, and once PostgreSQL is
back (the stack's own app) the writes are there. JetStream away: a server of this module's own
(``own_nats_server``), stopped: writes answer 503, reads still answer, and a create retried with its
``Idempotency-Key`` once JetStream is back acts once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from falcon import testing

from api.app import Deps, create_app
from api.readmodel import open_pool
from stratus.config import Settings
from stratus.natsserver import NatsServer
from tests.fixtures.api import ADMIN, P1, Stack, assert_fault
from tests.fixtures.identity import password_auth
from tests.fixtures.nats import unique_settings
from tests.fixtures.processes import free_port


@pytest.fixture
def settings(own_nats_server: NatsServer) -> Settings:
    """This module's stream on a JetStream server of its own, to stop."""
    return unique_settings(own_nats_server.url)


@pytest.fixture
def no_postgres(stack: Stack, api_settings: Settings) -> Iterator[testing.TestClient]:
    """The API as a node sees it once PostgreSQL is down: the same log and token key, no read model."""
    pool = open_pool(f"postgresql://postgres@127.0.0.1:{free_port()}/stratus", timeout=1.0)
    deps = Deps(bus=stack.bus, log=stack.log, pool=pool, settings=api_settings, token_signer=stack.signer)
    yield testing.TestClient(create_app(deps))
    pool.close()


def assert_retry_later(r: testing.Result) -> None:
    assert r.status_code == 503, (r.status_code, r.text)
    assert int(r.headers["Retry-After"]) > 0


def assert_keystone_503(r: testing.Result) -> None:
    assert_retry_later(r)
    assert r.json == {
        "error": {"code": 503, "title": "Service Unavailable", "message": r.json["error"]["message"]}
    }


def assert_placement_503(r: testing.Result) -> None:
    assert_retry_later(r)
    (error,) = r.json["errors"]
    assert set(error) == {"status", "title", "detail", "code", "request_id"}
    assert (error["status"], error["code"]) == (503, "placement.undefined_code")
    assert error["request_id"] == r.headers["x-openstack-request-id"]


def test_with_postgresql_away_writes_go_to_the_log_and_reads_answer_503(
    stack: Stack, no_postgres: testing.TestClient
) -> None:
    flavor_id, _ = stack.flavor()
    admin, member = stack.auth(ADMIN), stack.auth(P1)

    def call(method: str, path: str, who: dict[str, str], **kw: Any) -> testing.Result:
        return no_postgres.simulate_request(method, path, headers=who, **kw)

    # Writes: the caller's roles come from the log, the command goes to the log.
    r = call("POST", "/v2.1/servers", member, json={"server": {"name": "vm", "flavorRef": flavor_id}})
    assert r.status_code == 202, r.text
    server_id, position = r.json["server"]["id"], int(r.headers["X-Stratus-Position"])
    r = call(
        "POST",
        "/v2.1/flavors",
        admin,
        json={"flavor": {"name": "m1.big", "ram": 1024, "vcpus": 2, "disk": 2}},
    )
    assert r.status_code == 200, r.text

    # Reads: 503 with Retry-After, each in its API's shape.
    for path in ("/v2.1/servers", "/v2.1/flavors", f"/v2.1/servers/{server_id}", "/image/v2/images"):
        r = call("GET", path, member)
        assert_fault(r, 503, "serviceUnavailable", "read model")
        assert_retry_later(r)
    assert_keystone_503(call("GET", "/identity/v3/projects", admin))
    # Placement's providers are read from the log: they still answer.
    assert call("GET", "/placement/resource_providers", admin).status_code == 200
    # A password is checked against PostgreSQL: no new token until it is back.
    assert_keystone_503(
        call("POST", "/identity/v3/auth/tokens", {}, json=password_auth("admin", "x", "admin"))
    )

    # PostgreSQL back (the stack's own app): the write made meanwhile is there.
    r = stack.get(f"/v2.1/servers/{server_id}", P1, after=position)
    assert r.status_code == 200 and r.json["server"]["name"] == "vm"


def test_with_postgresql_away_the_log_refuses_what_the_read_model_would_and_judges_no_more(
    stack: Stack, no_postgres: testing.TestClient
) -> None:
    flavor_id, _ = stack.flavor()
    body = {"server": {"name": "vm", "flavorRef": flavor_id}}
    ids = stack.identities
    p1 = stack.project_id("p1")
    roles = {r["name"]: r["id"] for r in stack.get("/identity/v3/roles").json["roles"]}

    # A revoked token.
    revoked = ids.persona("dave", "p1", "member")
    r = stack.request(
        "DELETE", "/identity/v3/auth/tokens", {**revoked, "X-Subject-Token": revoked["X-Auth-Token"]}
    )
    assert r.status_code == 204, r.text
    # A token issued before its user's role in the project was taken away (another role kept).
    cut = ids.persona("erin", "p1", "member", "reader")
    erin = stack.user_id("erin")
    r = stack.request("DELETE", f"/identity/v3/projects/{p1}/users/{erin}/roles/{roles['member']}")
    assert r.status_code == 204, r.text
    # A token issued before its user's password changed.
    changed = ids.persona("fred", "p1", "member")
    fred = stack.user_id("fred")
    change = {"user": {"password": "fred-password-2"}}
    assert stack.request("PATCH", f"/identity/v3/users/{fred}", json=change).status_code == 200
    for headers in (revoked, cut, changed):
        assert_fault(
            no_postgres.simulate_post("/v2.1/servers", headers=headers, json=body), 401, "unauthorized"
        )

    # A user whose role in the project comes from a group only: the log alone cannot tell, so 503.
    group = stack.request("POST", "/identity/v3/groups", json={"group": {"name": "ops"}}).json["group"]["id"]
    ids.user("gina", "gina-password", {})
    gina = stack.user_id("gina")
    assert stack.request("PUT", f"/identity/v3/groups/{group}/users/{gina}").status_code == 204
    path = f"/identity/v3/projects/{p1}/groups/{group}/roles/{roles['member']}"
    assert stack.request("PUT", path).status_code == 204
    grouped = {"X-Auth-Token": ids.token("gina", "gina-password", "p1")}
    r = no_postgres.simulate_post("/v2.1/servers", headers=grouped, json=body)
    assert_fault(r, 503, "serviceUnavailable", "read model")
    assert_retry_later(r)
    # ... while the read model, up, lets her in.
    assert stack.request("POST", "/v2.1/servers", grouped, json=body).status_code == 202


def test_with_jetstream_away_writes_answer_503_and_a_retry_acts_once(
    stack: Stack, own_nats_server: NatsServer
) -> None:
    flavor_id, _ = stack.flavor()
    admin, member = stack.auth(ADMIN), stack.auth(P1)
    assert stack.client.simulate_get("/readyz").status_code == 200
    own_nats_server.stop()

    create = {"server": {"name": "vm", "flavorRef": flavor_id}}
    # no token at all: 401 as ever, before anything is found away
    assert_fault(stack.client.simulate_post("/v2.1/servers", json=create), 401, "unauthorized")
    once = {**member, "Idempotency-Key": "create-vm-1"}
    r = stack.request("POST", "/v2.1/servers", once, json=create)
    assert_fault(r, 503, "serviceUnavailable", "event log")
    assert_retry_later(r)
    r = stack.request(
        "POST", "/v2.1/flavors", admin, json={"flavor": {"name": "m1.big", "ram": 1, "vcpus": 1, "disk": 1}}
    )
    assert_fault(r, 503, "serviceUnavailable")
    assert_retry_later(r)
    assert_keystone_503(
        stack.request("POST", "/identity/v3/projects", admin, json={"project": {"name": "p7"}})
    )
    provider = {"name": "rp1"}
    headers = {**admin, "OpenStack-API-Version": "placement 1.39"}
    assert_placement_503(stack.request("POST", "/placement/resource_providers", headers, json=provider))
    assert_placement_503(stack.request("GET", "/placement/resource_providers", headers))
    # Reads still answer from the read model; the API is not ready (docs/operations.md).
    assert stack.get("/v2.1/flavors", P1).status_code == 200
    r = stack.client.simulate_get("/readyz")
    assert r.status_code == 503 and not r.json["checks"]["jetstream"]["ok"], r.text
    assert r.json["checks"]["postgresql"]["ok"], r.text

    own_nats_server.start()
    for _ in range(100):  # the client retries, as Retry-After says, until JetStream is back
        r = stack.request("POST", "/v2.1/servers", once, json=create)
        if r.status_code != 503:
            break
    assert r.status_code == 202, r.text
    first = r.json["server"]["id"]
    r = stack.request("POST", "/v2.1/servers", once, json=create)
    assert r.status_code == 202 and r.json["server"]["id"] == first
    r = stack.get("/v2.1/servers", P1, after=int(r.headers["X-Stratus-Position"]))
    assert [s["id"] for s in r.json["servers"]] == [first]
    assert stack.client.simulate_get("/readyz").status_code == 200
