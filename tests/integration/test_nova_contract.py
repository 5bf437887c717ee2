"""Requests as lenient as Nova's, and answers shaped per microversion, where tempest found them not.

Nova's request schemas take a flavor's sizes and quota limits as integers or strings of digits, and
booleans as Nova's boolean strings ("True", "on", "0"...); key pairs have a type, answer 201 and
delete with 204 from microversion 2.2, and take a user_id from 2.10.
"""

from __future__ import annotations

import datetime

import pytest

from tests.fixtures.api import ADMIN, P1, P2, Stack

V = "OpenStack-API-Version"


@pytest.mark.parametrize(
    ("fields", "public"),
    [
        ({"ram": "1024", "vcpus": "2", "disk": "10", "os-flavor-access:is_public": "False"}, False),
        ({"ram": 1024, "vcpus": 2, "disk": 0, "swap": "0", "os-flavor-access:is_public": "True"}, True),
        ({"ram": 512, "vcpus": 1, "disk": 1, "rxtx_factor": "1.5", "os-flavor-access:is_public": "on"}, True),
    ],
)
def test_flavor_sizes_and_is_public_as_nova_takes_them(
    stack: Stack, fields: dict[str, object], public: bool
) -> None:
    r = stack.request("POST", "/v2.1/flavors", ADMIN, json={"flavor": {"name": "f", **fields}})
    assert r.status_code == 200, r.text
    flavor = r.json["flavor"]
    assert flavor["os-flavor-access:is_public"] is public
    assert flavor["ram"] == int(fields["ram"]) and flavor["vcpus"] == int(fields["vcpus"])  # type: ignore[call-overload]


@pytest.mark.parametrize(
    "fields",
    [
        {"ram": "0", "vcpus": 1, "disk": 1},
        {"ram": "-5", "vcpus": 1, "disk": 1},
        {"ram": "9999999999", "vcpus": 1, "disk": 1},
        {"ram": "1e3", "vcpus": 1, "disk": 1},
        {"ram": 1, "vcpus": 1, "disk": 1, "os-flavor-access:is_public": "maybe"},
        {"ram": 1, "vcpus": 1, "disk": 1, "rxtx_factor": "0"},
    ],
)
def test_and_as_strict(stack: Stack, fields: dict[str, object]) -> None:
    r = stack.request("POST", "/v2.1/flavors", ADMIN, json={"flavor": {"name": "f", **fields}})
    assert r.status_code == 400, r.text
    assert "flavor." in r.json["badRequest"]["message"]


def test_quota_limits_as_strings(stack: Stack) -> None:
    p1 = stack.project_id("p1")
    body = {"quota_set": {"ram": "5120", "instances": "-1", "force": "True"}}
    r = stack.request("PUT", f"/v2.1/os-quota-sets/{p1}", ADMIN, json=body)
    assert r.status_code == 200, r.text
    assert r.json["quota_set"]["ram"] == 5120 and r.json["quota_set"]["instances"] == -1
    bad = stack.request("PUT", f"/v2.1/os-quota-sets/{p1}", ADMIN, json={"quota_set": {"ram": "-2"}})
    assert bad.status_code == 400 and "quota_set.ram" in bad.text


def test_key_pairs_per_microversion(stack: Stack) -> None:
    at_21 = {**stack.headers(P1), V: "compute 2.1"}
    at_22 = {**stack.headers(P1), V: "compute 2.2"}
    r = stack.request("POST", "/v2.1/os-keypairs", at_21, json={"keypair": {"name": "a", "type": "ssh"}})
    assert r.status_code == 400 and "'type' was unexpected" in r.text
    r = stack.request("POST", "/v2.1/os-keypairs", at_22, json={"keypair": {"name": "a", "type": "ssh"}})
    assert r.status_code == 201, r.text
    assert r.json["keypair"]["type"] == "ssh" and "private_key" in r.json["keypair"]
    assert stack.request("GET", "/v2.1/os-keypairs/a", at_22).json["keypair"]["type"] == "ssh"
    assert "type" not in stack.request("GET", "/v2.1/os-keypairs/a", at_21).json["keypair"]
    position = int(r.headers["X-Stratus-Position"])
    listed = stack.get("/v2.1/os-keypairs", at_22, after=position).json["keypairs"]
    assert [k["keypair"]["type"] for k in listed] == ["ssh"]
    x509 = {"keypair": {"name": "b", "type": "x509"}}  # a certificate, as Nova generates for WinRM
    r = stack.request("POST", "/v2.1/os-keypairs", at_22, json=x509)
    assert r.status_code == 201 and r.json["keypair"]["public_key"].startswith("-----BEGIN CERTIFICATE-----")
    assert stack.request("DELETE", "/v2.1/os-keypairs/a", at_22).status_code == 204
    # 2.10: an admin makes a key pair for another user; a member may not
    stack.auth(P2)
    carol = stack.user_id("carol")
    for_carol = {"keypair": {"name": "c", "user_id": carol}}
    member = {**stack.headers(P1), V: "compute 2.10"}
    assert stack.request("POST", "/v2.1/os-keypairs", member, json=for_carol).status_code == 403
    admin = {**stack.headers(ADMIN), V: "compute 2.10"}
    r = stack.request("POST", "/v2.1/os-keypairs", admin, json=for_carol)
    assert r.status_code == 201 and r.json["keypair"]["user_id"] == carol
    carols = {**stack.headers(P2), V: "compute 2.2"}
    assert stack.request("GET", "/v2.1/os-keypairs/c", carols).status_code == 200


def test_no_floating_ip_pools_as_nova_without_neutron_answers(stack: Stack) -> None:
    for who in (P1, ADMIN):
        r = stack.request("GET", "/v2.1/os-floating-ip-pools", who)
        assert r.status_code == 200 and r.json == {"floating_ip_pools": []}


def test_os_hosts_until_its_removal_at_2_43(stack: Stack) -> None:
    from commands.hosts.register import RegisterHost
    from commands.servers.scheduling import PlaceInstance

    stack.flavor(id="tiny", ram=512, vcpus=1, disk=1)
    stack.handlers.register_host(RegisterHost("cmp-h", vcpus=8, memory_mb=4096, disk_gb=40))
    server, _ = stack.server("tiny", P1)
    placed = stack.handlers.place_instance(PlaceInstance(server, "cmp-h")).position
    admin = stack.headers(ADMIN)
    listed = stack.get("/v2.1/os-hosts", admin, after=placed)
    assert listed.status_code == 200
    assert {"host_name": "cmp-h", "service": "compute", "zone": "nova"} in listed.json["hosts"]
    assert stack.get("/v2.1/os-hosts?zone=elsewhere", admin).json == {"hosts": []}
    detail = [r["resource"] for r in stack.get("/v2.1/os-hosts/cmp-h", admin).json["host"]]
    assert [r["project"] for r in detail] == ["(total)", "(used_now)", "(used_max)", stack.project_id("p1")]
    assert (detail[0]["cpu"], detail[0]["memory_mb"], detail[0]["disk_gb"]) == (8, 4096, 40)
    assert (detail[1]["cpu"], detail[1]["memory_mb"], detail[1]["disk_gb"]) == (1, 512, 1)
    assert stack.get("/v2.1/os-hosts/nowhere", admin).status_code == 404
    assert stack.get("/v2.1/os-hosts", P1).status_code == 403
    assert stack.get("/v2.1/os-hosts", {**admin, V: "compute 2.43"}).status_code == 404
    r = stack.request("PUT", "/v2.1/os-hosts/cmp-h", ADMIN, json={"status": "disable"})
    assert r.status_code == 200 and r.json == {"host": "cmp-h", "status": "disabled"}
    services = stack.get("/v2.1/os-services?host=cmp-h", admin, after=int(r.headers["X-Stratus-Position"]))
    assert services.json["services"][0]["status"] == "disabled"
    maintenance = {"maintenance_mode": "enable"}
    assert stack.request("PUT", "/v2.1/os-hosts/cmp-h", ADMIN, json=maintenance).status_code == 501
    assert stack.request("PUT", "/v2.1/os-hosts/cmp-h", ADMIN, json={"status": "sideways"}).status_code == 400
    assert stack.get("/v2.1/os-hosts/cmp-h/reboot", admin).status_code == 501


def test_instance_usage_audit_log_from_the_log(stack: Stack) -> None:
    """Nova's audit of the last completed month, per host: every host done (the log is complete),
    the instances each held during the period."""
    from api.audit_log import last_completed_period
    from commands.hosts.register import RegisterHost

    stack.handlers.register_host(RegisterHost("cmp-a", vcpus=8, memory_mb=4096, disk_gb=40))
    admin = stack.headers(ADMIN)
    r = stack.get("/v2.1/os-instance_usage_audit_log", admin)
    assert r.status_code == 200, r.text
    report = r.json["instance_usage_audit_logs"]
    assert report["hosts_not_run"] == [] and report["num_hosts"] == report["num_hosts_done"] >= 1
    assert report["log"]["cmp-a"] == {
        "state": "DONE", "instances": 0, "errors": 0,
        "message": "Instance usage audit ran for host cmp-a, 0 instances.",
    }  # fmt: skip
    r = stack.get("/v2.1/os-instance_usage_audit_log/2026-03-15%2010:00:00", admin)
    assert r.status_code == 200, r.text
    one = r.json["instance_usage_audit_log"]
    begin, end = last_completed_period(datetime.datetime(2026, 3, 15, 10))
    assert (one["period_beginning"], one["period_ending"]) == ("2026-02-01 00:00:00", "2026-03-01 00:00:00")
    assert (begin.month, end.month) == (2, 3)
    # a server launched now counts in the audit of this month (asked for from next month)
    from commands.servers.scheduling import PlaceInstance
    from commands.servers.spawn import FinishSpawning, StartSpawning
    from commands.states import PowerState

    stack.flavor(id="tiny")
    server, _ = stack.server("tiny", P1)
    stack.handlers.place_instance(PlaceInstance(server, "cmp-a"))
    stack.handlers.start_spawning(StartSpawning(server, "cmp-a"))
    spawned = stack.handlers.finish_spawning(FinishSpawning(server, PowerState.RUNNING)).position
    later = (datetime.datetime.now() + datetime.timedelta(days=32)).strftime("%Y-%m-%d")
    r = stack.get(f"/v2.1/os-instance_usage_audit_log/{later}%2000:00:00", admin, after=spawned)
    assert r.json["instance_usage_audit_log"]["log"]["cmp-a"]["instances"] == 1
    assert r.json["instance_usage_audit_log"]["total_instances"] == 1
    assert stack.get("/v2.1/os-instance_usage_audit_log/not-a-time", admin).status_code == 400
    assert stack.get("/v2.1/os-instance_usage_audit_log", P1).status_code == 403
