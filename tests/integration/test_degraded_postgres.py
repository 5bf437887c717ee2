"""PostgreSQL stopped under a running API, and started again: the same app answers reads 503 with
``Retry-After`` meanwhile (at once, not after the pool's timeout), still takes writes (they go to the
log), and answers reads again once PostgreSQL is back, with the writes made while it was away.

The whole stack (read models, projector, identity) is on an embedded PostgreSQL of this module's
own (``own_postgres``), never the server other tests share.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from stratus.config import Settings
from stratus.postgres import EmbeddedPostgres
from tests.fixtures.api import P1, Stack, assert_fault


@pytest.fixture
def api_settings(api_settings: Settings, own_postgres: EmbeddedPostgres) -> Settings:
    return dataclasses.replace(api_settings, database_url=own_postgres.url)


def test_the_api_degrades_while_postgresql_is_stopped_and_recovers_when_it_is_back(
    stack: Stack, own_postgres: EmbeddedPostgres
) -> None:
    flavor_id, position = stack.flavor()
    assert stack.get("/v2.1/flavors", P1, after=position).status_code == 200
    assert stack.client.simulate_get("/readyz").status_code == 200

    own_postgres.stop()
    for _ in range(2):  # the connection found broken, then no connection at all
        r = stack.get("/v2.1/flavors", P1)
        assert_fault(r, 503, "serviceUnavailable", "read model")
        assert int(r.headers["Retry-After"]) > 0
    r = stack.client.simulate_get("/readyz")  # not ready (docs/operations.md), and says why
    assert r.status_code == 503 and int(r.headers["Retry-After"]) > 0, r.text
    assert not r.json["checks"]["postgresql"]["ok"] and r.json["checks"]["jetstream"]["ok"], r.text
    r = stack.request("POST", "/v2.1/servers", P1, json={"server": {"name": "vm", "flavorRef": flavor_id}})
    assert r.status_code == 202, r.text
    server_id, position = r.json["server"]["id"], int(r.headers["X-Stratus-Position"])

    own_postgres.start()
    for _ in range(600):  # a client retrying until the pool has reconnected (in the background)
        r = stack.get(f"/v2.1/servers/{server_id}", P1, after=position)
        if r.status_code != 503:
            break
        assert int(r.headers["Retry-After"]) > 0
        time.sleep(0.1)
    assert r.status_code == 200, r.text
    assert r.json["server"]["name"] == "vm"
    assert stack.client.simulate_get("/readyz").status_code == 200
