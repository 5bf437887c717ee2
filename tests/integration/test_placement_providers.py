"""Resource providers that are not compute hosts, over HTTP against the real JetStream and PostgreSQL:
created, renamed, re-parented and deleted as Placement answers at each microversion, and used by the
existing routes (inventories, traits, aggregates, allocations, usages, candidates) like a host's."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from commands.host import host_aggregate_id
from commands.hosts.register import RegisterHost
from tests.fixtures.api import ADMIN, Stack


def call(st: Stack, method: str, path: str, version: str | None = "1.39", **kw: Any) -> Any:
    headers = {**st.auth(ADMIN), **({"OpenStack-API-Version": f"placement {version}"} if version else {})}
    return st.client.simulate_request(method, f"/placement{path}", headers=headers, **kw)


def assert_error(r: Any, status: int, code: str, *words: str) -> None:
    assert r.status_code == status, (r.status_code, r.text)
    (error,) = r.json["errors"]
    assert error["status"] == status and error["code"] == code, error
    for word in words:
        assert word in error["detail"], (word, error["detail"])


def create(st: Stack, name: str, version: str = "1.39", **fields: Any) -> dict[str, Any]:
    r = call(st, "POST", "/resource_providers", version, json={"name": name, **fields})
    assert r.status_code == 200, r.text
    return r.json  # type: ignore[no-any-return]


def allocate(st: Stack, provider: str, resources: dict[str, int]) -> str:
    """A new consumer of project ``p`` holding ``resources`` on ``provider``; its uuid."""
    consumer = str(uuid.uuid4())
    body = {
        "allocations": {provider: {"resources": resources}},
        "project_id": "p", "user_id": "u", "consumer_generation": None,
    }  # fmt: skip
    assert call(st, "PUT", f"/allocations/{consumer}", json=body).status_code == 204
    return consumer


@pytest.fixture
def host(stack: Stack) -> str:
    stack.handlers.register_host(RegisterHost("cmp-a", vcpus=4, memory_mb=4096, disk_gb=100))
    return str(host_aggregate_id("cmp-a"))


def test_create_answers_per_microversion(stack: Stack) -> None:
    rp = str(uuid.uuid4())
    r = call(stack, "POST", "/resource_providers", "1.19", json={"name": "pool", "uuid": rp})
    assert r.status_code == 201 and not r.text
    assert r.headers["Location"].endswith(f"/placement/resource_providers/{rp}")
    r = call(stack, "POST", "/resource_providers", "1.20", json={"name": "bw"})
    assert r.status_code == 200, r.text
    assert set(r.json) == {
        "uuid",
        "name",
        "generation",
        "links",
        "parent_provider_uuid",
        "root_provider_uuid",
    }
    assert r.headers["Location"].endswith(r.json["uuid"])
    assert (r.json["generation"], r.json["parent_provider_uuid"]) == (0, None)
    assert r.json["root_provider_uuid"] == r.json["uuid"]
    old = call(stack, "GET", f"/resource_providers/{rp}", "1.13").json
    assert set(old) == {"uuid", "name", "generation", "links"} and old["name"] == "pool"

    dashless = uuid.uuid4()
    r = call(stack, "POST", "/resource_providers", "1.0", json={"name": "d", "uuid": dashless.hex})
    assert r.status_code == 201 and r.headers["Location"].endswith(str(dashless))
    assert_error(
        call(stack, "POST", "/resource_providers", json={"name": "other", "uuid": rp}),
        409, "placement.duplicate_name", f"Conflicting resource provider uuid: {rp} already exists",
    )  # fmt: skip
    assert_error(
        call(stack, "POST", "/resource_providers", json={"name": "pool"}),
        409, "placement.duplicate_name", "Conflicting resource provider name: pool already exists",
    )  # fmt: skip
    # the schemas: name required and at most 200 characters, no parent before 1.14, nothing else
    for version, body in (
        ("1.39", {}),
        ("1.39", {"name": "x" * 201}),
        ("1.39", {"name": "x", "uuid": "not-a-uuid"}),
        ("1.39", {"name": "x", "generation": 3}),
        ("1.13", {"name": "x", "parent_provider_uuid": rp}),
        ("1.39", {"name": "x", "parent_provider_uuid": "nope"}),
    ):
        r = call(stack, "POST", "/resource_providers", version, json=body)
        assert_error(r, 400, "placement.undefined_code")
    assert (
        "Failed validating 'maxLength'"
        in call(stack, "POST", "/resource_providers", json={"name": "x" * 201}).json["errors"][0]["detail"]
    )
    names = [p["name"] for p in call(stack, "GET", "/resource_providers").json["resource_providers"]]
    assert names == ["bw", "d", "pool"]


def test_a_host_name_is_taken(stack: Stack, host: str) -> None:
    assert_error(
        call(stack, "POST", "/resource_providers", json={"name": "cmp-a"}), 409, "placement.duplicate_name"
    )
    assert_error(
        call(stack, "POST", "/resource_providers", json={"name": "x", "uuid": host}),
        409, "placement.duplicate_name",
    )  # fmt: skip


def test_trees_parents_and_in_tree(stack: Stack, host: str) -> None:
    child = create(stack, "cmp-a_gpu", parent_provider_uuid=host)
    assert (child["parent_provider_uuid"], child["root_provider_uuid"]) == (host, host)
    grandchild = create(stack, "cmp-a_gpu_0", parent_provider_uuid=child["uuid"])
    assert grandchild["root_provider_uuid"] == host
    other = create(stack, "pool")
    orphan = {"name": "o", "parent_provider_uuid": str(uuid.uuid4())}
    assert_error(
        call(stack, "POST", "/resource_providers", json=orphan),
        400, "placement.undefined_code", "parent provider UUID does not exist",
    )  # fmt: skip
    me = str(uuid.uuid4())
    itself = {"name": "me", "uuid": me, "parent_provider_uuid": me}
    assert_error(
        call(stack, "POST", "/resource_providers", json=itself),
        400, "placement.undefined_code", "parent provider UUID cannot be same as UUID",
    )  # fmt: skip

    def tree(of: str) -> list[str]:
        r = call(stack, "GET", f"/resource_providers?in_tree={of}")
        assert r.status_code == 200, r.text
        return sorted(p["name"] for p in r.json["resource_providers"])

    assert tree(grandchild["uuid"]) == ["cmp-a", "cmp-a_gpu", "cmp-a_gpu_0"]
    assert tree(other["uuid"]) == ["pool"]
    assert tree(str(uuid.uuid4())) == []
    assert_error(call(stack, "GET", "/resource_providers?in_tree=nope"), 400, "placement.undefined_code")

    # PUT: rename; give a root a parent (1.14); re-parent or un-parent only from 1.37; no loops
    path = f"/resource_providers/{other['uuid']}"
    r = call(stack, "PUT", path, "1.14", json={"name": "pool-1", "parent_provider_uuid": child["uuid"]})
    assert r.status_code == 200 and r.json["root_provider_uuid"] == host and r.json["name"] == "pool-1"
    assert r.json["generation"] == 0
    assert_error(
        call(stack, "PUT", path, "1.36", json={"name": "pool-1", "parent_provider_uuid": host}),
        400, "placement.undefined_code", "re-parenting a provider is not currently allowed",
    )  # fmt: skip
    assert_error(
        call(stack, "PUT", path, "1.36", json={"name": "pool-1", "parent_provider_uuid": None}),
        400, "placement.undefined_code", "un-parenting a provider is not currently allowed",
    )  # fmt: skip
    r = call(stack, "PUT", path, "1.13", json={"name": "pool-2"})  # no parent before 1.14: kept
    assert r.status_code == 200 and set(r.json) == {"uuid", "name", "generation", "links"}
    assert call(stack, "GET", path).json["parent_provider_uuid"] == child["uuid"]
    assert_error(
        call(stack, "PUT", f"/resource_providers/{child['uuid']}", json={
            "name": "cmp-a_gpu", "parent_provider_uuid": grandchild["uuid"]
        }),
        400, "placement.undefined_code", "creating loop in the provider tree is not allowed",
    )  # fmt: skip
    r = call(stack, "PUT", f"/resource_providers/{child['uuid']}", json={
        "name": "gpu", "parent_provider_uuid": None,
    })  # fmt: skip
    assert r.status_code == 200 and r.json["root_provider_uuid"] == child["uuid"]
    # the subtree follows its new root
    assert call(stack, "GET", path).json["root_provider_uuid"] == child["uuid"]
    assert tree(child["uuid"]) == ["cmp-a_gpu_0", "gpu", "pool-2"]
    assert_error(call(stack, "PUT", path, json={"name": "cmp-a"}), 409, "placement.duplicate_name")
    assert_error(
        call(stack, "PUT", path, json={"name": "x", "uuid": other["uuid"]}), 400, "placement.undefined_code"
    )
    # a compute host's provider is named by its host and a root
    same = call(stack, "PUT", f"/resource_providers/{host}", json={"name": "cmp-a"})
    assert same.status_code == 200 and same.json["name"] == "cmp-a"
    assert_error(
        call(stack, "PUT", f"/resource_providers/{host}", json={"name": "renamed"}),
        400,
        "placement.undefined_code",
    )


def test_delete_refused_while_in_use_or_a_parent(stack: Stack, host: str) -> None:
    parent = create(stack, "sriov")
    child = create(stack, "sriov_vf", parent_provider_uuid=parent["uuid"])
    assert_error(
        call(stack, "DELETE", f"/resource_providers/{parent['uuid']}"),
        409, "placement.resource_provider.cannot_delete_parent", "It has child resource providers",
    )  # fmt: skip
    rp = f"/resource_providers/{child['uuid']}"
    inv = {"resource_provider_generation": 0, "inventories": {"SRIOV_NET_VF": {"total": 8}}}
    assert call(stack, "PUT", f"{rp}/inventories", json=inv).status_code == 200
    consumer = allocate(stack, child["uuid"], {"SRIOV_NET_VF": 2})
    assert_error(call(stack, "DELETE", rp), 409, "placement.resource_provider.inuse", "has allocations")
    assert call(stack, "DELETE", f"/allocations/{consumer}").status_code == 204
    assert call(stack, "DELETE", rp).status_code == 204
    assert_error(call(stack, "GET", rp), 404, "placement.undefined_code")
    assert_error(call(stack, "DELETE", rp), 404, "placement.undefined_code", "found for delete")
    assert call(stack, "DELETE", f"/resource_providers/{parent['uuid']}").status_code == 204
    # its name is free again; a compute host's provider is not deleted here
    create(stack, "sriov")
    assert_error(
        call(stack, "DELETE", f"/resource_providers/{host}"), 409, "placement.resource_provider.inuse"
    )


def test_providers_take_what_hosts_take(stack: Stack, host: str) -> None:
    pool = create(stack, "ceph")
    rp = f"/resource_providers/{pool['uuid']}"
    inv = {"resource_provider_generation": 0, "inventories": {"DISK_GB": {"total": 1000, "reserved": 100}}}
    r = call(stack, "PUT", f"{rp}/inventories", json=inv)
    assert r.status_code == 200 and r.json["resource_provider_generation"] == 1
    assert_error(call(stack, "PUT", f"{rp}/inventories", json=inv), 409, "placement.concurrent_update")
    traits = {"resource_provider_generation": 1, "traits": ["MISC_SHARES_VIA_AGGREGATE"]}
    assert call(stack, "PUT", f"{rp}/traits", json=traits).status_code == 200
    agg = str(uuid.uuid4())
    aggs = {"resource_provider_generation": 2, "aggregates": [agg]}
    assert call(stack, "PUT", f"{rp}/aggregates", json=aggs).json["resource_provider_generation"] == 3

    consumer = allocate(stack, pool["uuid"], {"DISK_GB": 300})
    assert call(stack, "GET", f"{rp}/usages").json == {
        "resource_provider_generation": 4,
        "usages": {"DISK_GB": 300},
    }
    assert call(stack, "GET", f"{rp}/allocations").json["allocations"] == {
        consumer: {"resources": {"DISK_GB": 300}}
    }
    assert call(stack, "GET", "/usages?project_id=p", "1.37").json == {"usages": {"DISK_GB": 300}}
    too_much = {
        "allocations": {pool["uuid"]: {"resources": {"DISK_GB": 901}}},
        "project_id": "p", "user_id": "u", "consumer_generation": 1,
    }  # fmt: skip
    assert_error(
        call(stack, "PUT", f"/allocations/{consumer}", json=too_much), 409, "placement.undefined_code"
    )

    # listed and filtered like a host
    def names(query: str) -> list[str]:
        return [
            p["name"] for p in call(stack, "GET", f"/resource_providers?{query}").json["resource_providers"]
        ]

    assert names(f"member_of={agg}") == ["ceph"]
    assert names("required=MISC_SHARES_VIA_AGGREGATE") == ["ceph"]
    assert names("resources=DISK_GB:600") == ["ceph"]
    assert names("resources=DISK_GB:50") == ["ceph", "cmp-a"]
    # offered as a single-provider candidate, and summarised with its tree
    r = call(stack, "GET", "/allocation_candidates?resources=DISK_GB:500")
    assert [list(a["allocations"]) for a in r.json["allocation_requests"]] == [[pool["uuid"]]]
    summary = r.json["provider_summaries"][pool["uuid"]]
    assert summary["resources"] == {"DISK_GB": {"capacity": 900, "used": 300}}
    assert (summary["parent_provider_uuid"], summary["root_provider_uuid"]) == (None, pool["uuid"])


def test_never_a_hypervisor_nor_a_compute_service(stack: Stack, host: str) -> None:
    pool = create(stack, "vcpu-pool")
    inv = {
        "resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": 64}, "MEMORY_MB": {"total": 65536}},
    }
    assert call(stack, "PUT", f"/resource_providers/{pool['uuid']}/inventories", json=inv).status_code == 200
    position = stack.handlers.app.recorder.max_notification_id() or 0
    hypervisors = stack.get("/v2.1/os-hypervisors", ADMIN, after=position).json["hypervisors"]
    assert [h["hypervisor_hostname"] for h in hypervisors] == ["cmp-a"]
    services = stack.get("/v2.1/os-services", ADMIN).json["services"]
    assert {s["host"] for s in services if s["binary"] == "nova-compute"} == {"cmp-a"}
