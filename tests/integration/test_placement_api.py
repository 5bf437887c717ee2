"""The Placement API subset under /placement, over HTTP against the real JetStream and PostgreSQL:
providers are the compute hosts, and the scheduler's claims and Placement's allocations share them."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from api.placement.view import ProviderView
from commands.flavors.create import CreateFlavor
from commands.host import host_aggregate_id
from commands.hosts.register import RegisterHost
from commands.servers.create import CreateServer
from commands.servers.moves import MigrateServer, ResizeDecision
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import FinishSpawning, StartSpawning
from commands.states import PowerState
from tests.fixtures.api import P1, Stack
from tests.fixtures.facades.migration import MigrationHandlers
from tests.fixtures.facades.placement_handlers import PlacementHandlers

V = {"OpenStack-API-Version": "placement 1.39"}


def call(st: Stack, method: str, path: str, version: str | None = "1.39", **kw: Any) -> Any:
    headers = {
        **st.auth("alice@p1"),
        **({"OpenStack-API-Version": f"placement {version}"} if version else {}),
    }
    return st.client.simulate_request(method, f"/placement{path}", headers=headers, **kw)


def assert_error(r: Any, status: int, code: str, *words: str) -> None:
    assert r.status_code == status, (r.status_code, r.text)
    (error,) = r.json["errors"]
    assert error["status"] == status and error["code"] == code, error
    assert error["request_id"].startswith("req-")
    for word in words:
        assert word in error["detail"], (word, error["detail"])


@pytest.fixture
def cloud(stack: Stack) -> dict[str, str]:
    h = stack.handlers
    h.register_host(RegisterHost("cmp-a", vcpus=4, memory_mb=4096, disk_gb=100))
    h.register_host(RegisterHost("cmp-b", vcpus=8, memory_mb=2048, disk_gb=50))
    return {name: str(host_aggregate_id(name)) for name in ("cmp-a", "cmp-b")}


def test_versions_and_microversion_negotiation(stack: Stack) -> None:
    r = stack.client.simulate_get("/placement")
    assert r.status_code == 200
    (v1,) = r.json["versions"]
    assert (v1["min_version"], v1["max_version"]) == ("1.0", "1.39")
    r = call(stack, "GET", "/resource_providers", version="latest")
    assert r.headers["OpenStack-API-Version"] == "placement 1.39"
    assert "openstack-api-version" in r.headers["Vary"].lower()
    assert call(stack, "GET", "/resource_providers", version=None).headers["OpenStack-API-Version"] == (
        "placement 1.0"
    )
    assert_error(
        call(stack, "GET", "/resource_providers", version="1.99"), 406, "placement.version.unsupported"
    )
    member = stack.client.simulate_get("/placement/resource_providers", headers={**stack.auth(P1), **V})
    assert_error(member, 403, "placement.undefined_code", "Policy")


def test_hosts_are_providers_with_inventories(stack: Stack, cloud: dict[str, str]) -> None:
    r = call(stack, "GET", "/resource_providers")
    assert r.status_code == 200
    providers = {p["name"]: p for p in r.json["resource_providers"]}
    a = providers["cmp-a"]
    assert a["uuid"] == cloud["cmp-a"] and a["generation"] == 0 and a["root_provider_uuid"] == a["uuid"]
    assert {link["rel"] for link in a["links"]} >= {"self", "inventories", "usages", "traits", "allocations"}

    r = call(stack, "GET", f"/resource_providers/{cloud['cmp-a']}/inventories")
    assert r.json["resource_provider_generation"] == 0
    assert r.json["inventories"]["VCPU"] == {
        "total": 4, "reserved": 0, "min_unit": 1, "max_unit": 4, "step_size": 1, "allocation_ratio": 4.0,
    }  # fmt: skip
    assert_error(call(stack, "GET", f"/resource_providers/{uuid.uuid4()}"), 404, "placement.undefined_code")


def test_generations_guard_inventory_traits_and_aggregates(stack: Stack, cloud: dict[str, str]) -> None:
    rp = f"/resource_providers/{cloud['cmp-a']}"
    inv = {"total": 4, "reserved": 2, "allocation_ratio": 2.0, "max_unit": 4}
    body = {"resource_provider_generation": 0, "inventories": {"VCPU": inv, "CUSTOM_GPU": {"total": 2}}}
    # a custom class must be created first, as in Placement; the refusal changes nothing
    refused = call(stack, "PUT", f"{rp}/inventories", json=body)
    assert_error(refused, 400, "placement.undefined_code", "Unknown resource class in inventory")
    assert call(stack, "PUT", "/resource_classes/CUSTOM_GPU").status_code == 201
    r = call(stack, "PUT", f"{rp}/inventories", json=body)
    assert r.status_code == 200, r.text
    assert r.json["resource_provider_generation"] == 1
    assert r.json["inventories"]["CUSTOM_GPU"]["max_unit"] == 2**31 - 1
    # the same write again, from a stale view: refused with Placement's stable code
    assert_error(call(stack, "PUT", f"{rp}/inventories", json=body), 409, "placement.concurrent_update")
    r = call(
        stack, "PUT", f"{rp}/inventories/CUSTOM_GPU", json={"resource_provider_generation": 1, "total": 3}
    )
    assert r.status_code == 200 and r.json == {
        "resource_provider_generation": 2, "total": 3, "reserved": 0, "min_unit": 1,
        "max_unit": 2**31 - 1, "step_size": 1, "allocation_ratio": 1.0,
    }  # fmt: skip
    bad = {"resource_provider_generation": 2, "inventories": {"VCPU": {"total": 1, "reserved": 2}}}
    assert_error(
        call(stack, "PUT", f"{rp}/inventories", json=bad), 400, "placement.undefined_code", "reserved"
    )
    bad = {"resource_provider_generation": 2, "inventories": {"GPU": {"total": 1}}}
    assert_error(call(stack, "PUT", f"{rp}/inventories", json=bad), 400, "placement.undefined_code", "GPU")

    fast = {"resource_provider_generation": 2, "traits": ["CUSTOM_FAST"]}
    refused = call(stack, "PUT", f"{rp}/traits", json=fast)
    assert_error(refused, 400, "placement.undefined_code", "No such trait(s): CUSTOM_FAST")
    assert call(stack, "PUT", "/traits/CUSTOM_FAST").status_code == 201
    r = call(stack, "PUT", f"{rp}/traits", json=fast)
    assert r.status_code == 200 and r.json == {"traits": ["CUSTOM_FAST"], "resource_provider_generation": 3}
    stale = {"resource_provider_generation": 2, "traits": []}
    assert_error(call(stack, "PUT", f"{rp}/traits", json=stale), 409, "placement.concurrent_update")
    agg = str(uuid.uuid4())
    r = call(stack, "PUT", f"{rp}/aggregates", json={"resource_provider_generation": 3, "aggregates": [agg]})
    assert r.status_code == 200 and r.json == {"aggregates": [agg], "resource_provider_generation": 4}
    r = call(stack, "PUT", f"{rp}/aggregates", version="1.1", json=[agg])  # the old body: a list
    assert r.status_code == 200 and r.json == {"aggregates": [agg]}
    assert call(stack, "GET", "/traits").json == {"traits": ["CUSTOM_FAST"]}

    # the capacity the scheduler uses changed with the inventory: (4 - 2) * 2 = 4 VCPU
    assert stack.handlers.host("cmp-a").capacity().vcpus == 4


def test_scheduler_claims_and_placement_allocations_share_one_truth(
    stack: Stack,
    cloud: dict[str, str],
) -> None:
    h = stack.handlers
    h.create_flavor(CreateFlavor("f2", "m1.two", vcpus=2, ram=1024, disk=10))
    server = h.create_server(CreateServer("vm", "proj-1", "u", "f2")).id
    h.place_instance(PlaceInstance(server, "cmp-b"))
    rp_b = f"/resource_providers/{cloud['cmp-b']}"
    r = call(stack, "GET", f"{rp_b}/usages")
    assert r.json == {
        "resource_provider_generation": 1,
        "usages": {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10},
    }
    r = call(stack, "GET", f"/allocations/{server}")
    assert r.json["allocations"] == {
        cloud["cmp-b"]: {"generation": 1, "resources": {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10}}
    }
    assert r.json["consumer_generation"] == 1  # claimed once

    # another consumer takes what is left of cmp-b's RAM through Placement...
    consumer = str(uuid.uuid4())
    body = {
        "allocations": {cloud["cmp-b"]: {"resources": {"MEMORY_MB": 1024, "VCPU": 1}}},
        "consumer_generation": None, "project_id": "p", "user_id": "u", "consumer_type": "MIGRATION",
    }  # fmt: skip
    assert call(stack, "PUT", f"/allocations/{consumer}", json=body).status_code == 204
    assert_error(
        call(stack, "PUT", f"/allocations/{consumer}", json=body), 409, "placement.concurrent_update"
    )
    r = call(stack, "GET", f"/allocations/{consumer}")
    assert r.json["consumer_generation"] == 1 and r.json["consumer_type"] == "MIGRATION"
    # ... so the scheduler's next claim there no longer fits
    other = h.create_server(CreateServer("vm2", "proj-1", "u", "f2")).id
    with pytest.raises(Exception, match="not enough memory_mb"):
        h.place_instance(PlaceInstance(other, "cmp-b"))

    # over capacity through Placement: 409; moving the consumer to cmp-a is one atomic replace
    too_much = {**body, "consumer_generation": 1}
    too_much["allocations"] = {cloud["cmp-b"]: {"resources": {"MEMORY_MB": 2048}}}
    assert_error(
        call(stack, "PUT", f"/allocations/{consumer}", json=too_much), 409, "placement.undefined_code"
    )
    move = {**body, "consumer_generation": 1, "allocations": {cloud["cmp-a"]: {"resources": {"VCPU": 3}}}}
    assert call(stack, "PUT", f"/allocations/{consumer}", json=move).status_code == 204
    r = call(stack, "GET", f"/allocations/{consumer}")
    assert set(r.json["allocations"]) == {cloud["cmp-a"]}
    assert call(stack, "GET", f"{rp_b}/usages").json["usages"]["MEMORY_MB"] == 1024
    r = call(stack, "GET", f"/resource_providers/{cloud['cmp-a']}/allocations")
    assert r.json["allocations"] == {consumer: {"resources": {"VCPU": 3}}}
    assert call(stack, "DELETE", f"/allocations/{consumer}").status_code == 204
    assert_error(call(stack, "DELETE", f"/allocations/{consumer}"), 404, "placement.undefined_code")
    assert call(stack, "GET", f"/resource_providers/{cloud['cmp-a']}/usages").json["usages"]["VCPU"] == 0


def test_allocation_candidates(stack: Stack, cloud: dict[str, str]) -> None:
    rp_a = f"/resource_providers/{cloud['cmp-a']}"
    call(stack, "PUT", "/traits/CUSTOM_SSD")
    call(stack, "PUT", f"{rp_a}/traits", json={"resource_provider_generation": 0, "traits": ["CUSTOM_SSD"]})
    q = "/allocation_candidates?resources=VCPU:2,MEMORY_MB:2048"
    r = call(stack, "GET", q)
    assert r.status_code == 200
    assert [list(a["allocations"]) for a in r.json["allocation_requests"]] == [
        [cloud["cmp-a"]],
        [cloud["cmp-b"]],
    ]
    summary = r.json["provider_summaries"][cloud["cmp-a"]]
    assert summary["resources"]["VCPU"] == {"capacity": 16, "used": 0}
    assert summary["traits"] == ["CUSTOM_SSD"]
    only_b = call(stack, "GET", q + "&required=!CUSTOM_SSD").json["allocation_requests"]
    assert [list(a["allocations"]) for a in only_b] == [[cloud["cmp-b"]]]
    only_a = call(stack, "GET", q + "&required=CUSTOM_SSD").json["allocation_requests"]
    assert [list(a["allocations"]) for a in only_a] == [[cloud["cmp-a"]]]
    r = call(stack, "GET", "/allocation_candidates?resources=MEMORY_MB:3000")  # more than cmp-b has
    assert list(r.json["provider_summaries"]) == [cloud["cmp-a"]]
    assert call(stack, "GET", q + "&limit=1").json["allocation_requests"][0]["allocations"] == {
        cloud["cmp-a"]: {"resources": {"VCPU": 2, "MEMORY_MB": 2048}}
    }
    old = call(stack, "GET", q, version="1.10").json["allocation_requests"][0]
    assert old == {
        "allocations": [
            {"resource_provider": {"uuid": cloud["cmp-a"]}, "resources": {"VCPU": 2, "MEMORY_MB": 2048}}
        ]
    }
    assert_error(call(stack, "GET", "/allocation_candidates?resources=VCPU"), 400, "placement.undefined_code")


def test_the_view_reads_the_log_in_pages(stack: Stack, cloud: dict[str, str]) -> None:
    """Every Host event is folded, however many reads it takes (here two events per read)."""
    h = stack.handlers
    placement = PlacementHandlers(h.app)
    for trait in ("CUSTOM_T0", "CUSTOM_T1", "CUSTOM_T2", "CUSTOM_LATE"):
        placement.create_trait(trait)
    for n in range(3):
        placement.set_traits(cloud["cmp-a"], None, [f"CUSTOM_T{n}"])
    view = ProviderView(h.app, stack.log, batch=2)
    hosts = {str(k): v for k, v in view.refresh().items()}
    assert set(hosts) == set(cloud.values())
    assert hosts[cloud["cmp-a"]].traits == ["CUSTOM_T2"] and hosts[cloud["cmp-a"]].generation == 3
    placement.set_traits(cloud["cmp-b"], None, ["CUSTOM_LATE"])
    assert view.get(cloud["cmp-b"]).traits == ["CUSTOM_LATE"]  # type: ignore[union-attr]


def test_post_allocations_moves_several_consumers_at_once(stack: Stack, cloud: dict[str, str]) -> None:
    """POST /allocations (1.13+): every consumer's change or none; how Nova hands an allocation from
    one consumer to another in one step."""
    a, b = cloud["cmp-a"], cloud["cmp-b"]
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    owner = {"project_id": "proj-x", "user_id": "u1"}
    both = {
        first: {"allocations": {a: {"resources": {"VCPU": 2}}}, "consumer_generation": None, **owner},
        second: {"allocations": {a: {"resources": {"VCPU": 1}}, b: {"resources": {"MEMORY_MB": 512}}},
                 "consumer_generation": None, **owner, "consumer_type": "MIGRATION"},
    }  # fmt: skip
    assert call(stack, "POST", "/allocations", json=both).status_code == 204
    assert call(stack, "GET", f"/resource_providers/{a}/usages").json["usages"]["VCPU"] == 3

    # hand first's allocation to second and drop first, in one step
    move = {
        first: {"allocations": {}, "consumer_generation": 1, **owner},
        second: {"allocations": {a: {"resources": {"VCPU": 3}}}, "consumer_generation": 1, **owner},
    }
    assert call(stack, "POST", "/allocations", json=move).status_code == 204
    assert call(stack, "GET", f"/allocations/{first}").json["allocations"] == {}
    assert call(stack, "GET", f"/allocations/{second}").json["allocations"] == {
        a: {"generation": 4, "resources": {"VCPU": 3}}
    }

    # all or none: one consumer over capacity (cmp-a has 16 VCPU), the other's change is not kept
    greedy = {
        # first has no allocations left: as in Placement it is a new consumer again (generation null)
        first: {"allocations": {b: {"resources": {"VCPU": 1}}}, "consumer_generation": None, **owner},
        second: {"allocations": {a: {"resources": {"VCPU": 99}}}, "consumer_generation": 2, **owner},
    }
    assert_error(
        call(stack, "POST", "/allocations", json=greedy),
        409,
        "placement.undefined_code",
        "Unable to allocate",
    )
    assert call(stack, "GET", f"/allocations/{first}").json["allocations"] == {}
    stale = {first: {"allocations": {}, "consumer_generation": 7, **owner}}
    assert_error(call(stack, "POST", "/allocations", json=stale), 409, "placement.concurrent_update")
    assert_error(
        call(stack, "POST", "/allocations", json={"nope": {}}), 400, "placement.undefined_code", "nope"
    )
    no_gen = {first: {"allocations": {}, **owner}}
    assert_error(
        call(stack, "POST", "/allocations", json=no_gen),
        400,
        "placement.undefined_code",
        "consumer_generation",
    )
    assert call(stack, "POST", "/allocations", version="1.12", json=move).status_code == 405


def test_usages_of_a_project(stack: Stack, cloud: dict[str, str]) -> None:
    """GET /usages?project_id= (1.9; by consumer type from 1.38): its servers' claims and its
    Placement consumers' allocations, and nobody else's."""
    h = stack.handlers
    h.create_flavor(CreateFlavor("f2", "m1.two", vcpus=2, ram=1024, disk=10))
    mine = h.create_server(CreateServer("vm", "proj-u", "alice", "f2")).id
    h.place_instance(PlaceInstance(mine, "cmp-a"))
    theirs = h.create_server(CreateServer("vm", "proj-other", "bob", "f2")).id
    h.place_instance(PlaceInstance(theirs, "cmp-a"))
    extra = {"allocations": {cloud["cmp-b"]: {"resources": {"VCPU": 1}}}, "consumer_generation": None,
             "project_id": "proj-u", "user_id": "carol", "consumer_type": "MIGRATION"}  # fmt: skip
    assert call(stack, "PUT", f"/allocations/{uuid.uuid4()}", json=extra).status_code == 204

    r = call(stack, "GET", "/usages?project_id=proj-u", version="1.9")
    assert r.status_code == 200 and r.json == {"usages": {"VCPU": 3, "MEMORY_MB": 1024, "DISK_GB": 10}}
    r = call(stack, "GET", "/usages?project_id=proj-u&user_id=alice", version="1.9")
    assert r.json == {"usages": {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10}}
    r = call(stack, "GET", "/usages?project_id=proj-u")
    assert r.json == {"usages": {
        "INSTANCE": {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10, "consumer_count": 1},
        "MIGRATION": {"VCPU": 1, "consumer_count": 1},
    }}  # fmt: skip
    assert call(stack, "GET", "/usages?project_id=nobody", version="1.9").json == {"usages": {}}
    assert_error(call(stack, "GET", "/usages", version="1.9"), 400, "placement.undefined_code", "project_id")
    assert call(stack, "GET", "/usages?project_id=proj-u", version="1.8").status_code == 404


def test_a_moving_server_holds_two_allocations(stack: Stack, cloud: dict[str, str]) -> None:
    """While a server moves, Placement shows what Nova's does: the server's allocation on the
    destination, the migration's on the source, each consumer's generation moving on."""
    h = stack.handlers
    h.create_flavor(CreateFlavor("f1", "m1.one", vcpus=1, ram=512, disk=5))
    server = h.create_server(CreateServer("vm", "proj-m", "u", "f1")).id
    h.place_instance(PlaceInstance(server, "cmp-a"))
    h.start_spawning(StartSpawning(server, "cmp-a"))
    h.finish_spawning(FinishSpawning(server, PowerState.RUNNING))
    moves = MigrationHandlers(h)
    moves.migrate(MigrateServer(server))
    moves.place(server, "cmp-b")
    migration = (h.instance(server).migration or {})["id"]

    r = call(stack, "GET", f"/allocations/{server}")
    assert set(r.json["allocations"]) == {cloud["cmp-b"]} and r.json["consumer_generation"] > 1
    r = call(stack, "GET", f"/allocations/{migration}")
    assert r.json["allocations"] == {
        cloud["cmp-a"]: {"generation": 2, "resources": {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 5}}
    }
    r = call(stack, "GET", "/usages?project_id=proj-m")
    assert r.json["usages"] == {
        "INSTANCE": {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 5, "consumer_count": 1},
        "MIGRATION": {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 5, "consumer_count": 1},
    }
    moves.left_source(server)
    moves.finished(server, PowerState.RUNNING)
    moves.confirm(ResizeDecision(server, None, admin=True))
    assert call(stack, "GET", f"/allocations/{migration}").json["allocations"] == {}


def test_custom_resource_classes_and_traits(stack: Stack, cloud: dict[str, str]) -> None:
    """/resource_classes and /traits/{name}: standard ones are known, custom ones are created and
    deleted by operators, and one in use (an inventory, a provider's trait) cannot be deleted."""
    classes = {c["name"] for c in call(stack, "GET", "/resource_classes").json["resource_classes"]}
    assert {"VCPU", "MEMORY_MB", "DISK_GB"} <= classes and "CUSTOM_FPGA" not in classes
    assert call(stack, "PUT", "/resource_classes/CUSTOM_FPGA").status_code == 201
    assert call(stack, "PUT", "/resource_classes/CUSTOM_FPGA").status_code == 204  # there already
    r = call(stack, "POST", "/resource_classes", json={"name": "CUSTOM_FPGA"}, version="1.6")
    assert_error(r, 409, "placement.undefined_code", "already exists")
    assert call(stack, "GET", "/resource_classes/CUSTOM_FPGA").json["name"] == "CUSTOM_FPGA"
    assert_error(
        call(stack, "PUT", "/resource_classes/GPU_THING"), 400, "placement.undefined_code", "CUSTOM_"
    )
    assert_error(call(stack, "DELETE", "/resource_classes/VCPU"), 400, "placement.undefined_code", "standard")
    assert_error(call(stack, "GET", "/resource_classes/CUSTOM_NONE"), 404, "placement.undefined_code")

    rp = f"/resource_providers/{cloud['cmp-a']}"
    inventories = call(stack, "GET", f"{rp}/inventories").json
    body = {
        "resource_provider_generation": inventories["resource_provider_generation"],
        "inventories": {**inventories["inventories"], "CUSTOM_FPGA": {"total": 2}},
    }
    assert call(stack, "PUT", f"{rp}/inventories", json=body).status_code == 200
    assert_error(
        call(stack, "DELETE", "/resource_classes/CUSTOM_FPGA"), 409, "placement.inventory.inuse", "in use"
    )

    assert call(stack, "PUT", "/traits/CUSTOM_RACK_7").status_code == 201
    assert call(stack, "PUT", "/traits/CUSTOM_RACK_7").status_code == 204
    assert call(stack, "GET", "/traits/CUSTOM_RACK_7").status_code == 204
    assert "CUSTOM_RACK_7" in call(stack, "GET", "/traits").json["traits"]
    assert_error(call(stack, "PUT", "/traits/rack"), 400, "placement.undefined_code", "CUSTOM_")
    generation = call(stack, "GET", f"{rp}/traits").json["resource_provider_generation"]
    put = {"resource_provider_generation": generation, "traits": ["CUSTOM_RACK_7"]}
    assert call(stack, "PUT", f"{rp}/traits", json=put).status_code == 200
    assert_error(call(stack, "DELETE", "/traits/CUSTOM_RACK_7"), 409, "placement.undefined_code", "in use")
    assert call(stack, "DELETE", f"{rp}/traits").status_code == 204
    assert call(stack, "DELETE", "/traits/CUSTOM_RACK_7").status_code == 204
    assert_error(call(stack, "GET", "/traits/CUSTOM_RACK_7"), 404, "placement.undefined_code")
    assert_error(call(stack, "DELETE", "/traits/CUSTOM_RACK_7"), 404, "placement.undefined_code")
