"""The admin side of the Compute API per microversion, held to tempest's own response schemas
(tempest 47.0.0's ``tempest/lib/api_schema/response/compute``, which checks Nova's bodies with
``additionalProperties: false``): hypervisors, services, aggregates, extensions, os-hosts and
tenant usage, against the real services.

Each table is a sequence of calls (``tests.fixtures.http_table``): microversion, persona, request,
the status and tempest schema of the answer, an error's fault. The schemas are tempest's modules,
loaded by ``tests.fixtures.nova_schemas`` (which installs tempest into the conformance runner's
virtualenv when it is not there yet).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.fixtures.api import P1, Stack, alive
from tests.fixtures.facades.handlers import RegisterHost
from tests.fixtures.http_table import Call, Values, run


def hosts(stack: Stack) -> Values:
    """Two hosts whose workers beat: cmp-a (4 vCPUs) and cmp-b (2)."""
    stack.handlers.register_host(RegisterHost("cmp-a", vcpus=4, memory_mb=8192, disk_gb=50))
    after = stack.handlers.register_host(RegisterHost("cmp-b", vcpus=2, memory_mb=4096, disk_gb=20)).position
    alive(stack, "cmp-a", "cmp-b")
    return {"after": after}


def nothing(stack: Stack) -> Values:
    return {}


def names(body: Any) -> list[str]:
    return [h["hypervisor_hostname"] for h in body["hypervisors"]]


# tempest's schema modules of the hypervisors, by the microversion they start at
HYP_1, HYP_28, HYP_33, HYP_53 = (f"v2_{n}.hypervisors." for n in (1, 28, 33, 53))
HYPERVISORS_BEFORE_2_53 = [
    Call("2.1", "GET", "/v2.1/os-hypervisors", 200, HYP_1 + "list_search_hypervisors",
         expect=lambda b, v: [type(h["id"]) for h in b["hypervisors"]] == [int, int]),  # integers before 2.53
    Call("2.1", "GET", "/v2.1/os-hypervisors/detail", 200, HYP_1 + "list_hypervisors_detail",
         expect=lambda b, v: b["hypervisors"][0]["host_ip"]
         and b["hypervisors"][0]["service"]["id"] == b["hypervisors"][0]["id"],
         keep=lambda b: {"first": b["hypervisors"][0]["id"]}),
    Call("2.1", "GET", "/v2.1/os-hypervisors/{first}", 200, HYP_1 + "get_hypervisor",
         expect=lambda b, v: b["hypervisor"]["hypervisor_hostname"] == "cmp-a"),
    Call("2.1", "GET", "/v2.1/os-hypervisors/statistics", 200, HYP_1 + "get_hypervisor_statistics",
         expect=lambda b, v: [b["hypervisor_statistics"][k] for k in ("count", "vcpus")] == [2, 6]),
    Call("2.1", "GET", "/v2.1/os-hypervisors/{first}/uptime", 200, HYP_1 + "get_hypervisor_uptime",
         expect=lambda b, v: "load average" in b["hypervisor"]["uptime"]),
    Call("2.1", "GET", "/v2.1/os-hypervisors/cmp-/search", 200, HYP_1 + "list_search_hypervisors",
         expect=lambda b, v: names(b) == ["cmp-a", "cmp-b"]),
    Call("2.1", "GET", "/v2.1/os-hypervisors/cmp-b/servers", 200, HYP_1 + "get_hypervisors_servers",
         expect=lambda b, v: "servers" not in b["hypervisors"][0]),  # none there: Nova leaves the key out
    Call("2.1", "GET", "/v2.1/os-hypervisors/nope/search", 404,
         fault=("itemNotFound", "No hypervisor matching")),
    Call("2.1", "GET", "/v2.1/os-hypervisors/cmp/search", 403, who=P1, fault=("forbidden",)),
    Call("2.28", "GET", "/v2.1/os-hypervisors/detail", 200, HYP_28 + "list_hypervisors_detail"),
    Call("2.33", "GET", "/v2.1/os-hypervisors?limit=1", 200, HYP_33 + "list_search_hypervisors",
         expect=lambda b, v: names(b) == ["cmp-a"] and "marker=" in b["hypervisors_links"][0]["href"],
         keep=lambda b: {"marker": b["hypervisors"][0]["id"]}),
    Call("2.33", "GET", "/v2.1/os-hypervisors/detail?marker={marker}", 200,
         HYP_33 + "list_hypervisors_detail",
         expect=lambda b, v: names(b) == ["cmp-b"]),
]  # fmt: skip

HYPERVISOR_AT_2_88 = {
    "id", "hypervisor_hostname", "state", "status", "hypervisor_type", "hypervisor_version", "host_ip",
    "service", "uptime",
}  # fmt: skip
HYPERVISORS_FROM_2_53 = [
    Call("2.53", "GET", "/v2.1/os-hypervisors", 200, HYP_53 + "list_search_hypervisors",
         expect=lambda b, v: all(len(h["id"]) == 36 for h in b["hypervisors"]),
         keep=lambda b: {"id0": b["hypervisors"][0]["id"], "id1": b["hypervisors"][1]["id"]}),
    Call("2.53", "GET", "/v2.1/os-hypervisors/detail?hypervisor_hostname_pattern=cmp-b&with_servers=true",
         200, HYP_53 + "list_hypervisors_detail",
         expect=lambda b, v: [(h["hypervisor_hostname"], "servers" in h) for h in b["hypervisors"]]
         == [("cmp-b", False)]),  # "servers": [] only from 2.75
    Call("2.53", "GET", "/v2.1/os-hypervisors/{id0}?with_servers=1", 200, HYP_53 + "get_hypervisor"),
    Call("2.53", "GET", "/v2.1/os-hypervisors/cmp-a", 400, fault=("badRequest", "Invalid uuid cmp-a")),
    Call("2.53", "GET", "/v2.1/os-hypervisors?with_servers=maybe", 400, fault=("badRequest",)),
    Call("2.53", "GET", "/v2.1/os-hypervisors?hypervisor_hostname_pattern=cmp&limit=1", 400,
         fault=("badRequest", "Paging over hypervisors")),
    Call("2.53", "GET", "/v2.1/os-hypervisors?hypervisor_hostname_pattern=zz", 404, fault=("itemNotFound",)),
    Call("2.53", "GET", "/v2.1/os-hypervisors/cmp/search", 404, fault=("itemNotFound",)),
    Call("2.53", "GET", "/v2.1/os-hypervisors/cmp/servers", 404, fault=("itemNotFound",)),
    Call("2.75", "GET", "/v2.1/os-hypervisors/{id1}?with_servers=true", 200, HYP_53 + "get_hypervisor",
         expect=lambda b, v: b["hypervisor"]["servers"] == []),
    Call("2.88", "GET", "/v2.1/os-hypervisors/detail",
         expect=lambda b, v: len(b["hypervisors"]) == 2 and "load average" in b["hypervisors"][0]["uptime"]
         and set(b["hypervisors"][0]) == HYPERVISOR_AT_2_88),  # no vcpus, no cpu_info
    Call("2.88", "GET", "/v2.1/os-hypervisors/statistics", 404, fault=("itemNotFound",)),
    Call("2.88", "GET", "/v2.1/os-hypervisors/{id0}/uptime", 404, fault=("itemNotFound",)),
    Call("2.87", "GET", "/v2.1/os-hypervisors/statistics", 200, HYP_53 + "get_hypervisor_statistics"),
]  # fmt: skip

SERVICE = "/v2.1/os-services/{service}"
SERVICES_BY_UUID_FROM_2_53 = [
    Call("2.53", "GET", "/v2.1/os-services", 200, "v2_53.services.list_services",
         keep=lambda b: {"service": next(s["id"] for s in b["services"] if s["host"] == "cmp-a")}),
    Call("2.53", "PUT", SERVICE, 200, "v2_53.services.update_service",
         body={"status": "disabled", "disabled_reason": "maintenance"},
         expect=lambda b, v: (b["service"]["id"], b["service"]["status"], b["service"]["disabled_reason"])
         == (v["service"], "disabled", "maintenance")),
    Call("2.53", "PUT", SERVICE, 200, "v2_53.services.update_service",
         body={"status": "enabled", "forced_down": "true"},
         expect=lambda b, v: [b["service"][k] for k in ("status", "disabled_reason", "forced_down", "state")]
         == ["enabled", None, True, "down"]),
    Call("2.53", "GET", "/v2.1/os-services?host=cmp-a",
         expect=lambda b, v: b["services"][0]["forced_down"] is True),
    Call("2.53", "PUT", "/v2.1/os-services/8f5c1d3e-0b1a-4f43-9d2e-0c6f3b1b2a11", 404,
         body={"status": "enabled"}, fault=("itemNotFound",)),
    Call("2.53", "PUT", SERVICE, 400, body={"status": "enabled", "disabled_reason": "x"},
         fault=("badRequest", "'disabled_reason'")),
    Call("2.53", "PUT", SERVICE, 400, body={}, fault=("badRequest", "No updates were requested")),
    Call("2.53", "PUT", SERVICE, 400, body={"host": "cmp-a"}, fault=("badRequest",)),
    Call("2.53", "PUT", "/v2.1/os-services/disable", 400, body={"host": "cmp-a", "binary": "nova-compute"},
         fault=("badRequest",)),
    Call("2.53", "PUT", "/v2.1/os-services/disable", 400, body={"status": "disabled"},
         fault=("badRequest", "Invalid uuid disable")),
    Call("2.53", "PUT", SERVICE, 403, who=P1, body={"status": "enabled"}, fault=("forbidden",)),
]  # fmt: skip

IMAGES = "/v2.1/os-aggregates/{aggregate}/images"
CACHE = {"cache": [{"id": "a0b2c4d6-0000-4000-8000-000000000001"}]}
AGGREGATES = [
    Call("2.1", "POST", "/v2.1/os-aggregates", 200, "v2_1.aggregates.create_aggregate",
         body={"aggregate": {"name": "rack-1"}}, keep=lambda b: {"aggregate": b["aggregate"]["id"]}),
    Call("2.1", "GET", "/v2.1/os-aggregates/{aggregate}", 200, "v2_1.aggregates.get_aggregate"),
    Call("2.1", "GET", "/v2.1/os-aggregates", 200, "v2_1.aggregates.list_aggregates"),
    Call("2.41", "GET", "/v2.1/os-aggregates/{aggregate}", 200, "v2_41.aggregates.get_aggregate",
         expect=lambda b, v: len(b["aggregate"]["uuid"]) == 36),
    Call("2.41", "GET", "/v2.1/os-aggregates", 200, "v2_41.aggregates.list_aggregates"),
    Call("2.80", "POST", IMAGES, 404, body=CACHE, fault=("itemNotFound",)),
    Call("2.81", "POST", IMAGES, 202, body=CACHE, expect=lambda b, v: b is None),  # no body
    Call("2.81", "POST", IMAGES, 400, body={"cache": CACHE["cache"] * 2}, fault=("badRequest", "Duplicate")),
    Call("2.81", "POST", IMAGES, 400, body={"cache": []}, fault=("badRequest",)),
    Call("2.81", "POST", "/v2.1/os-aggregates/999/images", 404, body=CACHE, fault=("itemNotFound",)),
    Call("2.81", "POST", IMAGES, 403, who=P1, body=CACHE, fault=("forbidden",)),
]  # fmt: skip

EXTENSIONS = [
    Call("2.1", "GET", "/v2.1/extensions", 200, "v2_1.extensions.list_extensions", who=P1,
         expect=lambda b, v: len(b["extensions"]) == 99),
    Call("2.1", "GET", "/v2.1/extensions/os-consoles", who=P1,
         expect=lambda b, v: b["extension"]["name"] == "Consoles"),
    Call("2.1", "GET", "/v2.1/extensions/os-nope", 404, who=P1, fault=("itemNotFound",)),
]  # fmt: skip

OS_HOSTS_AND_USAGE = [
    Call("2.1", "GET", "/v2.1/os-hosts?zone=", 200, "v2_1.hosts.list_hosts",
         expect=lambda b, v: [h["host_name"] for h in b["hosts"]] == ["cmp-a", "cmp-b"]),
    Call("2.1", "GET", "/v2.1/os-hosts?zone=elsewhere", expect=lambda b, v: b == {"hosts": []}),
    Call("2.1", "GET", "/v2.1/os-simple-tenant-usage/?start=2026-01-01T00:00:00", 404,
         fault=("itemNotFound",)),
    Call("2.1", "GET", "/v2.1/os-simple-tenant-usage?start=2026-01-01T00:00:00"),
]  # fmt: skip


def keypair(name: str, **fields: Any) -> Callable[[Values], Any]:
    """A key pair's create body, its fields formatted with the table's values."""
    return lambda v: {"keypair": {"name": name, **{k: f.format(**v) for k, f in fields.items()}}}


KEYPAIRS = "/v2.1/os-keypairs"
KEYPAIRS_PER_MICROVERSION = [
    Call("2.1", "POST", KEYPAIRS, 200, "v2_1.keypairs.create_keypair", who=P1,
         body={"keypair": {"name": "k-21"}}),
    Call("2.1", "GET", f"{KEYPAIRS}/k-21", 200, "v2_1.keypairs.get_keypair", who=P1,
         expect=lambda b, v: type(b["keypair"]["id"]) is int and b["keypair"]["deleted"] is False,
         keep=lambda b: {"bob": b["keypair"]["user_id"], "ssh": b["keypair"]["public_key"]}),
    Call("2.1", "GET", KEYPAIRS, 200, "v2_1.keypairs.list_keypairs", who=P1),
    # 2.2: types, and x509 certificates
    Call("2.22", "POST", KEYPAIRS, 201, "v2_2.keypairs.create_keypair", who=P1,
         body={"keypair": {"name": "cert", "type": "x509"}},
         expect=lambda b, v: b["keypair"]["public_key"].startswith("-----BEGIN CERTIFICATE-----")
         and "PRIVATE KEY" in b["keypair"]["private_key"]
         and len(b["keypair"]["fingerprint"].split(":")) == 20,
         keep=lambda b: {"cert": b["keypair"]["public_key"], "fingerprint": b["keypair"]["fingerprint"]}),
    Call("2.22", "GET", f"{KEYPAIRS}/cert", 200, "v2_2.keypairs.get_keypair", who=P1,
         expect=lambda b, v: (b["keypair"]["type"], b["keypair"]["fingerprint"])
         == ("x509", v["fingerprint"])),
    Call("2.22", "GET", KEYPAIRS, 200, "v2_2.keypairs.list_keypairs", who=P1,
         expect=lambda b, v: {k["keypair"]["name"]: k["keypair"]["type"] for k in b["keypairs"]}
         == {"cert": "x509", "k-21": "ssh"}),
    Call("2.22", "POST", KEYPAIRS, 201, "v2_2.keypairs.create_keypair", who=P1,
         body=keypair("cert-2", type="x509", public_key="{cert}"),
         expect=lambda b, v: b["keypair"]["fingerprint"] == v["fingerprint"]),
    Call("2.22", "POST", KEYPAIRS, 400, who=P1,
         body={"keypair": {"name": "cert-3", "type": "x509", "public_key": "not a certificate"}},
         fault=("badRequest", "X509")),
    Call("2.22", "DELETE", f"{KEYPAIRS}/cert-2", 204, "v2_2.keypairs.delete_keypair", who=P1),
    # 2.10: an admin manages another user's key pairs by user_id
    Call("2.10", "POST", KEYPAIRS, 201, "v2_2.keypairs.create_keypair",
         body=keypair("for-bob", user_id="{bob}"), expect=lambda b, v: b["keypair"]["user_id"] == v["bob"]),
    Call("2.10", "GET", f"{KEYPAIRS}/for-bob?user_id={{bob}}", 200, "v2_2.keypairs.get_keypair",
         expect=lambda b, v: b["keypair"]["user_id"] == v["bob"]),
    Call("2.10", "GET", f"{KEYPAIRS}?user_id={{bob}}",
         expect=lambda b, v: [k["keypair"]["name"] for k in b["keypairs"]] == ["cert", "for-bob", "k-21"]),
    Call("2.10", "GET", f"{KEYPAIRS}/for-bob", 404, fault=("itemNotFound",)),  # not the admin's
    Call("2.10", "GET", f"{KEYPAIRS}?user_id=someone", 403, who=P1, fault=("forbidden",)),
    Call("2.10", "DELETE", f"{KEYPAIRS}/for-bob?user_id={{bob}}", 204),
    # 2.35 pages; 2.92 generates nothing and takes "@" and "." in names
    Call("2.35", "GET", f"{KEYPAIRS}?limit=1", who=P1,
         expect=lambda b, v: [k["keypair"]["name"] for k in b["keypairs"]] == ["cert"]
         and "keypairs_links" in b),
    Call("2.1", "GET", f"{KEYPAIRS}?limit=1", who=P1,
         expect=lambda b, v: len(b["keypairs"]) > 1),  # no paging at 2.1
    Call("2.92", "POST", KEYPAIRS, 400, who=P1, body={"keypair": {"name": "g"}}, fault=("badRequest",)),
    Call("2.92", "POST", KEYPAIRS, 201, who=P1, body=keypair("me@host.x", public_key="{ssh}")),
    Call("2.91", "POST", KEYPAIRS, 400, who=P1, body=keypair("me@host.y", public_key="{ssh}"),
         fault=("badRequest",)),
]  # fmt: skip

TABLES: dict[str, tuple[Callable[[Stack], Values], list[Call]]] = {
    "hypervisors before 2.53": (hosts, HYPERVISORS_BEFORE_2_53),
    "hypervisors from 2.53": (hosts, HYPERVISORS_FROM_2_53),
    "services updated by uuid from 2.53": (hosts, SERVICES_BY_UUID_FROM_2_53),
    "aggregates: uuid from 2.41, image cache at 2.81": (nothing, AGGREGATES),
    "extensions": (nothing, EXTENSIONS),
    "os-hosts with a blank zone, usage without a tenant": (hosts, OS_HOSTS_AND_USAGE),
    "key pairs per microversion": (nothing, KEYPAIRS_PER_MICROVERSION),
}


@pytest.mark.parametrize("table", TABLES)
def test_admin_routes_per_microversion(stack: Stack, table: str) -> None:
    setup, calls = TABLES[table]
    run(stack, calls, **setup(stack))
