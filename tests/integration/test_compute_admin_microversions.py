"""The admin side of the Compute API per microversion, held to tempest's own response schemas
(tempest 47.0.0's ``tempest/lib/api_schema/response/compute``, which checks Nova's bodies with
``additionalProperties: false``): hypervisors, services, aggregates, extensions, os-hosts and
tenant usage, against the real services.

The schemas are tempest's modules, loaded by ``tests.nova_schemas`` (which installs tempest into
the conformance runner's virtualenv when it is not there yet).
"""

from __future__ import annotations

from typing import Any

import pytest

from commands.handlers import RegisterHost
from tests.fixtures import nova_schemas
from tests.fixtures.api import ADMIN, P1, Stack, alive, assert_fault


def written(r: Any) -> int:
    assert r.status_code in (200, 201, 202, 204), (r.status_code, r.text)
    return int(r.headers["X-Stratus-Position"])


@pytest.fixture(scope="module")
def schemas() -> Any:
    """Tempest's schema modules by microversion and name (``tests.nova_schemas``)."""
    return lambda version, name: nova_schemas.module(f"{version}.{name}")


def conforms(r: Any, schema: dict[str, Any]) -> Any:
    """The response's status and body are what tempest accepts; the body."""
    body = r.json if r.text else None
    nova_schemas.conforms(schema, r.status_code, body, r.text[:200])
    return body


def at(stack: Stack, minor: int, who: str = ADMIN) -> dict[str, str]:
    return {**stack.auth(who), "OpenStack-API-Version": f"compute 2.{minor}"}


def _hosts(stack: Stack) -> int:
    stack.handlers.register_host(RegisterHost("cmp-a", vcpus=4, memory_mb=8192, disk_gb=50))
    after = stack.handlers.register_host(RegisterHost("cmp-b", vcpus=2, memory_mb=4096, disk_gb=20)).position
    alive(stack, "cmp-a", "cmp-b")
    return after


# -- hypervisors ----------------------------------------------------------------------------------
def test_hypervisors_before_2_53(stack: Stack, schemas: Any) -> None:
    v21 = schemas("v2_1", "hypervisors")
    after = _hosts(stack)
    brief = conforms(stack.get("/v2.1/os-hypervisors", after=after), v21.list_search_hypervisors)
    assert [type(h["id"]) for h in brief["hypervisors"]] == [int, int]  # Nova's integers before 2.53
    detail = conforms(stack.get("/v2.1/os-hypervisors/detail"), v21.list_hypervisors_detail)
    first = detail["hypervisors"][0]
    assert first["host_ip"] and first["service"]["id"] == first["id"]
    show = conforms(stack.get(f"/v2.1/os-hypervisors/{first['id']}"), v21.get_hypervisor)
    assert show["hypervisor"]["hypervisor_hostname"] == "cmp-a"
    stats = conforms(stack.get("/v2.1/os-hypervisors/statistics"), v21.get_hypervisor_statistics)
    assert stats["hypervisor_statistics"]["count"] == 2
    assert stats["hypervisor_statistics"]["vcpus"] == 6
    uptime = conforms(stack.get(f"/v2.1/os-hypervisors/{first['id']}/uptime"), v21.get_hypervisor_uptime)
    assert "load average" in uptime["hypervisor"]["uptime"]
    found = conforms(stack.get("/v2.1/os-hypervisors/cmp-/search"), v21.list_search_hypervisors)
    assert [h["hypervisor_hostname"] for h in found["hypervisors"]] == ["cmp-a", "cmp-b"]
    on = conforms(stack.get("/v2.1/os-hypervisors/cmp-b/servers"), v21.get_hypervisors_servers)
    assert "servers" not in on["hypervisors"][0]  # none there: Nova leaves the key out
    assert_fault(stack.get("/v2.1/os-hypervisors/nope/search"), 404, "itemNotFound", "No hypervisor matching")
    assert_fault(stack.get("/v2.1/os-hypervisors/cmp/search", P1), 403, "forbidden")
    v228 = schemas("v2_28", "hypervisors")
    conforms(stack.get("/v2.1/os-hypervisors/detail", at(stack, 28)), v228.list_hypervisors_detail)
    v233 = schemas("v2_33", "hypervisors")
    page = conforms(stack.get("/v2.1/os-hypervisors?limit=1", at(stack, 33)), v233.list_search_hypervisors)
    assert [h["hypervisor_hostname"] for h in page["hypervisors"]] == ["cmp-a"]
    marker = page["hypervisors"][0]["id"]
    assert "marker=" in page["hypervisors_links"][0]["href"]
    rest = stack.get(f"/v2.1/os-hypervisors/detail?marker={marker}", at(stack, 33))
    assert [
        h["hypervisor_hostname"] for h in conforms(rest, v233.list_hypervisors_detail)["hypervisors"]
    ] == ["cmp-b"]


def test_hypervisors_from_2_53(stack: Stack, schemas: Any) -> None:
    v253 = schemas("v2_53", "hypervisors")
    after = _hosts(stack)
    h53 = at(stack, 53)
    listed = conforms(stack.get("/v2.1/os-hypervisors", h53, after=after), v253.list_search_hypervisors)
    ids = [h["id"] for h in listed["hypervisors"]]
    assert all(len(i) == 36 for i in ids)
    r = stack.get("/v2.1/os-hypervisors/detail?hypervisor_hostname_pattern=cmp-b&with_servers=true", h53)
    (only,) = conforms(r, v253.list_hypervisors_detail)["hypervisors"]
    assert only["hypervisor_hostname"] == "cmp-b" and "servers" not in only  # [] only from 2.75
    conforms(stack.get(f"/v2.1/os-hypervisors/{ids[0]}?with_servers=1", h53), v253.get_hypervisor)
    assert_fault(stack.get("/v2.1/os-hypervisors/cmp-a", h53), 400, "badRequest", "Invalid uuid cmp-a")
    assert_fault(stack.get("/v2.1/os-hypervisors?with_servers=maybe", h53), 400, "badRequest")
    r = stack.get("/v2.1/os-hypervisors?hypervisor_hostname_pattern=cmp&limit=1", h53)
    assert_fault(r, 400, "badRequest", "Paging over hypervisors")
    assert_fault(stack.get("/v2.1/os-hypervisors?hypervisor_hostname_pattern=zz", h53), 404, "itemNotFound")
    for route in ("cmp/search", "cmp/servers"):
        assert_fault(stack.get(f"/v2.1/os-hypervisors/{route}", h53), 404, "itemNotFound")

    h75 = at(stack, 75)
    r = stack.get(f"/v2.1/os-hypervisors/{ids[1]}?with_servers=true", h75)
    assert conforms(r, v253.get_hypervisor)["hypervisor"]["servers"] == []

    h88 = at(stack, 88)
    (first, _) = stack.get("/v2.1/os-hypervisors/detail", h88).json["hypervisors"]
    assert "load average" in first["uptime"] and "vcpus" not in first and "cpu_info" not in first
    assert set(first) == {
        "id", "hypervisor_hostname", "state", "status", "hypervisor_type", "hypervisor_version",
        "host_ip", "service", "uptime",
    }  # fmt: skip
    assert_fault(stack.get("/v2.1/os-hypervisors/statistics", h88), 404, "itemNotFound")
    assert_fault(stack.get(f"/v2.1/os-hypervisors/{ids[0]}/uptime", h88), 404, "itemNotFound")
    conforms(stack.get("/v2.1/os-hypervisors/statistics", at(stack, 87)), v253.get_hypervisor_statistics)


# -- services -------------------------------------------------------------------------------------
def test_services_updated_by_uuid_from_2_53(stack: Stack, schemas: Any) -> None:
    v253 = schemas("v2_53", "services")
    after = _hosts(stack)
    h53 = at(stack, 53)
    listed = conforms(stack.get("/v2.1/os-services", h53, after=after), v253.list_services)
    service = next(s for s in listed["services"] if s["host"] == "cmp-a")
    path = f"/v2.1/os-services/{service['id']}"
    r = stack.request("PUT", path, h53, json={"status": "disabled", "disabled_reason": "maintenance"})
    updated = conforms(r, v253.update_service)["service"]
    assert (updated["id"], updated["status"], updated["disabled_reason"]) == (
        service["id"],
        "disabled",
        "maintenance",
    )
    r = stack.request("PUT", path, h53, json={"status": "enabled", "forced_down": "true"})
    updated = conforms(r, v253.update_service)["service"]
    assert (updated["status"], updated["disabled_reason"], updated["forced_down"], updated["state"]) == (
        "enabled",
        None,
        True,
        "down",
    )
    services = stack.get("/v2.1/os-services?host=cmp-a", h53, after=written(r)).json["services"]
    assert services[0]["forced_down"] is True

    unknown = "/v2.1/os-services/8f5c1d3e-0b1a-4f43-9d2e-0c6f3b1b2a11"
    assert_fault(stack.request("PUT", unknown, h53, json={"status": "enabled"}), 404, "itemNotFound")
    body = {"status": "enabled", "disabled_reason": "x"}
    assert_fault(stack.request("PUT", path, h53, json=body), 400, "badRequest", "'disabled_reason'")
    assert_fault(stack.request("PUT", path, h53, json={}), 400, "badRequest", "No updates were requested")
    assert_fault(stack.request("PUT", path, h53, json={"host": "cmp-a"}), 400, "badRequest")
    old = {"host": "cmp-a", "binary": "nova-compute"}
    assert_fault(stack.request("PUT", "/v2.1/os-services/disable", h53, json=old), 400, "badRequest")
    r = stack.request("PUT", "/v2.1/os-services/disable", h53, json={"status": "disabled"})
    assert_fault(r, 400, "badRequest", "Invalid uuid disable")
    assert_fault(stack.request("PUT", path, at(stack, 53, P1), json={"status": "enabled"}), 403, "forbidden")


# -- aggregates -----------------------------------------------------------------------------------
def test_aggregates_uuid_from_2_41_and_image_cache_at_2_81(stack: Stack, schemas: Any) -> None:
    v21, v241 = schemas("v2_1", "aggregates"), schemas("v2_41", "aggregates")
    r = stack.request("POST", "/v2.1/os-aggregates", json={"aggregate": {"name": "rack-1"}})
    created = conforms(r, v21.create_aggregate)["aggregate"]
    after = written(r)
    conforms(stack.get(f"/v2.1/os-aggregates/{created['id']}", after=after), v21.get_aggregate)
    conforms(stack.get("/v2.1/os-aggregates"), v21.list_aggregates)
    shown = conforms(stack.get(f"/v2.1/os-aggregates/{created['id']}", at(stack, 41)), v241.get_aggregate)
    assert len(shown["aggregate"]["uuid"]) == 36
    conforms(stack.get("/v2.1/os-aggregates", at(stack, 41)), v241.list_aggregates)

    images = f"/v2.1/os-aggregates/{created['id']}/images"
    cache = {"cache": [{"id": "a0b2c4d6-0000-4000-8000-000000000001"}]}
    assert_fault(stack.request("POST", images, at(stack, 80), json=cache), 404, "itemNotFound")
    r = stack.request("POST", images, at(stack, 81), json=cache)
    assert (r.status_code, r.text) == (202, "")
    twice = {"cache": cache["cache"] * 2}
    assert_fault(stack.request("POST", images, at(stack, 81), json=twice), 400, "badRequest", "Duplicate")
    assert_fault(stack.request("POST", images, at(stack, 81), json={"cache": []}), 400, "badRequest")
    r = stack.request("POST", "/v2.1/os-aggregates/999/images", at(stack, 81), json=cache)
    assert_fault(r, 404, "itemNotFound")
    assert_fault(stack.request("POST", images, at(stack, 81, P1), json=cache), 403, "forbidden")


# -- extensions, os-hosts, tenant usage -----------------------------------------------------------
def test_extensions(stack: Stack, schemas: Any) -> None:
    v21 = schemas("v2_1", "extensions")
    listed = conforms(stack.get("/v2.1/extensions", P1), v21.list_extensions)
    assert len(listed["extensions"]) == 99
    consoles = stack.get("/v2.1/extensions/os-consoles", P1)
    assert consoles.status_code == 200 and consoles.json["extension"]["name"] == "Consoles"
    assert_fault(stack.get("/v2.1/extensions/os-nope", P1), 404, "itemNotFound")


def test_hosts_with_a_blank_zone_and_usage_without_tenant(stack: Stack, schemas: Any) -> None:
    v21 = schemas("v2_1", "hosts")
    after = _hosts(stack)
    listed = conforms(stack.get("/v2.1/os-hosts?zone=", after=after), v21.list_hosts)
    assert [h["host_name"] for h in listed["hosts"]] == ["cmp-a", "cmp-b"]
    assert stack.get("/v2.1/os-hosts?zone=elsewhere").json == {"hosts": []}
    assert_fault(stack.get("/v2.1/os-simple-tenant-usage/?start=2026-01-01T00:00:00"), 404, "itemNotFound")
    assert stack.get("/v2.1/os-simple-tenant-usage?start=2026-01-01T00:00:00").status_code == 200


# -- key pairs ------------------------------------------------------------------------------------
def test_keypairs_per_microversion(stack: Stack, schemas: Any) -> None:
    v21, v22 = schemas("v2_1", "keypairs"), schemas("v2_2", "keypairs")
    r = stack.request("POST", "/v2.1/os-keypairs", P1, json={"keypair": {"name": "k-21"}})
    conforms(r, v21.create_keypair)
    shown = conforms(stack.get("/v2.1/os-keypairs/k-21", P1, after=written(r)), v21.get_keypair)["keypair"]
    assert type(shown["id"]) is int and shown["deleted"] is False
    conforms(stack.get("/v2.1/os-keypairs", P1), v21.list_keypairs)

    h22 = at(stack, 22, P1)
    r = stack.request("POST", "/v2.1/os-keypairs", h22, json={"keypair": {"name": "cert", "type": "x509"}})
    created = conforms(r, v22.create_keypair)["keypair"]
    assert (
        created["public_key"].startswith("-----BEGIN CERTIFICATE-----")
        and "PRIVATE KEY" in created["private_key"]
    )
    assert len(created["fingerprint"].split(":")) == 20  # SHA-1, as Nova
    after = written(r)
    shown = conforms(stack.get("/v2.1/os-keypairs/cert", h22, after=after), v22.get_keypair)["keypair"]
    assert (shown["type"], shown["fingerprint"]) == ("x509", created["fingerprint"])
    listed = conforms(stack.get("/v2.1/os-keypairs", h22), v22.list_keypairs)["keypairs"]
    assert {k["keypair"]["name"]: k["keypair"]["type"] for k in listed} == {"cert": "x509", "k-21": "ssh"}
    imported = {"keypair": {"name": "cert-2", "type": "x509", "public_key": created["public_key"]}}
    r = stack.request("POST", "/v2.1/os-keypairs", h22, json=imported)
    assert conforms(r, v22.create_keypair)["keypair"]["fingerprint"] == created["fingerprint"]
    bad = {"keypair": {"name": "cert-3", "type": "x509", "public_key": "not a certificate"}}
    assert_fault(stack.request("POST", "/v2.1/os-keypairs", h22, json=bad), 400, "badRequest", "X509")
    conforms(stack.request("DELETE", "/v2.1/os-keypairs/cert-2", h22), v22.delete_keypair)

    # 2.10: an admin manages another user's key pairs by user_id
    bob = stack.get("/v2.1/os-keypairs/k-21", P1).json["keypair"]["user_id"]
    h210 = at(stack, 10)
    body = {"keypair": {"name": "for-bob", "user_id": bob}}
    r = stack.request("POST", "/v2.1/os-keypairs", h210, json=body)
    assert conforms(r, v22.create_keypair)["keypair"]["user_id"] == bob
    after = written(r)
    r = stack.get(f"/v2.1/os-keypairs/for-bob?user_id={bob}", h210, after=after)
    assert conforms(r, v22.get_keypair)["keypair"]["user_id"] == bob
    names = [
        k["keypair"]["name"] for k in stack.get(f"/v2.1/os-keypairs?user_id={bob}", h210).json["keypairs"]
    ]
    assert names == ["cert", "for-bob", "k-21"]
    assert_fault(stack.get("/v2.1/os-keypairs/for-bob", h210), 404, "itemNotFound")  # not the admin's
    assert_fault(stack.get("/v2.1/os-keypairs?user_id=someone", at(stack, 10, P1)), 403, "forbidden")
    assert stack.request("DELETE", f"/v2.1/os-keypairs/for-bob?user_id={bob}", h210).status_code == 204

    # 2.35 pages; 2.92 generates nothing and takes "@" and "." in names
    page = stack.get("/v2.1/os-keypairs?limit=1", at(stack, 35, P1)).json
    assert [k["keypair"]["name"] for k in page["keypairs"]] == ["cert"] and "keypairs_links" in page
    assert len(stack.get("/v2.1/os-keypairs?limit=1", P1).json["keypairs"]) > 1  # no paging at 2.1
    h92 = at(stack, 92, P1)
    assert_fault(
        stack.request("POST", "/v2.1/os-keypairs", h92, json={"keypair": {"name": "g"}}), 400, "badRequest"
    )
    key = {"keypair": {"name": "me@host.x", "public_key": shown_public_key(stack)}}
    assert stack.request("POST", "/v2.1/os-keypairs", h92, json=key).status_code == 201
    key["keypair"]["name"] = "me@host.y"
    assert_fault(stack.request("POST", "/v2.1/os-keypairs", at(stack, 91, P1), json=key), 400, "badRequest")


def shown_public_key(stack: Stack) -> str:
    return str(stack.get("/v2.1/os-keypairs/k-21", P1).json["keypair"]["public_key"])
