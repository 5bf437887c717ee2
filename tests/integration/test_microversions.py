"""Microversions 2.1 to 2.52 in detail (2.53 to 2.104: tests/integration/test_nova_shapes.py):
every shape that changes follows the requested version (docs/api.md, "Microversions"), against
the real services through ``create_app``."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest

from commands.hosts.register import RegisterHost
from commands.servers.scheduling import PlaceInstance
from tests.fixtures.api import ADMIN, P1, Stack, alive
from tests.fixtures.http_table import Call, Values, run

MV = "OpenStack-API-Version"


def at(stack: Stack, who: str, version: str) -> dict[str, str]:
    return {**stack.headers(who), MV: f"compute {version}"}


def create(stack: Stack, version: str, **fields: Any) -> Any:
    body = {"server": {"name": "vm", "flavorRef": "mv", **fields}}
    return stack.request("POST", "/v2.1/servers", at(stack, P1, version), json=body)


def test_server_body_follows_the_version(stack: Stack) -> None:
    flavor_id, _ = stack.flavor(id="mv", vcpus=2, ram=1024, disk=10)
    stack.request("POST", f"/v2.1/flavors/{flavor_id}/os-extra_specs", json={"extra_specs": {"hw:x": "1"}})
    stack.handlers.register_host(RegisterHost("cmp-mv", vcpus=8, memory_mb=16384, disk_gb=100))
    user_data = base64.b64encode(b"#!/bin/sh\necho hi\n").decode()
    r = create(stack, "2.52", networks="none", tags=["t"], description="about", user_data=user_data)
    sid = r.json["server"]["id"]
    stack.handlers.place_instance(PlaceInstance(sid, "cmp-mv"))
    after = int(
        stack.request("POST", f"/v2.1/servers/{sid}/action", P1, json={"lock": None}).headers[
            "X-Stratus-Position"
        ]
    )

    def show(who: str, version: str) -> dict[str, Any]:
        h = {**at(stack, who, version), "X-Stratus-Min-Position": str(after)}
        r = stack.request("GET", f"/v2.1/servers/{sid}", h)
        assert r.status_code == 200, r.text
        return r.json["server"]

    old = show(ADMIN, "2.1")
    assert set(old["flavor"]) == {"id", "links"} and old["flavor"]["id"] == "mv"
    for absent in ("locked", "host_status", "description", "tags", "OS-EXT-SRV-ATTR:reservation_id"):
        assert absent not in old, absent
    assert old["OS-EXT-SRV-ATTR:instance_name"] == f"instance-{sid}"

    new = show(ADMIN, "2.52")
    assert new["flavor"] == {
        "vcpus": 2,
        "ram": 1024,
        "disk": 10,
        "ephemeral": 0,
        "swap": 0,
        "original_name": "m1.tiny",
        "extra_specs": {"hw:x": "1"},
    }
    assert (new["locked"], new["description"], new["tags"]) == (True, "about", ["t"])
    assert new["host_status"] == "DOWN"  # the host never sent a heartbeat
    assert new["OS-EXT-SRV-ATTR:reservation_id"].startswith("r-")
    assert new["OS-EXT-SRV-ATTR:launch_index"] == 0 and new["OS-EXT-SRV-ATTR:hostname"] == "vm"
    assert new["OS-EXT-SRV-ATTR:user_data"] == user_data
    # the admin-only parts stay admin-only
    member = show(P1, "2.52")
    assert member["locked"] is True and "host_status" not in member
    assert not any(k.startswith("OS-EXT-SRV-ATTR") for k in member)
    alive(stack, "cmp-mv")
    assert show(ADMIN, "2.16")["host_status"] == "UP" and "host_status" not in show(ADMIN, "2.15")
    disable = {"host": "cmp-mv", "binary": "nova-compute"}
    after = int(stack.request("PUT", "/v2.1/os-services/disable", json=disable).headers["X-Stratus-Position"])
    assert show(ADMIN, "2.16")["host_status"] == "MAINTENANCE"
    # each version in between
    assert "locked" in show(P1, "2.9") and "locked" not in show(P1, "2.8")
    assert "description" in show(P1, "2.19") and "tags" not in show(P1, "2.25")
    assert "links" in show(P1, "2.46")["flavor"] and "original_name" in show(P1, "2.47")["flavor"]
    listed = stack.get("/v2.1/servers/detail", at(stack, P1, "2.47")).json["servers"]
    assert listed[0]["flavor"]["original_name"] == "m1.tiny"


def test_hypervisor_cpu_info_and_deleted_servers_actions(stack: Stack) -> None:
    stack.handlers.register_host(RegisterHost("cmp-cpu", vcpus=8, memory_mb=16384, disk_gb=100))
    hyp = stack.get("/v2.1/os-hypervisors/cmp-cpu", at(stack, ADMIN, "2.27"))
    assert hyp.json["hypervisor"]["cpu_info"] == "{}"
    hyp = stack.get("/v2.1/os-hypervisors/cmp-cpu", at(stack, ADMIN, "2.28"))
    assert hyp.json["hypervisor"]["cpu_info"] == {}

    stack.flavor(id="mv")
    sid = create(stack, "2.37", networks="none").json["server"]["id"]
    assert stack.request("DELETE", f"/v2.1/servers/{sid}", P1).status_code == 204
    actions = f"/v2.1/servers/{sid}/os-instance-actions"
    assert stack.get(actions, at(stack, P1, "2.20")).status_code == 404
    listed = stack.get(actions, at(stack, P1, "2.21")).json["instanceActions"]
    assert [a["action"] for a in listed] == ["delete", "create"]


# -- tables: calls whose answers are checked one by one (tests/fixtures/http_table.py) ------------
def a_flavor(stack: Stack) -> Values:
    _, after = stack.flavor(id="mv")
    return {"after": after}


def project(stack: Stack) -> Values:
    return {"p1": stack.project_id("p1")}


def created(version: str, status: int, *words: str, **fields: Any) -> Call:
    """A member's create at ``version`` with ``fields``: ``status``, a 400 naming ``words``."""
    body = {"server": {"name": "vm", "flavorRef": "mv", **fields}}
    fault = ("badRequest", *words) if status == 400 else ()
    return Call(version, "POST", "/v2.1/servers", status, who=P1, body=body, fault=fault)


SERVER_CREATE = [
    # networks: a list before 2.37; from 2.37 required, and "auto"/"none" allowed
    created("2.36", 400, "2.37", networks="none"),
    created("2.36", 202),
    created("2.37", 400, "'networks' is a required property"),
    created("2.37", 202, networks="none"),
    # description from 2.19, tags from 2.52
    created("2.18", 400, "'description'", networks=[], description="d"),
    created("2.19", 202, description="d"),
    created("2.51", 400, "'tags'", networks="none", tags=["a"]),
    created("2.52", 202, networks="none", tags=["a"]),
    # the tag routes are there from 2.26
    Call("2.52", "POST", "/v2.1/servers", 202, who=P1,
         body={"server": {"name": "vm", "flavorRef": "mv", "networks": "none", "tags": ["blue"]}},
         keep=lambda b: {"server": b["server"]["id"]}),
    Call("2.25", "GET", "/v2.1/servers/{server}/tags", 404, who=P1),
    Call("2.26", "GET", "/v2.1/servers/{server}/tags", who=P1, expect=lambda b, v: b == {"tags": ["blue"]}),
]  # fmt: skip

NETWORK_LIMITS = {"maxSecurityGroups", "maxTotalFloatingIps", "maxImageMeta"}
NETWORK_QUOTAS = {"floating_ips", "security_groups"}
LIST_STATUS_FILTER_LIMITS_AND_QUOTAS = [
    Call("2.37", "GET", "/v2.1/servers?status=bogus", who=P1, expect=lambda b, v: b == {"servers": []}),
    Call("2.38", "GET", "/v2.1/servers?status=bogus", 400, who=P1, fault=("badRequest", "bogus")),
    Call("2.1", "GET", "/v2.1/limits", who=P1,
         expect=lambda b, v: set(b["limits"]["absolute"]) >= NETWORK_LIMITS),
    Call("2.39", "GET", "/v2.1/limits", who=P1,
         expect=lambda b, v: not NETWORK_LIMITS & set(b["limits"]["absolute"])
         and b["limits"]["absolute"]["maxTotalInstances"] == 10),
    Call("2.35", "GET", "/v2.1/os-quota-sets/{p1}", who=P1,
         expect=lambda b, v: set(b["quota_set"]) >= NETWORK_QUOTAS),
    Call("2.36", "GET", "/v2.1/os-quota-sets/{p1}", who=P1,
         expect=lambda b, v: not NETWORK_QUOTAS & set(b["quota_set"]) and b["quota_set"]["instances"] == 10),
    Call("2.36", "PUT", "/v2.1/os-quota-sets/{p1}", 400, body={"quota_set": {"floating_ips": 1}},
         fault=("badRequest", "floating_ips")),
]  # fmt: skip

TABLES: dict[str, tuple[Callable[[Stack], Values], list[Call]]] = {
    "server create": (a_flavor, SERVER_CREATE),
    "list status filter, limits and quotas": (project, LIST_STATUS_FILTER_LIMITS_AND_QUOTAS),
}


@pytest.mark.parametrize("table", TABLES)
def test_calls_follow_the_version(stack: Stack, table: str) -> None:
    setup, calls = TABLES[table]
    run(stack, calls, **setup(stack))
