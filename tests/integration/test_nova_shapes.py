"""Nova's response contract, held to tempest's own schemas at every microversion where they change.

``tests/fixtures/nova_schemas.py`` reads tempest's table from microversion to schema; these tests ask
Stratus at each of those microversions, as an admin (who sees the most keys) and as a member, and
fail on any key Nova does not have there, any it has that is missing, or another status code.

The checks that are calls and answers only are tables at the end of the module
(``tests.fixtures.http_table``); the flows, where each step builds on what the one before made
through the handlers, stay code.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from commands.hosts.register import RegisterHost
from commands.network import FixedNetwork
from commands.servers.actions import FinishAction
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import FinishSpawning, StartSpawning
from commands.states import PowerState
from tests.fixtures import nova_schemas
from tests.fixtures.api import ADMIN, P1, P2, Stack, ssh_public_key, upload
from tests.fixtures.facades.lifecycle import LifecycleHandlers
from tests.fixtures.http_table import EVERY, Call, Values, run

MV = "OpenStack-API-Version"
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def at(stack: Stack, who: str, version: str, after: int = 0) -> dict[str, str]:
    return {**stack.headers(who), MV: f"compute {version}", "X-Stratus-Min-Position": str(after)}


def _minor(version: str) -> int:
    return int(version.split(".")[1])


def _position(r: Any) -> int:
    return int(r.headers.get("X-Stratus-Position") or 0)


@pytest.fixture
def api_network() -> FixedNetwork:
    """The stack's fixed network (``tests.fixtures.api``): the contract server has an address, in
    every view, and ``os-networks`` lists it."""
    return FixedNetwork("private", "10.0.0.0/24")


@pytest.fixture
def server(stack: Stack) -> tuple[str, int]:
    """A placed, locked server with every optional field set, and the log position after it."""
    return contract_server(stack)


def contract_server(stack: Stack) -> tuple[str, int]:
    """``server``'s server, for the tables."""
    flavor_id, _ = stack.flavor(id="contract", vcpus=1, ram=512, disk=1)
    stack.request("POST", f"/v2.1/flavors/{flavor_id}/os-extra_specs", json={"extra_specs": {"hw:x": "1"}})
    stack.handlers.register_host(RegisterHost("cmp-contract", vcpus=8, memory_mb=16384, disk_gb=100))
    body = {
        "server": {
            "name": "contract",
            "flavorRef": flavor_id,
            "networks": "auto",
            "tags": ["t"],
            "description": "about",
            "metadata": {"k": "v"},
            "user_data": base64.b64encode(b"#!/bin/sh\n").decode(),
            "accessIPv4": "1.1.1.1",
            "accessIPv6": "0000:0000:0000:0000:0000:babe:220.12.22.2",
            "OS-DCF:diskConfig": "AUTO",
            "adminPass": "never-kept",
        }
    }
    r = stack.request("POST", "/v2.1/servers", at(stack, P1, "2.52"), json=body)
    assert r.status_code == 202, r.text
    nova_schemas.check("servers_client", "create_server", "2.52", r.status_code, r.json)
    sid = r.json["server"]["id"]
    stack.handlers.place_instance(PlaceInstance(sid, "cmp-contract"))
    locked = stack.request("POST", f"/v2.1/servers/{sid}/action", P1, json={"lock": None})
    return sid, _position(locked)


def test_flavor_bodies_at_every_microversion(stack: Stack) -> None:
    """Create, show, list and (from 2.55) describe, at each microversion where the flavor changes,
    and Nova's later changes tempest 47.0.0's schemas do not state yet (2.75's swap, 2.102)."""
    for n, version in enumerate([*nova_schemas.boundaries("flavors_client", upto=(2, 101)), "2.75"]):
        spec: dict[str, Any] = {"name": f"f{n}", "ram": 64, "vcpus": 1, "disk": 0, "id": f"f{n}"}
        if _minor(version) >= 55:
            spec["description"] = "small"
        created = stack.request("POST", "/v2.1/flavors", at(stack, ADMIN, version), json={"flavor": spec})
        client = "flavors_client"
        nova_schemas.check(
            client, "create_update_get_flavor_details", version, created.status_code, created.json
        )
        after = _position(created)
        shown = stack.get(f"/v2.1/flavors/f{n}", at(stack, P1, version, after))
        nova_schemas.check(client, "create_update_get_flavor_details", version, shown.status_code, shown.json)
        details = stack.get("/v2.1/flavors/detail", at(stack, P1, version, after))
        nova_schemas.check(client, "list_flavors_details", version, details.status_code, details.json)
        brief = stack.get("/v2.1/flavors", at(stack, P1, version, after))
        nova_schemas.check(client, "list_flavors", version, brief.status_code, brief.json)
        swap = shown.json["flavor"]["swap"]
        assert swap == (0 if _minor(version) >= 75 else ""), (version, swap)
    described = stack.request(
        "PUT", "/v2.1/flavors/f1", at(stack, ADMIN, "2.61"), json={"flavor": {"description": "changed"}}
    )
    nova_schemas.check(
        client, "create_update_get_flavor_details", "2.61", described.status_code, described.json
    )
    assert described.json["flavor"]["description"] == "changed"
    refused = stack.request(
        "PUT", "/v2.1/flavors/f1", at(stack, ADMIN, "2.54"), json={"flavor": {"description": "x"}}
    )
    assert refused.status_code == 404  # the route is there from 2.55
    latest = stack.get("/v2.1/flavors/f1", at(stack, P1, "2.102")).json["flavor"]
    assert "rxtx_factor" not in latest and "OS-FLV-DISABLED:disabled" not in latest
    assert stack.get("/v2.1/flavors?bogus=1", at(stack, P1, "2.74")).status_code == 200
    assert stack.get("/v2.1/flavors?bogus=1", at(stack, P1, "2.75")).status_code == 400
    named = stack.get("/v2.1/flavors?name=f1", at(stack, P1, "2.102")).json["flavors"]
    assert [f["id"] for f in named] == ["f1"]


def test_flavor_filters_and_sorting(stack: Stack) -> None:
    for fid, ram, disk in (("a", 64, 1), ("b", 128, 5), ("c", 256, 10)):
        r = stack.request(
            "POST",
            "/v2.1/flavors",
            json={"flavor": {"name": fid, "ram": ram, "vcpus": 1, "disk": disk, "id": fid}},
        )
        after = _position(r)

    def ids(query: str) -> list[str]:
        r = stack.get(f"/v2.1/flavors/detail?{query}", at(stack, P1, "2.1", after))
        assert r.status_code == 200, r.text
        return [f["id"] for f in r.json["flavors"]]

    assert ids("minRam=128") == ["b", "c"]
    assert ids("minDisk=6") == ["c"]
    assert ids("sort_key=memory_mb&sort_dir=desc") == ["c", "b", "a"]
    assert ids("sort_key=memory_mb&sort_dir=desc&limit=1&marker=c") == ["b"]
    assert stack.get("/v2.1/flavors?minRam=lots", at(stack, P1, "2.1")).status_code == 400


def test_server_group_bodies_at_every_microversion(stack: Stack) -> None:
    client = "server_groups_client"
    for version in [*nova_schemas.boundaries(client), "2.15"]:
        if _minor(version) >= 64:
            spec: dict[str, Any] = {
                "name": "g",
                "policy": "anti-affinity",
                "rules": {"max_server_per_host": 2},
            }
        else:
            spec = {"name": "g", "policies": ["soft-affinity" if _minor(version) >= 15 else "affinity"]}
        created = stack.request(
            "POST", "/v2.1/os-server-groups", at(stack, P1, version), json={"server_group": spec}
        )
        nova_schemas.check(client, "create_show_server_group", version, created.status_code, created.json)
        gid, after = created.json["server_group"]["id"], _position(created)
        if _minor(version) >= 64:
            assert created.json["server_group"]["rules"] == {"max_server_per_host": 2}
        shown = stack.get(f"/v2.1/os-server-groups/{gid}", at(stack, P1, version, after))
        nova_schemas.check(client, "create_show_server_group", version, shown.status_code, shown.json)
        listed = stack.get("/v2.1/os-server-groups", at(stack, P1, version, after))
        nova_schemas.check(client, "list_server_groups", version, listed.status_code, listed.json)
        deleted = stack.request("DELETE", f"/v2.1/os-server-groups/{gid}", at(stack, P1, version))
        nova_schemas.check(client, "delete_server_group", version, deleted.status_code, None)
    # each microversion takes its own form only; soft policies from 2.15; rules for anti-affinity only
    old = {"server_group": {"name": "g", "policies": ["affinity"]}}
    assert stack.request("POST", "/v2.1/os-server-groups", at(stack, P1, "2.64"), json=old).status_code == 400
    new = {"server_group": {"name": "g", "policy": "affinity"}}
    assert stack.request("POST", "/v2.1/os-server-groups", at(stack, P1, "2.63"), json=new).status_code == 400
    soft = {"server_group": {"name": "g", "policies": ["soft-affinity"]}}
    assert (
        stack.request("POST", "/v2.1/os-server-groups", at(stack, P1, "2.14"), json=soft).status_code == 400
    )
    ruled = {"server_group": {"name": "g", "policy": "affinity", "rules": {"max_server_per_host": 2}}}
    assert (
        stack.request("POST", "/v2.1/os-server-groups", at(stack, P1, "2.64"), json=ruled).status_code == 400
    )


def test_migration_bodies_at_every_microversion(stack: Stack, server: tuple[str, int]) -> None:
    sid, _ = server
    stack.handlers.start_spawning(StartSpawning(sid, "cmp-contract"))
    stack.handlers.finish_spawning(FinishSpawning(sid, PowerState.RUNNING))
    stack.handlers.register_host(RegisterHost("cmp-other", vcpus=8, memory_mb=16384, disk_gb=100))
    moved = stack.request(
        "POST",
        f"/v2.1/servers/{sid}/action",
        at(stack, ADMIN, "2.56"),
        json={"migrate": {"host": "cmp-other"}},
    )
    assert moved.status_code == 202, moved.text
    after = _position(moved)
    client = "migrations_client"
    for version in nova_schemas.boundaries(client):
        listed = stack.get("/v2.1/os-migrations", at(stack, ADMIN, version, after))
        nova_schemas.check(client, "list_migrations", version, listed.status_code, listed.json)
        (migration,) = listed.json["migrations"]
        assert migration["dest_compute"] in ("cmp-other", None) and migration["instance_uuid"] == sid
    assert (
        "uuid" not in stack.get("/v2.1/os-migrations", at(stack, ADMIN, "2.58", after)).json["migrations"][0]
    )
    p1 = stack.project_id("p1")
    assert (
        len(
            stack.get(f"/v2.1/os-migrations?project_id={p1}", at(stack, ADMIN, "2.80", after)).json[
                "migrations"
            ]
        )
        == 1
    )
    assert (
        stack.get("/v2.1/os-migrations?project_id=other", at(stack, ADMIN, "2.80", after)).json["migrations"]
        == []
    )
    assert stack.get("/v2.1/os-migrations?bogus=1", at(stack, ADMIN, "2.59", after)).status_code == 400
    paged = stack.get("/v2.1/os-migrations?limit=1", at(stack, ADMIN, "2.59", after)).json
    assert paged["migrations_links"][0]["rel"] == "next"
    marker = paged["migrations"][0]["uuid"]
    assert (
        stack.get(f"/v2.1/os-migrations?marker={marker}", at(stack, ADMIN, "2.59", after)).json["migrations"]
        == []
    )


def test_rebuild_bodies_and_what_a_rebuild_changes(stack: Stack, server: tuple[str, int]) -> None:
    """The rebuild's answer at every microversion; a rebuild changes the name, metadata and
    described fields, from 2.54 the key pair and from 2.57 the user data (before: 400)."""
    sid, _ = server
    image = upload(stack, b"disk", ADMIN, visibility="public")["id"]
    key = {"keypair": {"name": "k", "public_key": ssh_public_key()}}
    assert stack.request("POST", "/v2.1/os-keypairs", P1, json=key).status_code in (200, 201)
    stack.handlers.start_spawning(StartSpawning(sid, "cmp-contract"))
    stack.handlers.finish_spawning(FinishSpawning(sid, PowerState.RUNNING))
    assert stack.request("POST", f"/v2.1/servers/{sid}/action", P1, json={"unlock": None}).status_code == 202
    lifecycle = LifecycleHandlers(stack.handlers)
    for version in nova_schemas.boundaries("servers_client"):
        spec: dict[str, Any] = {"imageRef": image, "name": f"rebuilt-{version}", "metadata": {"v": version}}
        if _minor(version) >= 54:
            spec["key_name"] = "k"
        if _minor(version) >= 57:
            spec["user_data"] = base64.b64encode(b"again").decode()
        r = stack.request(
            "POST", f"/v2.1/servers/{sid}/action", at(stack, P1, version), json={"rebuild": spec}
        )
        nova_schemas.check("servers_client", "rebuild_server", version, r.status_code, r.json)
        assert r.json["server"]["name"] == f"rebuilt-{version}" and r.json["server"]["metadata"] == {
            "v": version
        }
        lifecycle.finish_action(FinishAction(sid, "rebuild", PowerState.RUNNING))
    for version in ("2.1", "2.57", "2.75", "2.100"):  # an admin's answer has the extended attributes
        spec = {"imageRef": image}
        r = stack.request(
            "POST", f"/v2.1/servers/{sid}/action", at(stack, ADMIN, version), json={"rebuild": spec}
        )
        nova_schemas.check("servers_client", "rebuild_server", version, r.status_code, r.json)
        lifecycle.finish_action(FinishAction(sid, "rebuild", PowerState.RUNNING))
    shown = stack.get(f"/v2.1/servers/{sid}", at(stack, ADMIN, "2.57", _position(r))).json["server"]
    assert (
        shown["key_name"] == "k" and shown["OS-EXT-SRV-ATTR:user_data"] == base64.b64encode(b"again").decode()
    )
    for version, field in (("2.53", "key_name"), ("2.56", "user_data")):
        spec = {"imageRef": image, field: "k" if field == "key_name" else "YQ=="}
        r = stack.request(
            "POST", f"/v2.1/servers/{sid}/action", at(stack, P1, version), json={"rebuild": spec}
        )
        assert r.status_code == 400 and field in r.text, r.text


def test_everyone_reads_a_flavor_write_at_once(stack: Stack) -> None:
    """Flavors are everyone's: another user's next read waits for an admin's flavor write (tempest
    creates as an admin and lists as a reader), without naming a position."""
    for n in range(3):
        body = {"flavor": {"name": f"now-{n}", "ram": 64, "vcpus": 1, "disk": 0, "id": f"now-{n}"}}
        assert stack.request("POST", "/v2.1/flavors", ADMIN, json=body).status_code == 200
        assert f"now-{n}" in [f["id"] for f in stack.get("/v2.1/flavors/detail", P1).json["flavors"]]
        specs = {"extra_specs": {"hw:n": str(n)}}
        assert (
            stack.request("POST", f"/v2.1/flavors/now-{n}/os-extra_specs", ADMIN, json=specs).status_code
            == 200
        )
        assert stack.get(f"/v2.1/flavors/now-{n}/os-extra_specs", P1).json == specs


def test_reset_state_restore_and_force_delete(stack: Stack, server: tuple[str, int]) -> None:
    sid, _ = server
    action = f"/v2.1/servers/{sid}/action"
    reset = {"os-resetState": {"state": "error"}}
    assert stack.request("POST", action, P1, json=reset).status_code == 403  # admins only
    r = stack.request("POST", action, ADMIN, json=reset)
    assert r.status_code == 202, r.text
    shown = stack.get(f"/v2.1/servers/{sid}", ADMIN, after=_position(r)).json["server"]
    assert (shown["status"], shown["OS-EXT-STS:task_state"]) == ("ERROR", None)
    gone = stack.request("POST", f"/v2.1/servers/{uuid.uuid4()}/action", ADMIN, json=reset)
    assert gone.status_code == 404
    bad = stack.request("POST", action, ADMIN, json={"os-resetState": {"state": "paused"}})
    assert bad.status_code == 400
    restored = stack.request("POST", action, P1, json={"restore": None})
    assert restored.status_code == 409 and "restore" in restored.text  # nothing is ever soft-deleted
    r = stack.request("POST", action, ADMIN, json={"os-resetState": {"state": "active"}})
    assert stack.get(f"/v2.1/servers/{sid}", ADMIN, after=_position(r)).json["server"]["status"] == "ACTIVE"
    assert stack.request("POST", action, P1, json={"unlock": None}).status_code == 202
    r = stack.request("POST", action, P1, json={"forceDelete": None})
    assert r.status_code == 202, r.text
    assert (
        stack.get(f"/v2.1/servers/{sid}", P1, after=_position(r)).json["server"]["OS-EXT-STS:task_state"]
        == "deleting"
    )


def test_list_filters_by_flavor_image_and_lock_and_metadata_quota(
    stack: Stack, server: tuple[str, int]
) -> None:
    sid, after = server
    stack.flavor(id="other", name="other")
    r = stack.request(
        "POST",
        "/v2.1/servers",
        at(stack, P1, "2.52"),
        json={"server": {"name": "b", "flavorRef": "other", "networks": "none"}},
    )
    other, after = r.json["server"]["id"], _position(r)

    def ids(query: str, version: str = "2.1") -> list[str]:
        found = stack.get(f"/v2.1/servers?{query}", at(stack, P1, version, after))
        assert found.status_code == 200, found.text
        return [s["id"] for s in found.json["servers"]]

    assert ids("flavor=contract") == [sid] and ids("flavor=other") == [other]
    assert ids("flavor=http://x/flavors/other") == [other]
    assert ids("locked=true", "2.73") == [sid] and ids("locked=false", "2.73") == [other]
    many = {
        "server": {
            "name": "m",
            "flavorRef": "other",
            "networks": "none",
            "metadata": {str(i): "v" for i in range(129)},
        }
    }
    r = stack.request("POST", "/v2.1/servers", at(stack, P1, "2.52"), json=many)
    assert r.status_code == 403 and "metadata_items" in r.text, r.text


def test_nova_image_proxy_until_2_35(stack: Stack) -> None:
    """Nova's /v2.1/images, answered from Stratus's image service: shapes, filters, metadata, delete."""
    image = upload(stack, b"disk", P1, name="proxied", min_ram=64)["id"]
    other = upload(stack, b"disk", P2, name="theirs")["id"]
    client = "images_client"
    old = at(stack, P1, "2.35")
    listed = stack.get("/v2.1/images", old)
    nova_schemas.check(client, "list_images", "2.35", listed.status_code, listed.json)
    assert image in [i["id"] for i in listed.json["images"]] and other not in [
        i["id"] for i in listed.json["images"]
    ]
    detail = stack.get("/v2.1/images/detail?minRam=64&status=ACTIVE", old)
    nova_schemas.check(
        client,
        "list_images",
        "2.35",
        detail.status_code,
        {"images": [{k: i[k] for k in ("id", "links", "name")} for i in detail.json["images"]]},
    )
    assert [i["id"] for i in detail.json["images"]] == [image]
    shown = stack.get(f"/v2.1/images/{image}", old)
    nova_schemas.check(client, "get_image", "2.35", shown.status_code, shown.json)
    assert (shown.json["image"]["status"], shown.json["image"]["minRam"]) == ("ACTIVE", 64)
    assert stack.get(f"/v2.1/images/{other}", old).status_code == 404
    r = stack.request("PUT", f"/v2.1/images/{image}/metadata", old, json={"metadata": {"a": "1", "b": "2"}})
    nova_schemas.check(client, "image_metadata", "2.35", r.status_code, r.json)
    r = stack.request("POST", f"/v2.1/images/{image}/metadata", old, json={"metadata": {"b": "3"}})
    assert r.json == {"metadata": {"a": "1", "b": "3"}}
    r = stack.request("PUT", f"/v2.1/images/{image}/metadata/c", old, json={"meta": {"c": "4"}})
    nova_schemas.check(client, "image_meta_item", "2.35", r.status_code, r.json)
    assert (
        stack.request("PUT", f"/v2.1/images/{image}/metadata/c", old, json={"meta": {"d": "4"}}).status_code
        == 400
    )
    assert stack.request("DELETE", f"/v2.1/images/{image}/metadata/a", old).status_code == 204
    assert stack.get(f"/v2.1/images/{image}/metadata", old).json == {"metadata": {"b": "3", "c": "4"}}
    assert stack.get(f"/v2.1/images/{image}/metadata/b", old).json == {"meta": {"b": "3"}}
    assert stack.get("/v2.1/images", at(stack, P1, "2.36")).status_code == 404
    assert stack.request("DELETE", f"/v2.1/images/{image}", old).status_code == 204
    assert stack.get(f"/v2.1/images/{image}", old).status_code == 404


def test_destinations_and_zone_pins(stack: Stack, server: tuple[str, int]) -> None:
    """2.74's host at create (admins), 2.77/2.91's zone and host at unshelve, 2.104's pin."""
    sid, _ = server
    body = {"server": {"name": "h", "flavorRef": "contract", "networks": "none", "host": "cmp-contract"}}
    assert stack.request("POST", "/v2.1/servers", at(stack, ADMIN, "2.73"), json=body).status_code == 400
    assert stack.request("POST", "/v2.1/servers", at(stack, P1, "2.74"), json=body).status_code == 403
    r = stack.request("POST", "/v2.1/servers", at(stack, ADMIN, "2.74"), json=body)
    assert r.status_code == 202, r.text
    assert stack.handlers.instance(r.json["server"]["id"]).requested_host == "cmp-contract"
    body["server"]["host"] = "nowhere"
    assert stack.request("POST", "/v2.1/servers", at(stack, ADMIN, "2.74"), json=body).status_code == 400

    stack.handlers.start_spawning(StartSpawning(sid, "cmp-contract"))
    stack.handlers.finish_spawning(FinishSpawning(sid, PowerState.RUNNING))
    assert stack.request("POST", f"/v2.1/servers/{sid}/action", P1, json={"unlock": None}).status_code == 202
    lifecycle = LifecycleHandlers(stack.handlers)
    # 2.104: the server is in the default zone, pinned to none
    pin = {"server": {"pinned_availability_zone": "nova"}}
    assert stack.request("PUT", f"/v2.1/servers/{sid}", at(stack, P1, "2.103"), json=pin).status_code == 400
    r = stack.request("PUT", f"/v2.1/servers/{sid}", at(stack, P1, "2.104"), json=pin)
    assert r.status_code == 200 and r.json["server"]["pinned_availability_zone"] == "nova", r.text
    elsewhere = {"server": {"pinned_availability_zone": "elsewhere"}}
    assert (
        stack.request("PUT", f"/v2.1/servers/{sid}", at(stack, P1, "2.104"), json=elsewhere).status_code
        == 409
    )
    unpin = {"server": {"pinned_availability_zone": None}}
    r = stack.request("PUT", f"/v2.1/servers/{sid}", at(stack, P1, "2.104"), json=unpin)
    assert r.status_code == 200 and r.json["server"]["pinned_availability_zone"] is None

    r = stack.request("POST", f"/v2.1/servers/{sid}/action", P1, json={"shelve": None})
    assert r.status_code == 202, r.text
    lifecycle.finish_offload(FinishAction(sid, "shelve", PowerState.SHUTDOWN))
    action = f"/v2.1/servers/{sid}/action"
    zoned = {"unshelve": {"availability_zone": "nova"}}
    assert stack.request("POST", action, at(stack, P1, "2.76"), json=zoned).status_code == 400
    hosted = {"unshelve": {"host": "cmp-contract"}}
    assert stack.request("POST", action, at(stack, P1, "2.91"), json=hosted).status_code == 403
    assert (
        stack.request(
            "POST", action, at(stack, ADMIN, "2.91"), json={"unshelve": {"host": "nowhere"}}
        ).status_code
        == 400
    )
    r = stack.request(
        "POST",
        action,
        at(stack, ADMIN, "2.91"),
        json={"unshelve": {"availability_zone": "nova", "host": "cmp-contract"}},
    )
    assert r.status_code == 202, r.text
    inst = stack.handlers.instance(sid)
    assert (inst.requested_host, inst.availability_zone) == ("cmp-contract", "nova")
    shown = stack.get(f"/v2.1/servers/{sid}", at(stack, P1, "2.96", _position(r))).json["server"]
    assert shown["pinned_availability_zone"] == "nova"


def test_quota_class_sets_are_every_projects_defaults(stack: Stack) -> None:
    client = "quota_classes_client"
    p1 = stack.project_id("p1")
    for version in nova_schemas.boundaries(client):
        shown = stack.get("/v2.1/os-quota-class-sets/default", at(stack, ADMIN, version))
        nova_schemas.check(client, "get_quota_class_set", version, shown.status_code, shown.json)
        body = {"quota_class_set": {"instances": 7, "cores": 30}}
        updated = stack.request(
            "PUT", "/v2.1/os-quota-class-sets/default", at(stack, ADMIN, version), json=body
        )
        nova_schemas.check(client, "update_quota_class_set", version, updated.status_code, updated.json)
    assert stack.get("/v2.1/os-quota-class-sets/default", P1).status_code == 403
    old_keys = {"quota_class_set": {"injected_files": 3}}
    r = stack.request("PUT", "/v2.1/os-quota-class-sets/default", at(stack, ADMIN, "2.57"), json=old_keys)
    assert r.status_code == 400
    # the default class's limits are the defaults of every project that has not set its own
    quota = stack.get(f"/v2.1/os-quota-sets/{p1}", P1).json["quota_set"]
    assert (quota["instances"], quota["cores"]) == (7, 30)
    assert stack.get(f"/v2.1/os-quota-sets/{p1}/defaults", P1).json["quota_set"]["instances"] == 7
    assert stack.get("/v2.1/limits", P1).json["limits"]["absolute"]["maxTotalInstances"] == 7
    assert stack.handlers.limits(p1)["instances"] == 7  # what a create is checked against
    own = {"quota_set": {"instances": 9}}
    assert (
        stack.request("PUT", f"/v2.1/os-quota-sets/{p1}", ADMIN, json=own).json["quota_set"]["instances"] == 9
    )
    assert stack.handlers.limits(p1)["instances"] == 9 and stack.handlers.limits(p1)["cores"] == 30


def test_a_projects_users_read_each_others_and_an_admins_writes(
    stack: Stack, server: tuple[str, int]
) -> None:
    """Nova's users of one project share a database: Stratus's read of any of them waits for the
    project's last write through this process, and for an admin's write to one of its servers."""
    sid, _ = server
    for n in range(3):
        reset = {"os-resetState": {"state": "error" if n % 2 == 0 else "active"}}
        assert stack.request("POST", f"/v2.1/servers/{sid}/action", ADMIN, json=reset).status_code == 202
        shown = stack.get(f"/v2.1/servers/{sid}", P1).json["server"]  # no position named
        assert shown["status"] == ("ERROR" if n % 2 == 0 else "ACTIVE")


def test_servers_sorted_and_paged_by_nova_sort_keys(stack: Stack) -> None:
    stack.flavor(id="s1", name="s1")
    after = 0
    for name in ("b", "c", "a", "c"):
        body = {"server": {"name": name, "flavorRef": "s1", "networks": "none"}}
        r = stack.request("POST", "/v2.1/servers", at(stack, P1, "2.52"), json=body)
        assert r.status_code == 202, r.text
        after = _position(r)

    def names(query: str, who: str = P1) -> list[str]:
        r = stack.get(f"/v2.1/servers/detail?{query}", at(stack, who, "2.1", after))
        assert r.status_code == 200, r.text
        return [s["name"] for s in r.json["servers"]]

    assert names("sort_key=display_name&sort_dir=asc") == ["a", "b", "c", "c"]
    assert names("sort_key=display_name") == ["c", "c", "b", "a"]  # descending without a direction
    first = stack.get(
        "/v2.1/servers?sort_key=display_name&sort_dir=asc&limit=2", at(stack, P1, "2.1", after)
    ).json
    marker = first["servers"][-1]["id"]
    rest = names(f"sort_key=display_name&sort_dir=asc&marker={marker}")
    assert [s["name"] for s in first["servers"]] + rest == ["a", "b", "c", "c"]
    assert stack.get("/v2.1/servers?sort_key=bogus", at(stack, P1, "2.1", after)).status_code == 400
    assert stack.get("/v2.1/servers?sort_key=host", at(stack, P1, "2.1", after)).status_code == 403
    assert names("sort_key=vcpus&sort_dir=asc") == names("")  # ignored, as Nova ignores it


# -- tables: calls whose answers are checked one by one (tests/fixtures/http_table.py) ------------
def contract(stack: Stack) -> Values:
    sid, after = contract_server(stack)
    return {"server": sid, "after": after}


def project(stack: Stack) -> Values:
    return {"p1": stack.project_id("p1")}


SERVERS = "servers_client"  # tempest's client whose schemas hold the servers' answers
SERVER = "/v2.1/servers/{server}"
ACTIONS = "/v2.1/servers/{server}/os-instance-actions"


def server_bodies(who: str) -> list[Call]:
    """Show, list, list in detail and update at each microversion where tempest's schemas change."""
    return [
        Call(EVERY, "GET", SERVER, 200, (SERVERS, "get_server"), who=who,
             expect=lambda b, v: b["server"]["addresses"]["private"]),  # the setup's server has an address
        Call(EVERY, "GET", "/v2.1/servers/detail", 200, (SERVERS, "list_servers_detail"), who=who),
        Call(EVERY, "GET", "/v2.1/servers", 200, (SERVERS, "list_servers"), who=who),
        Call(EVERY, "PUT", SERVER, 200, (SERVERS, "update_server"), who=who,
             body={"server": {"name": "contract"}}),
    ]  # fmt: skip


def actions(body: Any) -> list[str]:
    return [a["action"] for a in body["instanceActions"]]


def instance_actions(who: str) -> list[Call]:
    return [
        Call(EVERY, "GET", ACTIONS, 200, (SERVERS, "list_instance_actions"), who=who,
             expect=lambda b, v: actions(b) == ["lock", "create"],  # newest first
             keep=lambda b: {"request_id": b["instanceActions"][-1]["request_id"]}),
        Call(EVERY, "GET", ACTIONS + "/{request_id}", 200, (SERVERS, "show_instance_action"), who=who),
        Call("2.58", "GET", ACTIONS + "?limit=1", who=who,
             expect=lambda b, v: actions(b) == ["lock"] and b["links"][0]["rel"] == "next",
             keep=lambda b: {"marker": b["instanceActions"][0]["request_id"]}),
        Call("2.58", "GET", ACTIONS + "?marker={marker}", who=who,
             expect=lambda b, v: actions(b) == ["create"]),
    ]  # fmt: skip


# os-server-password (api/server_password.py): nothing posted by the contract server's guest
PASSWORD = "/v2.1/servers/{server}/os-server-password"


def server_password(who: str) -> list[Call]:
    return [
        Call(EVERY, "GET", PASSWORD, 200, (SERVERS, "show_password"), who=who,
             expect=lambda b, v: b == {"password": ""}),
        Call(EVERY, "DELETE", PASSWORD, 204, (SERVERS, "server_actions_delete_password"), who=who),
        Call("2.1", "GET", "/v2.1/servers/nope/os-server-password", 404, who=who, fault=("itemNotFound",)),
    ]  # fmt: skip


# accessIPv4/v6 and the disk configuration as given (IPv6 canonical, as Nova), the password nowhere;
# from 2.90 a hostname set at update and shown to members too
CHANGE = {"server": {"hostname": "web-1", "accessIPv4": "2.2.2.2"}}
FQDN = {"server": {"hostname": "web-1.example.org"}}
DESCRIBED_FIELDS = [
    Call("2.89", "GET", SERVER, who=P1,
         expect=lambda b, v: (b["server"]["accessIPv4"], b["server"]["accessIPv6"])
         == ("1.1.1.1", "::babe:dc0c:1602")
         and b["server"]["OS-DCF:diskConfig"] == "AUTO"
         and "OS-EXT-SRV-ATTR:hostname" not in b["server"]),
    Call("2.1", "GET", "/v2.1/stratus/history/server/{server}",  # the password is on no event
         expect=lambda b, v: "never-kept" not in json.dumps(b)),
    Call("2.89", "PUT", SERVER, 400, who=P1, body=CHANGE),
    Call("2.90", "PUT", SERVER, 200, who=P1, body=CHANGE,
         expect=lambda b, v: (b["server"]["OS-EXT-SRV-ATTR:hostname"], b["server"]["accessIPv4"])
         == ("web-1", "2.2.2.2")),
    Call("2.93", "PUT", SERVER, 400, who=P1, body=FQDN),
    Call("2.94", "PUT", SERVER, 200, who=P1, body=FQDN),
]  # fmt: skip

OS_NETWORKS_UNTIL_2_35 = [
    Call("2.35", "GET", "/v2.1/os-networks", who=P1,
         expect=lambda b, v: [(n["label"], n["cidr"]) for n in b["networks"]] == [("private", None)]
         and "vlan" not in b["networks"][0],
         keep=lambda b: {"network": b["networks"][0]["id"]}),
    Call("2.35", "GET", "/v2.1/os-networks/{network}",
         expect=lambda b, v: b["network"]["label"] == "private" and "vlan" in b["network"]),
    Call("2.35", "GET", "/v2.1/os-networks/nope", 404, who=P1),
    Call("2.36", "GET", "/v2.1/os-networks", 404, who=P1),
    Call("2.35", "DELETE", "/v2.1/os-networks/{network}", 410),
]  # fmt: skip


def listed(version: str, who: str, query: str, *ids: str) -> Call:
    """The detailed server list with ``query`` shows exactly the servers ``ids`` (formatted)."""

    def shows(body: Any, values: Values) -> bool:
        return [s["id"] for s in body["servers"]] == [i.format(**values) for i in ids]

    return Call(version, "GET", f"/v2.1/servers/detail?{query}", who=who, expect=shows)


# Nova's list filters on a server's columns (members only some before 2.83); unknown parameters
# ignored before 2.75 and refused from it; joined-table filters refused always
LIST_QUERY_PARAMETERS = [
    listed("2.1", ADMIN, "all_tenants=1&vm_state=building", "{server}"),
    listed("2.1", ADMIN, "all_tenants=1&vm_state=active"),
    listed("2.1", ADMIN, "all_tenants=1&uuid={server}", "{server}"),
    listed("2.1", ADMIN, "all_tenants=1&access_ip_v4=^1\\.1", "{server}"),
    listed("2.1", ADMIN, "all_tenants=1&node=cmp-contract", "{server}"),
    listed("2.82", P1, "vm_state=active", "{server}"),  # a member's vm_state filter: dropped before 2.83
    listed("2.83", P1, "vm_state=active"),
    listed("2.74", P1, "bogus=1", "{server}"),
    Call("2.75", "GET", "/v2.1/servers?bogus=1", 400, who=P1),
    Call("2.1", "GET", "/v2.1/servers?metadata=x", 400, who=P1),
    listed("2.66", ADMIN, "all_tenants=1&changes-before=2000-01-01T00:00:00Z"),
]

SMALL_ROUTES = ("/v2.1/os-keypairs", "/v2.1/limits", "/v2.1/os-quota-sets/{p1}", "/v2.1/os-server-groups")
UNKNOWN_QUERY_PARAMETERS_FROM_2_102 = [
    *(
        call
        for path in SMALL_ROUTES
        for call in (
            Call("2.101", "GET", f"{path}?bogus=1", who=P1),
            Call("2.102", "GET", f"{path}?bogus=1", 400, who=P1, expect=lambda b, v: "bogus" in str(b)),
        )
    ),
    Call("2.102", "GET", "/v2.1/os-keypairs?limit=1&min_position=0", who=P1),
    Call("2.102", "GET", "/v2.1/os-services?binary=nova-compute"),
]

TABLES: dict[str, tuple[Callable[[Stack], Values], list[Call]]] = {
    "server bodies as an admin": (contract, server_bodies(ADMIN)),
    "server bodies as a member": (contract, server_bodies(P1)),
    "instance actions as an admin": (contract, instance_actions(ADMIN)),
    "instance actions as a member": (contract, instance_actions(P1)),
    "server password as an admin": (contract, server_password(ADMIN)),
    "server password as a member": (contract, server_password(P1)),
    "described fields kept and changed": (contract, DESCRIBED_FIELDS),
    "os-networks until 2.35": (lambda stack: {}, OS_NETWORKS_UNTIL_2_35),
    "list query parameters as Nova takes them": (contract, LIST_QUERY_PARAMETERS),
    "unknown query parameters refused from 2.102": (project, UNKNOWN_QUERY_PARAMETERS_FROM_2_102),
}


@pytest.mark.parametrize("table", TABLES)
def test_shapes_per_microversion(stack: Stack, table: str) -> None:
    setup, calls = TABLES[table]
    run(stack, calls, **setup(stack))
