"""A server's own fields over HTTP: networks and addresses, multi-create, user data, rename and
description, metadata and tags endpoints, and the list filters on them; real JetStream, PostgreSQL
and projector (``tests.fixtures.api``).
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest

from commands.network import FixedNetwork
from stratus.config import Settings
from tests.fixtures.api import ADMIN, P1, P2, Stack, assert_fault, resource

NET = FixedNetwork("private", "10.0.0.0/24")


# tags, description and networks auto/none are there from these microversions on (2.52, 2.19, 2.37)
LATEST = {"OpenStack-API-Version": "compute 2.52"}


def at_latest(stack: Stack, who: Any = None) -> dict[str, str]:
    return {**stack.headers(who), **LATEST}


def create(stack: Stack, who: Any = None, **fields: Any) -> Any:
    body = {"server": {"name": "vm", "flavorRef": "tiny", "networks": "auto", **fields}}
    return stack.request("POST", "/v2.1/servers", at_latest(stack, who), json=body)


def position(r: Any) -> int:
    return int(r.headers["X-Stratus-Position"])


@pytest.mark.parametrize("api_network", [NET])  # as api.app.build reads STRATUS_FIXED_NETWORK
def test_addresses_networks_and_multi_create(stack: Stack) -> None:
    stack.flavor(id="tiny")
    r = create(stack, P1)
    assert r.status_code == 202, r.text
    sid = r.json["server"]["id"]
    server = stack.get(f"/v2.1/servers/{sid}", P1, after=position(r)).json["server"]
    (address,) = server["addresses"]["private"]
    assert address["addr"] == "10.0.0.2" and address["version"] == 4
    assert address["OS-EXT-IPS:type"] == "fixed" and address["OS-EXT-IPS-MAC:mac_addr"].startswith("fa:16:3e")

    r = create(stack, P1, networks=[{"uuid": str(NET.id)}])
    assert r.status_code == 202
    r = create(stack, P1, networks="none")
    none_id = r.json["server"]["id"]
    assert stack.get(f"/v2.1/servers/{none_id}", P1, after=position(r)).json["server"]["addresses"] == {}
    unknown = "3a0c8a4e-0000-4000-8000-000000000000"
    assert_fault(create(stack, P1, networks=[{"uuid": unknown}]), 400, "badRequest", f"Network {unknown}")

    r = create(stack, P1, name="web", min_count=2, max_count=3, return_reservation_id=True)
    assert r.status_code == 202, r.text
    reservation = r.json["reservation_id"]
    assert reservation.startswith("r-") and "server" not in r.json
    listed = stack.get(f"/v2.1/servers/detail?reservation_id={reservation}", P1, after=position(r)).json
    names = sorted(s["name"] for s in listed["servers"])
    assert names == ["web-1", "web-2", "web-3"]
    ips = [s["addresses"]["private"][0]["addr"] for s in listed["servers"]]
    assert len(set(ips)) == 3
    r = stack.get(f"/v2.1/servers?ip={ips[0].replace('.', '[.]')}$", P1)
    assert [s["name"] for s in r.json["servers"]] == [
        s["name"] for s in listed["servers"] if s["addresses"]["private"][0]["addr"] == ips[0]
    ]
    assert_fault(create(stack, P1, min_count=3, max_count=2), 400, "badRequest", "min_count")
    assert_fault(create(stack, P1, max_count=101), 400, "badRequest", "max_count")

    # delete gives the address back
    r = stack.request("DELETE", f"/v2.1/servers/{sid}", P1)
    r = create(stack, P1, name="again")
    again = stack.get(f"/v2.1/servers/{r.json['server']['id']}", P1, after=position(r)).json["server"]
    assert again["addresses"]["private"][0]["addr"] == "10.0.0.2"


def test_user_data_is_filed_under_a_random_id_and_never_logged(stack: Stack, api_settings: Settings) -> None:
    """Neither the data nor a digest of it enters the log: a digest would let anyone reading the log
    confirm a guess of a server's user data (an unsalted SHA-256 did, before)."""
    stack.flavor(id="tiny")
    secret = b"#cloud-config\npassword: hunter2-very-secret\n"
    r = create(stack, P1, user_data=base64.b64encode(secret).decode())
    assert r.status_code == 202, r.text
    inst = stack.handlers.instance(r.json["server"]["id"])
    assert set(inst.user_data) == {"id", "size"} and inst.user_data["size"] == len(secret)
    assert (api_settings.data_dir / "user_data" / inst.user_data["id"]).read_bytes() == secret
    again = create(stack, P1, user_data=base64.b64encode(secret).decode())
    other = stack.handlers.instance(again.json["server"]["id"])
    assert other.user_data["id"] != inst.user_data["id"]  # the same data, nothing in common on the log
    envelopes = stack.handlers.app.recorder.read_envelopes(1, 10_000)  # type: ignore[attr-defined]
    digests = (hashlib.sha256(secret).hexdigest().encode(), hashlib.md5(secret).hexdigest().encode())
    assert not any(b"hunter2" in (e.data or b"") for e in envelopes)
    assert not any(base64.b64encode(secret) in (e.data or b"") for e in envelopes)
    assert not any(d in (e.data or b"") for e in envelopes for d in digests)
    too_long = "A" * 65536
    assert_fault(create(stack, P1, user_data=too_long), 400, "badRequest", "user_data")


def test_rename_metadata_and_tags(stack: Stack) -> None:
    stack.flavor(id="tiny")
    p1 = at_latest(stack, P1)
    r = create(stack, P1, metadata={"a": "1"}, tags=["blue"], description="first")
    sid = r.json["server"]["id"]
    base = f"/v2.1/servers/{sid}"

    r = stack.request("PUT", base, p1, json={"server": {"name": "renamed", "description": "second"}})
    assert r.status_code == 200, r.text
    assert r.json["server"]["name"] == "renamed" and r.json["server"]["description"] == "second"
    assert_fault(stack.request("PUT", base, P1, json={"server": {"flavorRef": "x"}}), 400, "badRequest")
    assert stack.request("PUT", base, P2, json={"server": {"name": "x"}}).status_code == 404

    # metadata: POST merges, PUT replaces, items one by one
    r = stack.request("POST", f"{base}/metadata", P1, json={"metadata": {"b": "2"}})
    assert r.status_code == 200 and r.json["metadata"] == {"a": "1", "b": "2"}
    r = stack.request("PUT", f"{base}/metadata", P1, json={"metadata": {"c": "3"}})
    assert r.json["metadata"] == {"c": "3"}
    r = stack.request("PUT", f"{base}/metadata/d", P1, json={"meta": {"d": "4"}})
    assert r.status_code == 200 and resource(r) == {"meta": {"d": "4"}}
    assert_fault(stack.request("PUT", f"{base}/metadata/d", P1, json={"meta": {"e": "5"}}), 400, "badRequest")
    assert stack.get(f"{base}/metadata/d", P1).json == {"meta": {"d": "4"}}
    assert stack.request("DELETE", f"{base}/metadata/d", P1).status_code == 204
    assert stack.get(f"{base}/metadata/d", P1).status_code == 404
    assert stack.request("DELETE", f"{base}/metadata/d", P1).status_code == 404
    assert stack.get(f"{base}/metadata", P2).status_code == 404
    too_many = {"metadata": {f"k{i}": "v" for i in range(128)}}
    assert_fault(
        stack.request("POST", f"{base}/metadata", P1, json=too_many), 403, "forbidden", "metadata_items"
    )

    # tags
    assert stack.get(f"{base}/tags", p1).json == {"tags": ["blue"]}
    r = stack.request("PUT", f"{base}/tags/red", p1)
    assert r.status_code == 201 and r.headers["Location"].endswith(f"{base}/tags/red")
    assert stack.request("PUT", f"{base}/tags/red", p1).status_code == 204
    assert stack.get(f"{base}/tags/red", p1).status_code == 204
    assert stack.get(f"{base}/tags/green", p1).status_code == 404
    r = stack.request("PUT", f"{base}/tags", p1, json={"tags": ["x", "y", "x"]})
    assert r.status_code == 200 and resource(r) == {"tags": ["x", "y"]}
    assert_fault(stack.request("PUT", f"{base}/tags", p1, json={"tags": ["a,b"]}), 400, "badRequest")
    fifty_one = {"tags": [str(i) for i in range(51)]}
    assert_fault(stack.request("PUT", f"{base}/tags", p1, json=fifty_one), 400, "badRequest")
    assert stack.request("DELETE", f"{base}/tags/x", p1).status_code == 204
    assert stack.request("DELETE", f"{base}/tags/x", p1).status_code == 404
    r = stack.request("DELETE", f"{base}/tags", p1)
    assert r.status_code == 204
    assert stack.get(f"{base}/tags", p1).json == {"tags": []}

    # every change is an event on the server, by who made it
    types = [
        e.to_dict()["type"]
        for e in stack.handlers.app.recorder.read_envelopes(1, 10_000)  # type: ignore[attr-defined]
        if e.to_dict()["subject"] == sid
    ]
    assert types.count("stratus.instance.updated") == 1
    assert types.count("stratus.instance.metadataupdated") == 4
    assert types.count("stratus.instance.tagsupdated") == 4

    # the list filters on tags and changes-since
    other = create(stack, P1, name="other", tags=["keep"])
    stack.request("PUT", f"{base}/tags", p1, json={"tags": ["keep", "web"]})
    last = position(stack.request("PUT", f"{base}/tags/z", p1))
    assert last > position(other)
    r = stack.get("/v2.1/servers?tags=keep,web", P1, after=last)
    assert [s["id"] for s in r.json["servers"]] == [sid]
    r = stack.get("/v2.1/servers?tags-any=keep", P1)
    assert len(r.json["servers"]) == 2
    r = stack.get("/v2.1/servers?not-tags-any=web", P1)
    assert [s["name"] for s in r.json["servers"]] == ["other"]
    r = stack.get("/v2.1/servers?changes-since=2000-01-01T00:00:00Z", P1)
    assert len(r.json["servers"]) == 2
    r = stack.get("/v2.1/servers?changes-since=2999-01-01T00:00:00Z", P1)
    assert r.json["servers"] == []
    assert_fault(stack.get("/v2.1/servers?changes-since=yesterday", P1), 400, "badRequest", "changes-since")
    assert stack.get(f"{base}/tags", at_latest(stack, ADMIN)).status_code == 200  # admins act across projects
