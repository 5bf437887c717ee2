"""The HTTP API against the real services: JetStream records the commands, the real projector
fills the PostgreSQL read model in a thread, and falcon's TestClient speaks to ``create_app(deps)``.

Nothing of ours is mocked: hosts are registered, placed and failed with the real command handlers,
as the hypervisor and scheduler workers would.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import falcon
import pytest
from falcon import testing

from api.app import Deps, LazyApp, create_app
from api.readmodel import open_pool
from commands.hosts.register import RegisterHost
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import FailInstance
from processes import bootstrap
from stratus import serialization
from stratus.config import Settings
from stratus.eventstore import NatsBridge
from tests.fixtures.api import ADMIN, ADMIN_P9, P1, P2, Stack, alive, assert_fault
from tests.fixtures.facades.placement_handlers import PlacementHandlers
from tests.fixtures.identity import ADMIN_PASSWORD, Identities
from tests.fixtures.processes import ROOT, free_port


# -- versions and microversions -----------------------------------------------------------------
def test_version_documents(stack: Stack) -> None:
    r = stack.get("/")
    assert r.status_code == 200
    v20, v21 = r.json["versions"]  # Nova's order: the legacy v2.0 first
    assert (v20["id"], v20["status"], v20["version"]) == ("v2.0", "SUPPORTED", "")
    assert stack.get("/v2").json["version"]["links"][0] == v20["links"][0]
    assert v21["id"] == "v2.1" and v21["status"] == "CURRENT"
    assert v21["min_version"] == "2.1" and v21["version"] == "2.104"
    assert v21["links"][0]["href"].endswith("/v2.1/")

    for path in ("/v2.1", "/v2.1/"):
        r = stack.get(path)
        assert r.status_code == 200
        assert r.json["version"]["id"] == "v2.1"
        assert r.json["version"]["media-types"][0]["base"] == "application/json"


@pytest.mark.parametrize(
    ("headers", "served"),
    [
        ({"OpenStack-API-Version": "compute 2.1"}, "2.1"),
        ({"OpenStack-API-Version": "compute 2.37"}, "2.37"),
        ({"OpenStack-API-Version": "compute latest"}, "2.104"),
        ({"OpenStack-API-Version": "placement 1.30, compute 2.26"}, "2.26"),
        ({"X-OpenStack-Nova-API-Version": "2.19"}, "2.19"),
        ({}, "2.1"),
    ],
)
def test_microversion_is_echoed(stack: Stack, headers: dict[str, str], served: str) -> None:
    r = stack.get("/v2.1/servers", {**stack.auth(ADMIN), **headers})
    assert r.status_code == 200, r.text
    assert r.headers["OpenStack-API-Version"] == f"compute {served}"
    assert r.headers["X-OpenStack-Nova-API-Version"] == served
    assert "OpenStack-API-Version" in r.headers["Vary"]


# -- the life of a server -----------------------------------------------------------------------
def test_flavor_server_read_delete(stack: Stack) -> None:
    _, flavor_pos = stack.flavor(id="tiny", ram=256)
    assert flavor_pos > 0

    r = stack.request(
        "POST",
        "/v2.1/servers",
        P1,
        json={"server": {"name": "web-1", "flavorRef": "tiny", "metadata": {"a": "b"}}},
    )
    assert r.status_code == 202, r.text
    position = int(r.headers["X-Stratus-Position"])
    assert position > flavor_pos
    created = r.json["server"]
    server_id = created["id"]
    assert uuid.UUID(server_id)
    assert "adminPass" not in created
    assert created["OS-DCF:diskConfig"] == "MANUAL"
    assert [link["rel"] for link in created["links"]] == ["self", "bookmark"]
    assert r.headers["Location"] == created["links"][0]["href"]
    assert r.headers["x-compute-request-id"] == r.headers["x-openstack-request-id"]

    r = stack.get(f"/v2.1/servers/{server_id}", P1, after=position)
    assert r.status_code == 200, r.text
    server = r.json["server"]
    assert server["id"] == server_id
    assert server["name"] == "web-1"
    assert server["status"] == "BUILD"
    assert server["tenant_id"] == stack.project_id("p1") and server["user_id"] == stack.user_id("bob")
    assert server["flavor"]["id"] == "tiny"
    assert server["flavor"]["links"][0]["href"].endswith("/flavors/tiny")
    assert server["image"] == ""
    assert server["metadata"] == {"a": "b"}
    assert server["addresses"] == {}
    assert server["hostId"] == ""
    assert server["OS-EXT-STS:vm_state"] == "building"
    assert server["OS-EXT-STS:task_state"] == "scheduling"
    assert server["OS-EXT-STS:power_state"] == 0
    assert server["created"].endswith("Z") and server["updated"].endswith("Z")
    assert "OS-EXT-SRV-ATTR:host" not in server  # not for members
    assert "fault" not in server

    # The same server through ?min_position= and in both listings.
    r = stack.get(f"/v2.1/servers/{server_id}?min_position={position}", P1)
    assert r.status_code == 200
    r = stack.get("/v2.1/servers", P1, after=position)
    assert r.json["servers"] == [
        {"id": server_id, "name": "web-1", "links": server["links"]},
    ]
    assert "servers_links" not in r.json
    r = stack.get("/v2.1/servers/detail", P1, after=position)
    assert r.json["servers"] == [server]

    r = stack.request("DELETE", f"/v2.1/servers/{server_id}", P1)
    assert r.status_code == 204, r.text
    deleted_at = int(r.headers["X-Stratus-Position"])
    assert deleted_at > position

    # It never reached a host, so it is gone at once (Nova's local delete).
    assert_fault(
        stack.get(f"/v2.1/servers/{server_id}", P1, after=deleted_at), 404, "itemNotFound", server_id
    )
    assert stack.get("/v2.1/servers", P1, after=deleted_at).json["servers"] == []
    assert_fault(stack.request("DELETE", f"/v2.1/servers/{server_id}", P1), 404, "itemNotFound")
    # An admin can still find it among the deleted.
    r = stack.get("/v2.1/servers/detail?all_tenants=1&deleted=true", ADMIN)
    assert [s["status"] for s in r.json["servers"]] == ["DELETED"]


def test_events_name_the_actor_and_the_request(
    stack: Stack, bridge: NatsBridge, api_settings: Settings
) -> None:
    """The command context set per request reaches the event's CloudEvents headers on the stream."""
    flavor_id, _ = stack.flavor()
    global_id = f"req-{uuid.uuid4()}"
    body = {"server": {"name": "traced", "flavorRef": flavor_id}}
    traced = {**stack.auth(P1), "X-OpenStack-Request-ID": global_id}
    r = stack.request("POST", "/v2.1/servers", traced, json=body)
    assert r.status_code == 202
    position = int(r.headers["X-Stratus-Position"])
    msg = bridge.run(lambda: bridge.js.get_msg(api_settings.stream, position), timeout=10)
    headers = msg.headers or {}
    assert headers["ce-actoruser"] == stack.user_id("bob")
    assert headers["ce-actorproject"] == stack.project_id("p1")
    assert headers["ce-actorroles"] == "member,reader"  # with the role "member" implies
    assert headers["ce-requestid"] == r.headers["x-openstack-request-id"]
    assert headers["ce-correlationid"] == global_id
    assert headers["ce-subject"] == r.json["server"]["id"]


def test_idempotency_key_returns_the_first_server(stack: Stack) -> None:
    flavor_id, _ = stack.flavor()
    body = {"server": {"name": "once", "flavorRef": flavor_id}}
    headers = {**stack.auth(P1), "Idempotency-Key": "k-123"}
    first = stack.request("POST", "/v2.1/servers", headers, json=body)
    again = stack.request("POST", "/v2.1/servers", headers, json=body)
    assert first.status_code == again.status_code == 202
    assert first.json["server"]["id"] == again.json["server"]["id"]
    after = int(again.headers["X-Stratus-Position"])
    assert len(stack.get("/v2.1/servers", P1, after=after).json["servers"]) == 1


def test_paging_and_filters(stack: Stack) -> None:
    flavor_id, _ = stack.flavor()
    ids = []
    for name in ("alpha", "beta", "gamma"):
        sid, last = stack.server(flavor_id, P1, name=name)
        ids.append(sid)
    newest_first = list(reversed(ids))

    r = stack.get("/v2.1/servers?limit=2", P1, after=last)
    assert [s["id"] for s in r.json["servers"]] == newest_first[:2]
    (link,) = r.json["servers_links"]
    assert link["rel"] == "next"
    assert f"marker={newest_first[1]}" in link["href"] and "limit=2" in link["href"]
    assert "/v2.1/servers?" in link["href"]

    r = stack.get(f"/v2.1/servers/detail?limit=2&marker={newest_first[1]}", P1)
    assert [s["id"] for s in r.json["servers"]] == newest_first[2:]
    assert "servers_links" not in r.json

    assert stack.get("/v2.1/servers?limit=0", P1).json["servers"] == []
    r = stack.get("/v2.1/servers?name=^b", P1)
    assert [s["name"] for s in r.json["servers"]] == ["beta"]
    r = stack.get("/v2.1/servers?status=BUILD", P1)
    assert len(r.json["servers"]) == 3
    assert stack.get("/v2.1/servers?status=ACTIVE", P1).json["servers"] == []

    assert_fault(stack.get(f"/v2.1/servers?marker={uuid.uuid4()}", P1), 400, "badRequest", "marker")
    # Another project's server is no marker for this one.
    assert_fault(stack.get(f"/v2.1/servers?marker={ids[0]}", P2), 400, "badRequest", "marker")


# -- projects and roles -------------------------------------------------------------------------
def test_projects_are_isolated(stack: Stack) -> None:
    flavor_id, _ = stack.flavor()
    mine, after = stack.server(flavor_id, P1, name="mine")
    theirs, after = stack.server(flavor_id, P2, name="theirs")

    assert [s["id"] for s in stack.get("/v2.1/servers", P1, after=after).json["servers"]] == [mine]
    assert [s["id"] for s in stack.get("/v2.1/servers/detail", P2).json["servers"]] == [theirs]
    assert_fault(stack.get(f"/v2.1/servers/{mine}", P2), 404, "itemNotFound")
    assert_fault(stack.request("DELETE", f"/v2.1/servers/{mine}", P2), 404, "itemNotFound")
    assert_fault(stack.get("/v2.1/servers?all_tenants=1", P2), 403, "forbidden")

    # The admin of another project sees one project by default, every project with all_tenants.
    assert stack.get("/v2.1/servers", ADMIN_P9).json["servers"] == []
    everyone = stack.get("/v2.1/servers/detail?all_tenants=1", ADMIN_P9).json["servers"]
    assert {s["id"] for s in everyone} == {mine, theirs}
    p2 = stack.project_id("p2")
    only_p2 = stack.get(f"/v2.1/servers?all_tenants=1&project_id={p2}", ADMIN_P9).json["servers"]
    assert [s["id"] for s in only_p2] == [theirs]
    r = stack.get(f"/v2.1/servers/{theirs}", ADMIN_P9)
    assert r.status_code == 200 and r.json["server"]["tenant_id"] == p2
    assert "OS-EXT-SRV-ATTR:host" in r.json["server"]
    # ...and may delete it.
    assert stack.request("DELETE", f"/v2.1/servers/{theirs}", ADMIN_P9).status_code == 204

    # Members may not create flavors or see hypervisors.
    body = {"flavor": {"name": "x", "ram": 1, "vcpus": 1, "disk": 0}}
    assert_fault(stack.request("POST", "/v2.1/flavors", P1, json=body), 403, "forbidden")
    assert_fault(stack.get("/v2.1/os-hypervisors", P1), 403, "forbidden")


def test_without_a_token_nothing_but_the_version_documents(stack: Stack) -> None:
    flavor_id, _ = stack.flavor()
    r = stack.client.simulate_post("/v2.1/servers", json={"server": {"name": "d", "flavorRef": flavor_id}})
    assert_fault(r, 401, "unauthorized", "requires authentication")
    assert r.headers["WWW-Authenticate"] == 'Keystone uri="http://falconframework.org/identity"'
    for path in ("/v2.1/servers", "/v2.1/flavors", "/v2.1/os-hypervisors"):
        assert stack.client.simulate_get(path).status_code == 401, path
    assert stack.client.simulate_get("/").status_code == 200
    assert stack.client.simulate_get("/v2.1").status_code == 200
    # The old identity headers are not believed any more.
    old = {"X-User-Id": "alice", "X-Project-Id": "p1", "X-Roles": "admin"}
    assert stack.client.simulate_get("/v2.1/servers", headers=old).status_code == 401


def test_placed_and_failed_server_shows_host_and_fault(stack: Stack) -> None:
    flavor_id, _ = stack.flavor(vcpus=2, ram=1024, disk=10)
    stack.handlers.register_host(RegisterHost("cmp-1", vcpus=8, memory_mb=16384, disk_gb=100))
    sid, _ = stack.server(flavor_id, P1)
    placed = stack.handlers.place_instance(PlaceInstance(sid, "cmp-1")).position

    server = stack.get(f"/v2.1/servers/{sid}", ADMIN_P9, after=placed).json["server"]
    assert server["hostId"] == hashlib.sha224(f"{stack.project_id('p1')}cmp-1".encode()).hexdigest()
    assert server["OS-EXT-SRV-ATTR:host"] == "cmp-1"
    assert server["OS-EXT-AZ:availability_zone"] == "nova"
    hyp = stack.get("/v2.1/os-hypervisors/cmp-1", ADMIN, after=placed).json["hypervisor"]
    assert (hyp["vcpus_used"], hyp["memory_mb_used"], hyp["local_gb_used"]) == (2, 1024, 10)
    assert hyp["free_ram_mb"] == 16384 - 1024 and hyp["free_disk_gb"] == 90
    # the host keeps some for itself (Placement's reserved): Nova counts it as used
    inventories = {**stack.handlers.host("cmp-1").inventories}
    inventories["MEMORY_MB"] = {**inventories["MEMORY_MB"], "reserved": 512}
    inventories["DISK_GB"] = {**inventories["DISK_GB"], "reserved": 5}
    _, reserved = PlacementHandlers(stack.handlers.app).set_inventories(
        str(stack.handlers.host("cmp-1").id), None, inventories
    )
    hyp = stack.get("/v2.1/os-hypervisors/cmp-1", ADMIN, after=reserved).json["hypervisor"]
    assert (hyp["memory_mb_used"], hyp["local_gb_used"]) == (1024 + 512, 10 + 5)
    assert (hyp["free_ram_mb"], hyp["free_disk_gb"], hyp["vcpus_used"]) == (16384 - 1536, 85, 2)

    failed = stack.handlers.fail_instance(
        FailInstance(sid, "compute.spawn_failed", "Build of instance failed", details="traceback...")
    ).position
    server = stack.get(f"/v2.1/servers/{sid}", P1, after=failed).json["server"]
    assert server["status"] == "ERROR"
    assert server["fault"]["code"] == 500
    assert server["fault"]["message"] == "Build of instance failed"
    assert server["fault"]["created"].endswith("Z")
    assert "details" not in server["fault"]  # only admins see a 500 fault's details
    admin_view = stack.get(f"/v2.1/servers/{sid}", ADMIN_P9).json["server"]
    assert admin_view["fault"]["details"] == "traceback..."
    hyp = stack.get("/v2.1/os-hypervisors/cmp-1", ADMIN).json["hypervisor"]
    assert hyp["vcpus_used"] == 0  # the fault released the claim


# -- flavors and hypervisors --------------------------------------------------------------------
def test_flavors(stack: Stack) -> None:
    r = stack.request(
        "POST",
        "/v2.1/flavors",
        json={
            "flavor": {
                "name": "m1.small",
                "id": 2,
                "ram": 2048,
                "vcpus": 1,
                "disk": 20,
                "OS-FLV-EXT-DATA:ephemeral": 5,
                "swap": 512,
                "rxtx_factor": 2.0,
            }
        },
    )
    assert r.status_code == 200, r.text
    small = r.json["flavor"]
    assert small == {
        "id": "2",
        "name": "m1.small",
        "ram": 2048,
        "vcpus": 1,
        "disk": 20,
        "OS-FLV-EXT-DATA:ephemeral": 5,
        "swap": 512,
        "rxtx_factor": 2.0,
        "os-flavor-access:is_public": True,
        "OS-FLV-DISABLED:disabled": False,
        "links": small["links"],
    }
    generated, _ = stack.flavor(name="m1.tiny")
    assert uuid.UUID(generated)
    private, after = stack.flavor(name="secret", id="private-1", **{"os-flavor-access:is_public": False})

    r = stack.get("/v2.1/flavors/2", P1, after=after)
    assert r.json["flavor"] == small
    listed = stack.get("/v2.1/flavors", P1).json["flavors"]
    assert {f["id"] for f in listed} == {"2", generated}
    assert set(listed[0]) == {"id", "name", "links"}
    assert {f["id"] for f in stack.get("/v2.1/flavors/detail", ADMIN).json["flavors"]} == {"2", generated}
    every = stack.get("/v2.1/flavors/detail?is_public=none", ADMIN).json["flavors"]
    assert {f["id"] for f in every} == {"2", generated, private}
    only_private = stack.get("/v2.1/flavors?is_public=false", ADMIN).json["flavors"]
    assert [f["id"] for f in only_private] == [private]
    assert_fault(stack.get(f"/v2.1/flavors/{private}", P1), 404, "itemNotFound")
    assert stack.get(f"/v2.1/flavors/{private}", ADMIN).status_code == 200

    r = stack.get("/v2.1/flavors?limit=1", P1)
    (link,) = r.json["flavors_links"]
    assert f"marker={r.json['flavors'][0]['id']}" in link["href"]

    body = {"flavor": {"name": "x", "id": "2", "ram": 1, "vcpus": 1, "disk": 0}}
    again = stack.request("POST", "/v2.1/flavors", json=body)
    assert_fault(again, 409, "conflictingRequest", "already exists")
    # A private flavor is still usable by an admin; an unknown one is a bad request (as in Nova).
    assert_fault(
        stack.request("POST", "/v2.1/servers", P1, json={"server": {"name": "x", "flavorRef": "nope"}}),
        400,
        "badRequest",
        "nope",
    )
    sid, _ = stack.server(f"http://example.com/flavors/{generated}", P1)
    assert uuid.UUID(sid)


def test_hypervisors(stack: Stack) -> None:
    stack.handlers.register_host(RegisterHost("cmp-a", vcpus=4, memory_mb=8192, disk_gb=50))
    # cmp-a's worker is alive (it beats); cmp-b's never said a word: down.
    alive(stack, "cmp-a")
    after = stack.handlers.register_host(RegisterHost("cmp-b", vcpus=2, memory_mb=4096, disk_gb=20)).position
    r = stack.get("/v2.1/os-hypervisors", ADMIN, after=after)
    assert [h["hypervisor_hostname"] for h in r.json["hypervisors"]] == ["cmp-a", "cmp-b"]
    assert set(r.json["hypervisors"][0]) == {"id", "hypervisor_hostname", "state", "status"}
    detail = stack.get("/v2.1/os-hypervisors/detail", ADMIN).json["hypervisors"]
    a = detail[0]
    assert (a["vcpus"], a["memory_mb"], a["local_gb"]) == (4, 8192, 50)
    assert (a["vcpus_used"], a["memory_mb_used"], a["local_gb_used"], a["running_vms"]) == (0, 0, 0, 0)
    assert (a["free_ram_mb"], a["free_disk_gb"]) == (8192, 50)
    assert a["hypervisor_type"] == "QEMU" and a["state"] == "up" and a["status"] == "enabled"
    assert detail[1]["state"] == "down"
    assert stack.get(f"/v2.1/os-hypervisors/{a['id']}", ADMIN).json["hypervisor"] == a
    assert_fault(stack.get("/v2.1/os-hypervisors/nope", ADMIN), 404, "itemNotFound")


# -- reading your own writes ----------------------------------------------------------------------
def test_read_model_behind_is_a_503(stack: Stack, api_settings: Settings) -> None:
    fast = create_app(
        Deps(
            bus=stack.bus,
            log=stack.log,
            pool=open_pool(api_settings.database_url or ""),
            settings=dataclasses.replace(api_settings, read_wait_seconds=0.2),
            token_signer=stack.signer,
        )
    )
    headers = {**stack.auth(P1), "X-Stratus-Min-Position": "999999"}
    r = testing.TestClient(fast).simulate_get("/v2.1/servers", headers=headers)
    assert_fault(r, 503, "serviceUnavailable", "has not caught up with position 999999", "retry")
    assert r.headers["Retry-After"] == "1"


# -- unexpected errors ----------------------------------------------------------------------------
class _Broken:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        raise RuntimeError("a bug")


def test_unexpected_error_is_a_logged_500_with_the_request_id(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    stack.app.add_route("/v2.1/broken", _Broken())
    with caplog.at_level(logging.ERROR, logger="stratus.api"):
        token = stack.auth(ADMIN)
        r = stack.get("/v2.1/broken", token)
    assert_fault(r, 500, "computeFault", r.headers["x-openstack-request-id"])
    assert "a bug" not in r.text
    (record,) = [rec for rec in caplog.records if rec.name == "stratus.api"]
    assert r.headers["x-openstack-request-id"] in record.getMessage()
    assert record.exc_info is not None
    assert token["X-Auth-Token"] not in caplog.text


# -- the error sweep: bad input is never a 500 ------------------------------------------------------
BIG = b'{"server": {"name": "' + b"x" * (1024 * 1024) + b'", "flavorRef": "1"}}'
SERVER = {"name": "s", "flavorRef": "1"}
FLAVOR = {"name": "f", "ram": 1, "vcpus": 1, "disk": 0}
S = "/v2.1/servers"
F = "/v2.1/flavors"


def srv(**fields: Any) -> dict[str, Any]:
    return {"json": {"server": {**SERVER, **fields}}}


def flv(**fields: Any) -> dict[str, Any]:
    return {"json": {"flavor": {**FLAVOR, **fields}}}


def hdr(name: str, value: str) -> dict[str, Any]:
    return {"headers": {name: value}}


MV = "OpenStack-API-Version"
# (case id, method, path, request kwargs, status, words the fault's message must contain)
SWEEP: list[tuple[str, str, str, dict[str, Any], int, tuple[str, ...]]] = [
    ("malformed json", "POST", S, {"body": b'{"server": '}, 400, ("Malformed",)),
    ("empty body", "POST", S, {"body": b""}, 400, ("body",)),
    ("not an object", "POST", S, {"json": ["server"]}, 400, ("object",)),
    ("missing server", "POST", S, {"json": {}}, 400, ("server",)),
    ("missing name", "POST", S, {"json": {"server": {"flavorRef": "1"}}}, 400, ("server.name",)),
    ("missing flavorRef", "POST", S, {"json": {"server": {"name": "a"}}}, 400, ("server.flavorRef",)),
    ("unknown field", "POST", S, srv(personality=[]), 400, ("server.personality",)),
    ("unknown top field", "POST", S, {"json": {"server": SERVER, "extra": 1}}, 400, ("extra",)),
    ("name wrong type", "POST", S, srv(name=5), 400, ("server.name",)),
    ("name empty", "POST", S, srv(name=""), 400, ("server.name",)),
    ("name too long", "POST", S, srv(name="n" * 256), 400, ("server.name",)),
    ("name leading space", "POST", S, srv(name=" a"), 400, ("server.name",)),
    ("metadata value type", "POST", S, srv(metadata={"a": 1}), 400, ("server.metadata.a",)),
    ("too many servers", "POST", S, srv(max_count=101), 400, ("server.max_count",)),
    ("networks list", "POST", S, srv(networks=[{"uuid": "x"}]), 400, ("server.networks",)),
    ("unknown flavor", "POST", S, srv(flavorRef="zz"), 400, ("zz",)),
    ("oversized body", "POST", S, {"body": BIG}, 413, ("too large",)),
    (
        "form content type",
        "POST",
        S,
        {"body": b"n=x", **hdr("Content-Type", "application/x-www-form-urlencoded")},
        415,
        ("Content-Type",),
    ),
    (
        "idempotency key too long",
        "POST",
        S,
        {**srv(), **hdr("Idempotency-Key", "k" * 300)},
        400,
        ("Idempotency-Key",),
    ),
    ("flavor ram type", "POST", F, flv(ram="lots"), 400, ("flavor.ram",)),
    ("flavor vcpus zero", "POST", F, flv(vcpus=0), 400, ("flavor.vcpus",)),
    (
        "flavor missing disk",
        "POST",
        F,
        {"json": {"flavor": {"name": "f", "ram": 1, "vcpus": 1}}},
        400,
        ("flavor.disk",),
    ),
    ("flavor bad id", "POST", F, flv(id="a/b"), 400, ("flavor.id",)),
    ("flavor description (2.55)", "POST", F, flv(description="d"), 400, ("'description'", "2.55")),
    (
        "flavor is_public not bool",  # Nova's boolean strings ("yes", "True", "0"...) are booleans
        "POST",
        F,
        flv(**{"os-flavor-access:is_public": "maybe"}),
        400,
        ("os-flavor-access:is_public",),
    ),
    ("flavor huge ram", "POST", F, flv(ram=2**40), 400, ("flavor.ram",)),
    ("unknown server", "GET", f"{S}/{uuid.uuid4()}", {}, 404, ("could not be found",)),
    ("not a uuid", "GET", f"{S}/not-a-uuid", {}, 404, ("not-a-uuid",)),
    ("delete unknown", "DELETE", f"{S}/{uuid.uuid4()}", {}, 404, ("could not be found",)),
    ("unknown flavor id", "GET", f"{F}/nope", {}, 404, ("nope",)),
    ("unknown hypervisor", "GET", "/v2.1/os-hypervisors/nope", {}, 404, ("nope",)),
    ("unknown path", "GET", "/v2.1/os-nothing-here", {}, 404, ("os-nothing-here",)),
    ("put servers", "PUT", S, {"json": {}}, 405, ("PUT",)),
    ("patch server", "PATCH", f"{S}/{uuid.uuid4()}", {}, 405, ("PATCH",)),
    ("delete flavors", "DELETE", F, {}, 405, ("DELETE",)),
    ("post version", "POST", "/v2.1", {}, 405, ("POST",)),
    ("microversion too new", "GET", S, hdr(MV, "compute 2.105"), 406, ("2.105", "maximum is 2.104")),
    ("legacy microversion too new", "GET", S, hdr("X-OpenStack-Nova-API-Version", "2.160"), 406, ("2.160",)),
    ("microversion 3", "GET", F, hdr(MV, "compute 3.0"), 406, ("3.0",)),
    ("microversion garbage", "GET", S, hdr(MV, "compute two"), 400, ("invalid format",)),
    ("limit not a number", "GET", f"{S}?limit=ten", {}, 400, ("limit",)),
    ("limit negative", "GET", f"{F}?limit=-1", {}, 400, ("limit",)),
    ("marker unknown", "GET", f"{S}/detail?marker=nope", {}, 400, ("marker",)),
    ("flavor marker unknown", "GET", f"{F}?marker=nope", {}, 400, ("marker",)),
    ("name not a regex", "GET", f"{S}?name=(", {}, 400, ("regular expression",)),
    ("is_public garbage", "GET", f"{F}?is_public=maybe", {}, 400, ("is_public",)),
    (
        "min position garbage",
        "GET",
        S,
        hdr("X-Stratus-Min-Position", "soon"),
        400,
        ("X-Stratus-Min-Position",),
    ),
    ("min position param negative", "GET", f"{S}?min_position=-3", {}, 400, ("min_position",)),
    ("garbage token", "GET", S, hdr("X-Auth-Token", "admin"), 401, ("requires authentication",)),
    ("forged token", "GET", F, hdr("X-Auth-Token", "eyJ2IjoxfQ.AAAA"), 401, ("requires authentication",)),
]
FAULT_NAMES = {
    400: "badRequest",
    401: "unauthorized",
    404: "itemNotFound",
    405: "badMethod",
    406: "computeFault",
    413: "overLimit",
    415: "badMediaType",
}  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "words"),
    [pytest.param(*case[1:], id=case[0]) for case in SWEEP],
)
def test_error_sweep(
    stack: Stack, method: str, path: str, kwargs: dict[str, Any], status: int, words: tuple[str, ...]
) -> None:
    kwargs = dict(kwargs)
    headers = {**stack.auth(ADMIN), **kwargs.pop("headers", {})}
    r = stack.client.simulate_request(method, path, headers=headers, **kwargs)
    assert_fault(r, status, FAULT_NAMES[status], *words)


# -- the lazy composition root --------------------------------------------------------------------
def test_lazy_app_answers_503_until_it_can_compose(
    api_settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker whose services cannot be built answers a Nova 503 (and retries on the next request)."""
    attempts = []

    def unusable() -> Settings:
        attempts.append(1)
        return dataclasses.replace(api_settings, nats_urls=())  # the NATS bridge refuses to start

    client = testing.TestClient(LazyApp(unusable))
    with caplog.at_level(logging.ERROR, logger="stratus.api"):
        for _ in range(2):
            r = client.simulate_get("/v2.1/servers")
            assert_fault(
                r, 503, "serviceUnavailable", "cannot reach its services", r.headers["x-compute-request-id"]
            )
            assert r.headers["Retry-After"] == "5"
    assert len(attempts) == 2
    assert "could not be composed" in caplog.text


# -- under real gunicorn ----------------------------------------------------------------------------
def _http(
    method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], Any]:
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, hdrs, data = r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        status, hdrs, data = e.code, dict(e.headers), e.read()
    return status, {k.lower(): v for k, v in hdrs.items()}, serialization.loads(data) if data else None


def test_under_gunicorn(api_settings: Settings, projector: None, tmp_path: Path) -> None:
    """``gunicorn 'processes.api:get_app()'`` with two workers, composed after the fork, over HTTP."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    seeded = bootstrap.main(api_settings, ADMIN_PASSWORD)
    assert seeded.generated_password is None
    env = {**os.environ, **api_settings.to_env(), "PYTHONPATH": str(ROOT)}
    log_path = tmp_path / "gunicorn.log"
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{port}", "--workers", "2",
             "--graceful-timeout", "5", "processes.api:get_app()"],
            cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, log_path.read_text()
            try:
                status, headers, doc = _http("GET", f"{base}/")
                break
            except OSError:
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.1)
        assert status == 200 and doc["versions"][-1]["id"] == "v2.1"
        assert headers["x-openstack-request-id"].startswith("req-")

        def send(method: str, path: str, headers: dict[str, str], body: Any) -> tuple[int, Any, Any]:
            data = None if body is None else serialization.dumps(body)
            status, got, doc = _http(method, f"{base}{path}", data, headers)
            return status, {"X-Subject-Token": got.get("x-subject-token", ""), **got}, doc

        # Tokens from one worker work on the other: both read the same key file.
        identities = Identities(send)
        admin = {"X-Auth-Token": identities.login_admin(after=seeded.position)}
        P1 = identities.persona("bob", "p1", "member")

        flavor = {"flavor": {"name": "m1.tiny", "ram": 512, "vcpus": 1, "disk": 1}}
        status, headers, doc = _http("POST", f"{base}/v2.1/flavors", serialization.dumps(flavor), admin)
        assert status == 200, doc
        flavor_id = doc["flavor"]["id"]

        server = {"server": {"name": "vm1", "flavorRef": flavor_id, "networks": "none"}}
        status, headers, doc = _http(
            "POST", f"{base}/v2.1/servers", serialization.dumps(server), P1 | {MV: "compute 2.37"}
        )
        assert status == 202, doc
        assert headers["openstack-api-version"] == "compute 2.37"
        server_id, position = doc["server"]["id"], headers["x-stratus-position"]
        assert headers["location"] == f"{base}/v2.1/servers/{server_id}"

        read = P1 | {"X-Stratus-Min-Position": position}
        status, _, doc = _http("GET", f"{base}/v2.1/servers/{server_id}", headers=read)
        assert status == 200, doc
        assert doc["server"]["status"] == "BUILD" and doc["server"]["flavor"]["id"] == flavor_id
        status, _, doc = _http("GET", f"{base}/v2.1/servers/detail", headers=read)
        assert [s["id"] for s in doc["servers"]] == [server_id]

        status, headers, doc = _http("DELETE", f"{base}/v2.1/servers/{server_id}", headers=P1)
        assert status == 204, doc
        read = P1 | {"X-Stratus-Min-Position": headers["x-stratus-position"]}
        status, _, doc = _http("GET", f"{base}/v2.1/servers/{server_id}", headers=read)
        assert status == 404 and doc["itemNotFound"]["code"] == 404

        # Bad input over a real socket: a body over the limit and malformed JSON.
        status, _, doc = _http("POST", f"{base}/v2.1/servers", BIG, P1)
        assert status == 413 and "overLimit" in doc
        status, _, doc = _http("POST", f"{base}/v2.1/servers", b"{", P1)
        assert status == 400 and "badRequest" in doc
        status, headers, doc = _http("POST", f"{base}/v2.1/servers", b"{}")
        assert status == 401 and headers["www-authenticate"] == f'Keystone uri="{base}/identity"', doc
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    output = log_path.read_text()
    assert proc.returncode == 0, output
    assert "Traceback" not in output, output
