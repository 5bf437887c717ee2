"""The operator-facing Compute API beyond servers, against the real services: flavor extra specs
and access lists, services, availability zones and host aggregates, server groups, quotas and
limits, tenant usage, migrations and diagnostics. Admin versus member, project isolation, errors.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from commands.hosts.register import RegisterHost
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import FinishSpawning, StartSpawning
from commands.states import PowerState
from stratus.liveness import Heartbeats, bucket_for
from tests.fixtures.api import ADMIN, P1, P2, Stack, alive, assert_fault, resource


def pid(stack: Stack, name: str) -> str:
    """The id of the test project ``name``."""
    project_id = getattr(stack, "project_id", None)
    return project_id(name) if callable(project_id) else name


def at(stack: Stack, who: object, position: int) -> dict[str, str]:
    """``who``'s headers, for a request that must see the log up to ``position``."""
    headers = getattr(stack, "headers", None)
    h: dict[str, str] = dict(headers(who) if callable(headers) else who)  # type: ignore[call-overload, arg-type]
    h["X-Stratus-Min-Position"] = str(position)
    return h


def written(r: object) -> int:
    assert r.status_code in (200, 202, 204), (r.status_code, r.text)  # type: ignore[attr-defined]
    return int(r.headers["X-Stratus-Position"])  # type: ignore[attr-defined]


# -- flavors: delete, unique names, extra specs, access lists -------------------------------------
def test_flavor_names_are_unique_and_freed_by_delete(stack: Stack) -> None:
    stack.flavor(id="a", name="m1.same")
    r = stack.request(
        "POST", "/v2.1/flavors", json={"flavor": {"name": "m1.same", "ram": 1, "vcpus": 1, "disk": 0}}
    )
    assert_fault(r, 409, "conflictingRequest", "Flavor with name m1.same already exists")

    assert_fault(stack.request("DELETE", "/v2.1/flavors/a", P1), 403, "forbidden")
    r = stack.request("DELETE", "/v2.1/flavors/a")
    assert r.status_code == 202, r.text
    after = written(r)
    r = stack.get("/v2.1/flavors", after=after)
    assert [f["id"] for f in r.json["flavors"]] == []
    assert_fault(stack.request("DELETE", "/v2.1/flavors/a"), 404, "itemNotFound")
    stack.flavor(id="b", name="m1.same")  # the name is free again


def test_flavor_extra_specs(stack: Stack) -> None:
    stack.flavor(id="x")
    base = "/v2.1/flavors/x/os-extra_specs"
    r = stack.request(
        "POST", base, json={"extra_specs": {"hw:cpu_policy": "dedicated", "quota:n": 3, "b": True}}
    )
    assert resource(r) == {"extra_specs": {"hw:cpu_policy": "dedicated", "quota:n": "3", "b": "True"}}
    after = written(r)
    r = stack.get(base, P1, after=after)
    assert resource(r) == {"extra_specs": {"hw:cpu_policy": "dedicated", "quota:n": "3", "b": "True"}}
    assert stack.get(f"{base}/quota:n", P1).json == {"quota:n": "3"}

    r = stack.request("PUT", f"{base}/quota:n", json={"quota:n": "4"})
    assert resource(r) == {"quota:n": "4"}
    assert_fault(stack.request("PUT", f"{base}/quota:n", json={"other": "4"}), 400, "badRequest", "mismatch")
    assert_fault(stack.request("PUT", f"{base}/quota:n", json={"quota:n": "4", "b": "1"}), 400, "badRequest")
    assert_fault(stack.request("POST", base, P1, json={"extra_specs": {"a": "b"}}), 403, "forbidden")
    assert_fault(stack.request("POST", base, json={"extra_specs": {"bad/key": "b"}}), 400, "badRequest")

    after = written(stack.request("DELETE", f"{base}/b"))
    r = stack.get(base, after=after)
    assert resource(r) == {"extra_specs": {"hw:cpu_policy": "dedicated", "quota:n": "4"}}
    assert_fault(stack.get(f"{base}/b"), 404, "itemNotFound", "has no extra specs with key b")
    assert_fault(stack.request("DELETE", f"{base}/b"), 404, "itemNotFound")
    assert_fault(stack.get("/v2.1/flavors/nope/os-extra_specs"), 404, "itemNotFound")


def test_private_flavor_access(stack: Stack) -> None:
    stack.flavor(id="priv", name="m1.private", **{"os-flavor-access:is_public": False})
    _, after = stack.flavor(id="pub", name="m1.public")
    p1, p2 = pid(stack, "p1"), pid(stack, "p2")

    def visible(who: Any, position: int) -> list[str]:
        return [f["id"] for f in stack.get("/v2.1/flavors", who, after=position).json["flavors"]]

    assert visible(P1, after) == ["pub"]
    assert_fault(stack.get("/v2.1/flavors/priv", P1), 404, "itemNotFound")
    assert stack.get("/v2.1/flavors/priv/os-flavor-access").json == {"flavor_access": []}
    assert_fault(stack.get("/v2.1/flavors/pub/os-flavor-access"), 404, "itemNotFound", "public flavors")
    assert_fault(stack.get("/v2.1/flavors/priv/os-flavor-access", P1), 403, "forbidden")

    action = "/v2.1/flavors/priv/action"
    assert_fault(
        stack.request("POST", action, P1, json={"addTenantAccess": {"tenant": p1}}), 403, "forbidden"
    )
    r = stack.request("POST", action, json={"addTenantAccess": {"tenant": p1}})
    assert r.status_code == 200, r.text
    assert resource(r) == {"flavor_access": [{"flavor_id": "priv", "tenant_id": p1}]}
    after = written(r)
    assert visible(P1, after) == ["priv", "pub"]
    assert visible(P2, after) == ["pub"]
    assert stack.get("/v2.1/flavors/priv", P1).json["flavor"]["os-flavor-access:is_public"] is False
    assert_fault(stack.get("/v2.1/flavors/priv", P2), 404, "itemNotFound")

    r = stack.request("POST", action, json={"addTenantAccess": {"tenant": p1}})
    assert_fault(r, 409, "conflictingRequest", "already exists")
    r = stack.request("POST", "/v2.1/flavors/pub/action", json={"addTenantAccess": {"tenant": p1}})
    assert_fault(r, 409, "conflictingRequest", "public flavor")
    assert_fault(
        stack.request("POST", action, json={"removeTenantAccess": {"tenant": p2}}), 404, "itemNotFound"
    )
    assert_fault(stack.request("POST", action, json={"grantAll": {}}), 400, "badRequest")
    unknown = {"addTenantAccess": {"tenant": "0" * 32}}
    assert_fault(stack.request("POST", action, json=unknown), 400, "badRequest", "not a valid project")

    after = written(stack.request("POST", action, json={"removeTenantAccess": {"tenant": p1}}))
    assert visible(P1, after) == ["pub"]


# -- services --------------------------------------------------------------------------------------
def test_compute_services(stack: Stack) -> None:
    stack.handlers.register_host(RegisterHost("cmp-a", vcpus=4, memory_mb=8192, disk_gb=50))
    after = stack.handlers.register_host(RegisterHost("cmp-b", vcpus=4, memory_mb=8192, disk_gb=50)).position
    alive(stack, "cmp-a", "cmp-b")
    r = stack.get("/v2.1/os-services", after=after)
    services = r.json["services"]
    assert [(s["binary"], s["host"], s["zone"], s["status"], s["state"]) for s in services] == [
        ("nova-compute", "cmp-a", "nova", "enabled", "up"),
        ("nova-compute", "cmp-b", "nova", "enabled", "up"),
    ]
    assert services[0]["disabled_reason"] is None and "forced_down" not in services[0]  # from 2.11
    v211 = {**stack.auth(ADMIN), "OpenStack-API-Version": "compute 2.11"}
    assert stack.get("/v2.1/os-services", v211).json["services"][0]["forced_down"] is False
    assert all(type(s["id"]) is int for s in services)  # Nova's integers before 2.53
    assert_fault(stack.get("/v2.1/os-services", P1), 403, "forbidden")
    assert stack.get("/v2.1/os-services?binary=nova-scheduler").json == {"services": []}
    recorder = stack.handlers.app.recorder
    Heartbeats(recorder.bridge, bucket=bucket_for(recorder.stream)).beat_service("nova-scheduler", "ctl-1")  # type: ignore[attr-defined]
    (scheduler,) = stack.get("/v2.1/os-services?binary=nova-scheduler").json["services"]
    assert (scheduler["host"], scheduler["state"], scheduler["zone"]) == ("ctl-1", "up", "internal")
    assert [s["binary"] for s in stack.get("/v2.1/os-services").json["services"]].count("nova-scheduler") == 1
    assert stack.get("/v2.1/os-services?binary=nova-compute&host=ctl-1").json == {"services": []}
    assert len(stack.get("/v2.1/os-services?host=cmp-b").json["services"]) == 1

    body = {"host": "cmp-a", "binary": "nova-compute", "disabled_reason": "maintenance"}
    assert_fault(
        stack.request("PUT", "/v2.1/os-services/disable-log-reason", P1, json=body), 403, "forbidden"
    )
    r = stack.request("PUT", "/v2.1/os-services/disable-log-reason", json=body)
    assert resource(r) == {"service": {**body, "status": "disabled"}}
    down = {"host": "cmp-b", "binary": "nova-compute", "forced_down": True}
    assert stack.request("PUT", "/v2.1/os-services/force-down", json=down).status_code == 400  # at 2.1
    r = stack.request("PUT", "/v2.1/os-services/force-down", v211, json=down)
    assert r.json["service"]["forced_down"] is True
    after = written(r)
    services = {s["host"]: s for s in stack.get("/v2.1/os-services", v211, after=after).json["services"]}
    assert (services["cmp-a"]["status"], services["cmp-a"]["disabled_reason"]) == ("disabled", "maintenance")
    assert (services["cmp-b"]["state"], services["cmp-b"]["forced_down"]) == ("down", True)
    hypervisors = {
        h["hypervisor_hostname"]: h for h in stack.get("/v2.1/os-hypervisors/detail").json["hypervisors"]
    }
    assert (hypervisors["cmp-a"]["status"], hypervisors["cmp-a"]["service"]["disabled_reason"]) == (
        "disabled",
        "maintenance",
    )
    assert (hypervisors["cmp-b"]["status"], hypervisors["cmp-b"]["state"]) == ("enabled", "down")
    # a host that is down has no uptime to tell (Nova: its compute service is unavailable)
    down = stack.get(f"/v2.1/os-hypervisors/{hypervisors['cmp-b']['id']}/uptime")
    assert_fault(down, 400, "badRequest", "Compute service of cmp-b is unavailable")
    assert_fault(stack.get(f"/v2.1/os-hypervisors/{hypervisors['cmp-a']['id']}/uptime", P1), 403, "forbidden")

    after = written(
        stack.request("PUT", "/v2.1/os-services/enable", json={"host": "cmp-a", "binary": "nova-compute"})
    )
    services = {s["host"]: s for s in stack.get("/v2.1/os-services", after=after).json["services"]}
    assert (services["cmp-a"]["status"], services["cmp-a"]["disabled_reason"]) == ("enabled", None)

    r = stack.request("PUT", "/v2.1/os-services/disable", json={"host": "nope", "binary": "nova-compute"})
    assert_fault(r, 404, "itemNotFound", "Service nova-compute on host nope could not be found")
    r = stack.request(
        "PUT", "/v2.1/os-services/disable", json={"host": "cmp-a", "binary": "nova-compute", "x": 1}
    )
    assert_fault(r, 400, "badRequest", "x")
    assert_fault(stack.request("PUT", "/v2.1/os-services/reboot", json={}), 400, "badRequest")


# -- availability zones and host aggregates --------------------------------------------------------
def test_aggregates_define_availability_zones(stack: Stack) -> None:
    for name in ("cmp-1", "cmp-2", "cmp-3"):
        stack.handlers.register_host(RegisterHost(name, vcpus=4, memory_mb=8192, disk_gb=50))
    alive(stack, "cmp-1", "cmp-2", "cmp-3")
    assert_fault(
        stack.request("POST", "/v2.1/os-aggregates", P1, json={"aggregate": {"name": "a"}}), 403, "forbidden"
    )
    r = stack.request(
        "POST", "/v2.1/os-aggregates", json={"aggregate": {"name": "rack1", "availability_zone": "az1"}}
    )
    assert r.status_code == 200, r.text
    agg = r.json["aggregate"]
    assert (agg["id"], agg["name"], agg["availability_zone"]) == (1, "rack1", "az1")
    r = stack.request("POST", "/v2.1/os-aggregates", json={"aggregate": {"name": "rack1"}})
    assert_fault(r, 409, "conflictingRequest", "already exists")
    r = stack.request(
        "POST", "/v2.1/os-aggregates", json={"aggregate": {"name": "rack2", "availability_zone": "az2"}}
    )
    assert r.json["aggregate"]["id"] == 2
    after = written(r)

    assert_fault(
        stack.request("POST", "/v2.1/os-aggregates/1/action", json={"add_host": {"host": "nope"}}),
        404,
        "itemNotFound",
    )
    r = stack.request(
        "POST",
        "/v2.1/os-aggregates/1/action",
        json={"add_host": {"host": "cmp-1"}},
        headers=at(stack, ADMIN, after),
    )
    assert r.status_code == 200, r.text
    assert r.json["aggregate"]["hosts"] == ["cmp-1"]
    r = stack.request("POST", "/v2.1/os-aggregates/1/action", json={"add_host": {"host": "cmp-1"}})
    assert_fault(r, 409, "conflictingRequest")
    # a host is in one zone at most
    r = stack.request("POST", "/v2.1/os-aggregates/2/action", json={"add_host": {"host": "cmp-1"}})
    assert_fault(r, 409, "conflictingRequest", "already in availability zone")
    after = written(
        stack.request("POST", "/v2.1/os-aggregates/2/action", json={"add_host": {"host": "cmp-2"}})
    )

    zones = stack.get("/v2.1/os-availability-zone", P1, after=after).json["availabilityZoneInfo"]
    assert [(z["zoneName"], z["zoneState"]["available"], z["hosts"]) for z in zones] == [
        ("az1", True, None), ("az2", True, None), ("nova", True, None),
    ]  # fmt: skip
    assert_fault(stack.get("/v2.1/os-availability-zone/detail", P1), 403, "forbidden")
    detail = {
        z["zoneName"]: z for z in stack.get("/v2.1/os-availability-zone/detail").json["availabilityZoneInfo"]
    }
    assert list(detail["az1"]["hosts"]) == ["cmp-1"]
    assert detail["az1"]["hosts"]["cmp-1"]["nova-compute"]["active"] is True
    assert list(detail["nova"]["hosts"]) == ["cmp-3"]
    services = {s["host"]: s["zone"] for s in stack.get("/v2.1/os-services").json["services"]}
    assert services == {"cmp-1": "az1", "cmp-2": "az2", "cmp-3": "nova"}

    # the zone follows the aggregate's metadata; renaming keeps names unique
    r = stack.request(
        "POST",
        "/v2.1/os-aggregates/1/action",
        json={"set_metadata": {"metadata": {"availability_zone": "az9", "ssd": "yes"}}},
    )
    assert r.json["aggregate"]["metadata"] == {"availability_zone": "az9", "ssd": "yes"}
    assert_fault(
        stack.request("PUT", "/v2.1/os-aggregates/1", json={"aggregate": {"name": "rack2"}}),
        409,
        "conflictingRequest",
    )
    after = written(stack.request("PUT", "/v2.1/os-aggregates/1", json={"aggregate": {"name": "rack-one"}}))
    shown = stack.get("/v2.1/os-aggregates/1", after=after).json["aggregate"]
    assert (shown["name"], shown["availability_zone"], shown["hosts"]) == ("rack-one", "az9", ["cmp-1"])
    services = {s["host"]: s["zone"] for s in stack.get("/v2.1/os-services").json["services"]}
    assert services["cmp-1"] == "az9"
    assert [a["name"] for a in stack.get("/v2.1/os-aggregates").json["aggregates"]] == ["rack-one", "rack2"]

    assert_fault(stack.request("DELETE", "/v2.1/os-aggregates/2"), 409, "conflictingRequest", "not empty")
    stack.request("POST", "/v2.1/os-aggregates/2/action", json={"remove_host": {"host": "cmp-2"}})
    assert_fault(
        stack.request("POST", "/v2.1/os-aggregates/2/action", json={"remove_host": {"host": "cmp-2"}}),
        404,
        "itemNotFound",
    )
    after = written(stack.request("DELETE", "/v2.1/os-aggregates/2"))
    assert_fault(stack.get("/v2.1/os-aggregates/2", after=after), 404, "itemNotFound")
    services = {s["host"]: s["zone"] for s in stack.get("/v2.1/os-services").json["services"]}
    assert services["cmp-2"] == "nova"


# -- server groups ---------------------------------------------------------------------------------
def test_server_groups(stack: Stack) -> None:
    r = stack.request(
        "POST",
        "/v2.1/os-server-groups",
        {**stack.headers(P1), "OpenStack-API-Version": "compute 2.13"},  # project_id/user_id from 2.13
        json={"server_group": {"name": "web", "policies": ["anti-affinity"]}},
    )
    assert r.status_code == 200, r.text
    group = r.json["server_group"]
    assert (group["name"], group["policies"], group["members"]) == ("web", ["anti-affinity"], [])
    assert group["project_id"] == pid(stack, "p1")
    after = written(r)
    r = stack.request(
        "POST",
        "/v2.1/os-server-groups",
        {**stack.headers(P2), "OpenStack-API-Version": "compute 2.15"},  # the soft policies from 2.15
        json={"server_group": {"name": "db", "policies": ["soft-affinity"]}},
    )
    other = r.json["server_group"]["id"]
    after = max(after, written(r))

    assert [
        g["name"] for g in stack.get("/v2.1/os-server-groups", P1, after=after).json["server_groups"]
    ] == ["web"]
    assert sorted(
        g["name"] for g in stack.get("/v2.1/os-server-groups?all_projects=1").json["server_groups"]
    ) == ["db", "web"]
    listed = [g["name"] for g in stack.get("/v2.1/os-server-groups?all_projects=1").json["server_groups"]]
    for query, names in [("limit=1", listed[:1]), ("limit=1&offset=1", listed[1:2]), ("offset=2", []),
                         ("limit=0", listed), ("offset=0&limit=5", listed)]:  # fmt: skip
        page = stack.get(f"/v2.1/os-server-groups?all_projects=1&{query}").json["server_groups"]
        assert [g["name"] for g in page] == names, query
    for query in ("limit=-1", "offset=x", "offset=-2"):
        field = query.split("=")[0]
        assert_fault(stack.get(f"/v2.1/os-server-groups?{query}"), 400, "badRequest", field)
    at_213 = {**stack.headers(P1), "OpenStack-API-Version": "compute 2.13"}
    assert stack.get(f"/v2.1/os-server-groups/{group['id']}", at_213).json["server_group"] == group
    assert_fault(stack.get(f"/v2.1/os-server-groups/{other}", P1), 404, "itemNotFound")
    assert_fault(stack.request("DELETE", f"/v2.1/os-server-groups/{other}", P1), 404, "itemNotFound")
    bad = {"server_group": {"name": "x", "policies": ["spread"]}}
    assert_fault(stack.request("POST", "/v2.1/os-server-groups", P1, json=bad), 400, "badRequest", "policies")

    r = stack.request("DELETE", f"/v2.1/os-server-groups/{group['id']}", P1)
    assert r.status_code == 204
    assert_fault(
        stack.get(f"/v2.1/os-server-groups/{group['id']}", P1, after=written(r)), 404, "itemNotFound"
    )


# -- quotas and limits -----------------------------------------------------------------------------
def test_quota_sets_and_limits(stack: Stack) -> None:
    p1, p2 = pid(stack, "p1"), pid(stack, "p2")
    r = stack.get(f"/v2.1/os-quota-sets/{p1}", P1)
    assert r.json["quota_set"]["id"] == p1
    assert (r.json["quota_set"]["instances"], r.json["quota_set"]["cores"], r.json["quota_set"]["ram"]) == (
        10,
        20,
        51200,
    )
    assert_fault(stack.get(f"/v2.1/os-quota-sets/{p2}", P1), 403, "forbidden")
    assert stack.get(f"/v2.1/os-quota-sets/{p2}/defaults", P1).json["quota_set"]["key_pairs"] == 100

    assert_fault(
        stack.request("PUT", f"/v2.1/os-quota-sets/{p1}", P1, json={"quota_set": {"instances": 50}}),
        403,
        "forbidden",
    )
    assert_fault(
        stack.request("PUT", f"/v2.1/os-quota-sets/{p1}", json={"quota_set": {"bogus": 1}}), 400, "badRequest"
    )
    assert_fault(
        stack.request("PUT", f"/v2.1/os-quota-sets/{p1}", json={"quota_set": {"cores": -2}}),
        400,
        "badRequest",
    )
    r = stack.request("PUT", f"/v2.1/os-quota-sets/{'f' * 32}", json={"quota_set": {"instances": 3}})
    assert_fault(r, 400, "badRequest", "is not a valid project")
    r = stack.request("PUT", f"/v2.1/os-quota-sets/{p1}", json={"quota_set": {"instances": 3, "cores": -1}})
    assert r.status_code == 200, r.text
    assert (r.json["quota_set"]["instances"], r.json["quota_set"]["cores"]) == (3, -1)
    after = written(r)

    stack.flavor(id="small", vcpus=2, ram=256)
    _, after2 = stack.server("small", P1)
    detail = stack.get(f"/v2.1/os-quota-sets/{p1}/detail", P1, after=max(after, after2)).json["quota_set"]
    assert detail["instances"] == {"limit": 3, "in_use": 1, "reserved": 0}
    assert detail["cores"] == {"limit": -1, "in_use": 2, "reserved": 0}
    absolute = stack.get("/v2.1/limits", P1).json["limits"]["absolute"]
    assert (absolute["maxTotalInstances"], absolute["totalInstancesUsed"]) == (3, 1)
    assert (absolute["totalCoresUsed"], absolute["totalRAMUsed"], absolute["maxTotalCores"]) == (2, 256, -1)
    assert stack.get("/v2.1/limits", P2).json["limits"]["absolute"]["totalInstancesUsed"] == 0
    assert_fault(stack.get(f"/v2.1/limits?tenant_id={p1}", P2), 403, "forbidden")

    r = stack.request("PUT", f"/v2.1/os-quota-sets/{p1}", json={"quota_set": {"instances": 0}})
    assert_fault(r, 400, "badRequest", "must be greater than or equal to already used and reserved 1")
    r = stack.request("PUT", f"/v2.1/os-quota-sets/{p1}", json={"quota_set": {"instances": 0, "force": True}})
    assert r.json["quota_set"]["instances"] == 0

    after = written(stack.request("DELETE", f"/v2.1/os-quota-sets/{p1}"))
    assert stack.get(f"/v2.1/os-quota-sets/{p1}", after=after).json["quota_set"]["instances"] == 10


def test_server_group_quota(stack: Stack) -> None:
    p1 = pid(stack, "p1")
    after = written(
        stack.request("PUT", f"/v2.1/os-quota-sets/{p1}", json={"quota_set": {"server_groups": 1}})
    )
    body = {"server_group": {"name": "g", "policies": ["affinity"]}}
    r = stack.request(
        "POST",
        "/v2.1/os-server-groups",
        at(stack, P1, after),
        json=body,
    )
    after = written(r)
    r = stack.request(
        "POST",
        "/v2.1/os-server-groups",
        at(stack, P1, after),
        json=body,
    )
    assert_fault(r, 403, "forbidden", "Quota exceeded for server_groups")


# -- usage, migrations, diagnostics ----------------------------------------------------------------
def test_tenant_usage_migrations_and_diagnostics(stack: Stack) -> None:
    start = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")
    stack.flavor(id="u", vcpus=2, ram=1024, disk=10)
    sid, after = stack.server("u", P1)
    p1 = pid(stack, "p1")

    r = stack.get(f"/v2.1/os-simple-tenant-usage/{p1}?start={start}", P1, after=after)
    usage = r.json["tenant_usage"]
    assert usage["tenant_id"] == p1
    (server,) = usage["server_usages"]
    assert (server["instance_id"], server["vcpus"], server["memory_mb"], server["local_gb"]) == (
        sid,
        2,
        1024,
        10,
    )
    assert server["state"] == "building" and server["ended_at"] is None
    assert usage["total_vcpus_usage"] == server["hours"] * 2
    assert_fault(stack.get(f"/v2.1/os-simple-tenant-usage/{p1}", P2), 403, "forbidden")
    assert_fault(stack.get("/v2.1/os-simple-tenant-usage", P1), 403, "forbidden")
    listed = stack.get(f"/v2.1/os-simple-tenant-usage?start={start}").json["tenant_usages"]
    assert [u["tenant_id"] for u in listed] == [p1] and "server_usages" not in listed[0]
    r = stack.get("/v2.1/os-simple-tenant-usage?start=2026-02-01T00:00:00&end=2026-01-01T00:00:00")
    assert_fault(r, 400, "badRequest", "start time cannot occur after the end time")
    # a period before the server existed holds nothing
    assert stack.get(
        "/v2.1/os-simple-tenant-usage?start=2000-01-01T00:00:00&end=2000-02-01T00:00:00"
    ).json == {"tenant_usages": []}

    assert stack.get("/v2.1/os-migrations").json == {"migrations": []}
    assert_fault(stack.get("/v2.1/os-migrations", P1), 403, "forbidden")

    assert_fault(
        stack.get(f"/v2.1/servers/{sid}/diagnostics"), 409, "conflictingRequest", "vm_state building"
    )
    assert_fault(stack.get(f"/v2.1/servers/{sid}/diagnostics", P1), 403, "forbidden")
    stack.handlers.register_host(RegisterHost("cmp-d", vcpus=4, memory_mb=8192, disk_gb=50))
    stack.handlers.place_instance(PlaceInstance(sid, "cmp-d"))
    stack.handlers.start_spawning(StartSpawning(sid, "cmp-d"))
    after = stack.handlers.finish_spawning(FinishSpawning(sid, PowerState.RUNNING)).position
    diag = stack.get(f"/v2.1/servers/{sid}/diagnostics", after=after).json
    assert (diag["state"], diag["driver"], diag["hypervisor"], diag["num_cpus"]) == (
        "running",
        "libvirt",
        "qemu",
        2,
    )
    assert diag["memory_details"] == {"maximum": 1024} and diag["uptime"] >= 0
    v248 = {**stack.auth(ADMIN), "OpenStack-API-Version": "compute 2.48"}
    diag = stack.get(f"/v2.1/servers/{sid}/diagnostics", v248).json
    assert (diag["num_disks"], diag["memory_details"]) == (1, {"maximum": 1024, "used": None})
    assert diag["cpu_details"] == [{"id": i, "time": None, "utilisation": None} for i in range(2)]
    assert len(diag["nic_details"]) == diag["num_nics"] and len(diag["disk_details"]) == 1
    assert_fault(
        stack.get("/v2.1/servers/6f1c7bfa-0000-4000-8000-000000000000/diagnostics"), 404, "itemNotFound"
    )


# -- what server create checks ---------------------------------------------------------------------
def test_server_create_checks_flavor_access_zone_and_group(stack: Stack) -> None:
    stack.flavor(id="priv", name="m1.private", **{"os-flavor-access:is_public": False})
    body = {"server": {"name": "vm", "flavorRef": "priv"}}
    r = stack.request("POST", "/v2.1/servers", P2, json=body)
    assert_fault(r, 400, "badRequest", "Flavor priv could not be found")
    stack.server("priv")  # an admin may boot it

    stack.handlers.register_host(RegisterHost("cmp-z", vcpus=4, memory_mb=8192, disk_gb=50))
    stack.flavor(id="pub", name="m1.public")
    r = stack.request(
        "POST",
        "/v2.1/servers",
        P1,
        json={"server": {**body["server"], "flavorRef": "pub", "availability_zone": "az-x"}},
    )
    assert_fault(r, 400, "badRequest", "availability zone is not available")

    r = stack.request(
        "POST", "/v2.1/os-server-groups", P1, json={"server_group": {"name": "g", "policies": ["affinity"]}}
    )
    group = r.json["server_group"]["id"]
    hints = {"os:scheduler_hints": {"group": group}}
    r = stack.request(
        "POST", "/v2.1/servers", P1, json={"server": {"name": "vm", "flavorRef": "pub"}, **hints}
    )
    assert r.status_code == 202, r.text
    sid, after = r.json["server"]["id"], written(r)
    assert stack.get(f"/v2.1/os-server-groups/{group}", P1, after=after).json["server_group"]["members"] == [
        sid
    ]
    # the key openstacksdk and the CLI send (`openstack server create --hint group=...`)
    r = stack.request(
        "POST",
        "/v2.1/servers",
        P1,
        json={"server": {"name": "vm2", "flavorRef": "pub"}, "OS-SCH-HNT:scheduler_hints": {"group": group}},
    )
    assert r.status_code == 202, r.text
    sid2, after = r.json["server"]["id"], written(r)
    members = stack.get(f"/v2.1/os-server-groups/{group}", P1, after=after).json["server_group"]["members"]
    assert sorted(members) == sorted([sid, sid2])
    r = stack.request(
        "POST", "/v2.1/servers", P2, json={"server": {"name": "vm", "flavorRef": "pub"}, **hints}
    )
    assert_fault(r, 400, "badRequest", "could not be found")
    for key in ("os:scheduler_hints", "OS-SCH-HNT:scheduler_hints"):
        server = {"name": "vm", "flavorRef": "pub"}
        r = stack.request("POST", "/v2.1/servers", P1, json={"server": server, key: {"same_host": sid}})
        assert_fault(r, 400, "badRequest", "same_host")


def test_a_server_shows_the_zone_of_the_host_it_landed_on(stack: Stack) -> None:
    flavor_id, _ = stack.flavor(id="az")
    stack.handlers.register_host(RegisterHost("cmp-az", vcpus=4, memory_mb=8192, disk_gb=50))
    r = stack.request(
        "POST", "/v2.1/os-aggregates", json={"aggregate": {"name": "r9", "availability_zone": "az9"}}
    )
    agg = r.json["aggregate"]["id"]
    after = written(r)
    r = stack.request(
        "POST",
        f"/v2.1/os-aggregates/{agg}/action",
        at(stack, ADMIN, after),
        json={"add_host": {"host": "cmp-az"}},
    )
    assert r.status_code == 200, r.text
    sid, created = stack.server(flavor_id, P1)
    assert (
        stack.get(f"/v2.1/servers/{sid}", P1, after=created).json["server"]["OS-EXT-AZ:availability_zone"]
        == ""
    )
    placed = stack.handlers.place_instance(PlaceInstance(sid, "cmp-az")).position
    shown = stack.get(f"/v2.1/servers/{sid}", P1, after=placed).json["server"]
    assert shown["OS-EXT-AZ:availability_zone"] == "az9"  # asked for none: the host's zone
    (listed,) = stack.get("/v2.1/servers/detail", P1).json["servers"]
    assert listed["OS-EXT-AZ:availability_zone"] == "az9"
