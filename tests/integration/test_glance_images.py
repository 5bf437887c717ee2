"""Glance v2 as operators use it: image updates (JSON patch), tags, deactivation, sharing between
projects (members) and Glance's schemas, against the real JetStream, PostgreSQL and projector.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fixtures.api import ADMIN, P1, P2, Stack, upload

PATCH_V21 = "application/openstack-images-v2.1-json-patch"
PATCH_V20 = "application/openstack-images-v2.0-json-patch"


def create(stack: Stack, who: str = P1, **fields: Any) -> dict[str, Any]:
    body = {"name": "img", "disk_format": "raw", "container_format": "bare", **fields}
    r = stack.request("POST", "/image/v2/images", who, json=body)
    assert r.status_code == 201, r.text
    return dict(r.json)


def project_of(stack: Stack, who: str) -> str:
    """The project id of a persona (the owner of an image it makes)."""
    return str(create(stack, who)["owner"])


def patch(stack: Stack, iid: str, ops: list[dict[str, Any]], who: str = P1, media: str = PATCH_V21) -> Any:
    headers = {**stack.headers(who), "Content-Type": media}
    return stack.client.simulate_patch(f"/image/v2/images/{iid}", headers=headers, body=json.dumps(ops))


def listed(stack: Stack, who: str, after: Any, query: str = "") -> list[str]:
    r = stack.get(f"/image/v2/images{query}", who, after=int(after))
    assert r.status_code == 200, r.text
    return [i["id"] for i in r.json["images"]]


def test_patch_changes_base_and_additional_properties(stack: Stack) -> None:
    iid = create(stack, hw_x="1")["id"]
    r = patch(
        stack,
        iid,
        [
            {"op": "replace", "path": "/name", "value": "renamed"},
            {"op": "add", "path": "/min_ram", "value": 128},
            {"op": "add", "path": "/os_distro", "value": "cirros"},
            {"op": "remove", "path": "/hw_x"},
            {"op": "replace", "path": "/tags", "value": ["a", "b", "a"]},
        ],
    )
    assert r.status_code == 200, r.text
    assert r.json["name"] == "renamed" and r.json["min_ram"] == 128 and r.json["os_distro"] == "cirros"
    assert "hw_x" not in r.json and r.json["tags"] == ["a", "b"]
    r = stack.get(f"/image/v2/images/{iid}", P1, after=int(r.headers["X-Stratus-Position"]))
    assert r.json["name"] == "renamed"
    # the older draft-4 form tempest sends
    r = patch(stack, iid, [{"replace": "/name", "value": "again"}], media=PATCH_V20)
    assert r.status_code == 200 and r.json["name"] == "again"
    r = stack.get("/image/v2/images?name=again", P1, after=int(r.headers["X-Stratus-Position"]))
    assert [i["id"] for i in r.json["images"]] == [iid] and r.json["images"][0]["os_distro"] == "cirros"


@pytest.mark.parametrize(
    ("ops", "status"),
    [
        ([{"op": "replace", "path": "/id", "value": "x"}], 403),
        ([{"op": "replace", "path": "/status", "value": "active"}], 403),
        ([{"op": "replace", "path": "/checksum", "value": "x"}], 403),
        ([{"op": "replace", "path": "/owner", "value": "p2"}], 403),
        ([{"op": "remove", "path": "/name"}], 403),
        ([{"op": "replace", "path": "/nothere", "value": "x"}], 409),
        ([{"op": "remove", "path": "/nothere"}], 409),
        ([{"op": "replace", "path": "/visibility", "value": "public"}], 403),
        ([{"op": "replace", "path": "/visibility", "value": "nope"}], 400),
        ([{"op": "replace", "path": "/protected", "value": "yes"}], 400),
        ([{"op": "move", "path": "/name", "value": "x"}], 400),
        ([{"op": "replace", "path": "name", "value": "x"}], 400),
        ([{"op": "replace", "path": "/a/b", "value": "x"}], 400),
        ({"op": "replace"}, 400),
        ([{"op": "add", "path": "/os_glance_x", "value": "x"}], 403),
    ],
)
def test_patch_refusals_are_glances(stack: Stack, ops: Any, status: int) -> None:
    iid = create(stack)["id"]
    assert patch(stack, iid, ops).status_code == status


def test_patch_needs_glances_media_type_and_the_owner(stack: Stack) -> None:
    iid = create(stack)["id"]
    r = patch(stack, iid, [{"op": "replace", "path": "/name", "value": "x"}], media="application/json")
    assert r.status_code == 415 and PATCH_V21 in r.headers["Accept-Patch"]
    assert patch(stack, iid, [{"op": "replace", "path": "/name", "value": "x"}], who=P2).status_code == 404


def test_formats_change_only_while_queued(stack: Stack) -> None:
    iid = upload(stack, b"data", P1)["id"]
    r = patch(stack, iid, [{"op": "replace", "path": "/disk_format", "value": "qcow2"}])
    assert r.status_code == 403, r.text


def test_owner_in_create_and_patch_is_an_admins(stack: Stack) -> None:
    p1, p2 = project_of(stack, P1), project_of(stack, P2)
    r = stack.request("POST", "/image/v2/images", P1, json={"name": "x", "owner": p2})
    assert r.status_code == 403
    assert create(stack, P1, owner=p1)["owner"] == p1
    iid = create(stack, ADMIN, owner="someone")["id"]
    r = patch(stack, iid, [{"op": "replace", "path": "/owner", "value": p2}], who=ADMIN)
    assert r.status_code == 200 and r.json["owner"] == p2
    assert stack.get(f"/image/v2/images/{iid}", P2).status_code == 200


def test_protected_image_is_deleted_once_unprotected(stack: Stack) -> None:
    iid = create(stack, protected=True)["id"]
    assert stack.request("DELETE", f"/image/v2/images/{iid}", P1).status_code == 403
    assert patch(stack, iid, [{"op": "replace", "path": "/protected", "value": False}]).status_code == 200
    assert stack.request("DELETE", f"/image/v2/images/{iid}", P1).status_code == 204


def test_tags(stack: Stack) -> None:
    iid = create(stack)["id"]
    r = stack.request("PUT", f"/image/v2/images/{iid}/tags/blue", P1)
    assert r.status_code == 204
    assert stack.get(f"/image/v2/images/{iid}", P1).json["tags"] == ["blue"]
    assert iid in listed(stack, P1, r.headers["X-Stratus-Position"], "?tag=blue")
    assert stack.request("PUT", f"/image/v2/images/{iid}/tags/blue", P2).status_code == 404
    assert stack.request("DELETE", f"/image/v2/images/{iid}/tags/red", P1).status_code == 404
    assert stack.request("DELETE", f"/image/v2/images/{iid}/tags/blue", P1).status_code == 204
    assert stack.get(f"/image/v2/images/{iid}", P1).json["tags"] == []


def test_hidden_images_are_listed_when_asked_for(stack: Stack) -> None:
    iid = create(stack, os_hidden=True)["id"]
    other = create(stack)
    r = patch(stack, other["id"], [{"op": "replace", "path": "/os_hidden", "value": True}])
    assert r.status_code == 200 and r.json["os_hidden"] is True
    pos = r.headers["X-Stratus-Position"]
    assert iid not in listed(stack, P1, pos) and other["id"] not in listed(stack, P1, pos)
    assert {iid, other["id"]} <= set(listed(stack, P1, pos, "?os_hidden=true"))


def test_deactivated_image_cannot_be_downloaded_until_reactivated(stack: Stack) -> None:
    iid = upload(stack, b"data", P1)["id"]
    assert stack.request("POST", f"/image/v2/images/{iid}/actions/deactivate", P1).status_code == 204
    assert stack.get(f"/image/v2/images/{iid}", P1).json["status"] == "deactivated"
    assert stack.get(f"/image/v2/images/{iid}/file", P1).status_code == 403
    assert stack.get(f"/image/v2/images/{iid}/file", ADMIN).status_code == 200
    assert stack.request("POST", f"/image/v2/images/{iid}/actions/reactivate", P2).status_code == 404
    assert stack.request("POST", f"/image/v2/images/{iid}/actions/reactivate", P1).status_code == 204
    assert stack.get(f"/image/v2/images/{iid}/file", P1).content == b"data"


def test_sharing_with_a_member_project(stack: Stack) -> None:
    p2 = project_of(stack, P2)
    iid = create(stack)["id"]  # Glance's default visibility: shared
    members = f"/image/v2/images/{iid}/members"
    r = stack.request("POST", members, P1, json={"member": p2})
    assert r.status_code == 200, r.text
    assert r.json["member_id"] == p2 and r.json["image_id"] == iid and r.json["status"] == "pending"
    assert set(r.json) == {"member_id", "image_id", "status", "created_at", "updated_at", "schema"}
    assert stack.request("POST", members, P1, json={"member": p2}).status_code == 409
    pos = r.headers["X-Stratus-Position"]
    assert iid not in listed(stack, P2, pos)
    assert iid in listed(stack, P2, pos, "?visibility=shared&member_status=pending")
    assert stack.get(f"/image/v2/images/{iid}", P2).status_code == 200  # a member sees it
    # only the member answers; only with a status Glance knows
    assert stack.request("PUT", f"{members}/{p2}", P1, json={"status": "accepted"}).status_code == 403
    assert stack.request("PUT", f"{members}/{p2}", P2, json={"status": "nope"}).status_code == 400
    r = stack.request("PUT", f"{members}/{p2}", P2, json={"status": "accepted"})
    assert r.status_code == 200 and r.json["status"] == "accepted"
    assert iid in listed(stack, P2, r.headers["X-Stratus-Position"])
    assert stack.get(f"{members}/{p2}", P2).json["status"] == "accepted"
    assert [m["member_id"] for m in stack.get(members, P1).json["members"]] == [p2]
    assert stack.get(members, P2).json["schema"] == "/v2/schemas/members"
    # only the owner adds and removes
    assert stack.request("POST", members, P2, json={"member": "p3"}).status_code == 403
    assert stack.request("DELETE", f"{members}/{p2}", P2).status_code == 403
    r = stack.request("DELETE", f"{members}/{p2}", P1)
    assert r.status_code == 204
    gone = r.headers["X-Stratus-Position"]
    assert iid not in listed(stack, P2, gone, "?member_status=all&visibility=shared")
    assert stack.get(f"/image/v2/images/{iid}", P2).status_code == 404


def test_only_shared_images_have_members(stack: Stack) -> None:
    iid = create(stack, visibility="private")["id"]
    r = stack.request("POST", f"/image/v2/images/{iid}/members", P1, json={"member": "p2"})
    assert r.status_code == 403
    assert stack.get(f"/image/v2/images/{iid}/members", P1).status_code == 403
    assert stack.get(f"/image/v2/images/{iid}/members/p2", P1).status_code == 404
    for body in ({}, {"member": ""}, {"member": 5}, []):
        assert stack.request("POST", f"/image/v2/images/{iid}/members", P1, json=body).status_code == 400


def test_a_member_boots_a_shared_image(stack: Stack) -> None:
    p2 = project_of(stack, P2)
    iid = upload(stack, b"\0" * 512, P1)["id"]
    r = stack.request("POST", f"/image/v2/images/{iid}/members", P1, json={"member": p2})
    assert r.status_code == 200
    stack.request("PUT", f"/image/v2/images/{iid}/members/{p2}", P2, json={"status": "accepted"})
    flavor, _ = stack.flavor()
    body = {"server": {"name": "vm", "flavorRef": flavor, "imageRef": iid}}
    r = stack.request("POST", "/v2.1/servers", P2, json=body)
    assert r.status_code == 202, r.text


@pytest.mark.parametrize(
    "name",
    ["image", "images", "member", "members", "task", "tasks", "metadefs/namespace", "metadefs/tags"],
)
def test_glances_schemas(stack: Stack, name: str) -> None:
    r = stack.get(f"/image/v2/schemas/{name}", P2)
    assert r.status_code == 200 and r.json["name"] == name.split("/")[-1]
    assert stack.get("/image/v2/schemas/nope", P2).status_code == 404


# -- tasks ----------------------------------------------------------------------------------------
def import_task(url: str) -> dict[str, Any]:
    props = {"container_format": "bare", "disk_format": "qcow2", "name": "t"}
    return {
        "type": "import",
        "input": {"image_properties": props, "import_from_format": "qcow2", "import_from": url},
    }


def test_tasks_are_an_admins_and_an_import_from_a_url_fails(stack: Stack) -> None:
    assert stack.get("/image/v2/tasks", P1).status_code == 403
    assert (
        stack.request("POST", "/image/v2/tasks", P1, json=import_task("http://127.0.0.1/x")).status_code
        == 403
    )
    # Glance refuses at once a source it would never fetch: a host that does not resolve, a file
    for url in ("http://no-such-host.invalid/x.qcow2", "file:///etc/passwd", "ftp://127.0.0.1/x", ""):
        r = stack.request("POST", "/image/v2/tasks", ADMIN, json=import_task(url))
        assert r.status_code == 400, (url, r.text)
    assert stack.request("POST", "/image/v2/tasks", ADMIN, json={"type": "import"}).status_code == 400
    assert stack.request("POST", "/image/v2/tasks", ADMIN, json={"type": "x", "input": {}}).status_code == 400
    # any other is recorded, and fails: Stratus imports no image from a URL
    r = stack.request("POST", "/image/v2/tasks", ADMIN, json=import_task("http://127.0.0.1/x.qcow2"))
    assert r.status_code == 201, r.text
    task = r.json
    assert task["status"] == "failure" and task["type"] == "import" and task["message"]
    assert task["self"] == f"/v2/tasks/{task['id']}" and "expires_at" in task
    assert stack.get(f"/image/v2/tasks/{task['id']}", ADMIN).json == task
    assert stack.get(f"/image/v2/tasks/{task['id']}", P1).status_code == 403
    assert stack.get("/image/v2/tasks/00000000-0000-0000-0000-000000000000", ADMIN).status_code == 404
    r = stack.get("/image/v2/tasks", ADMIN, after=int(r.headers["X-Stratus-Position"]))
    assert r.status_code == 200 and task["id"] in [t["id"] for t in r.json["tasks"]]
    assert r.json["schema"] == "/v2/schemas/tasks" and "input" not in r.json["tasks"][0]
    assert stack.get("/image/v2/tasks?status=failure&type=import", ADMIN).status_code == 200
    assert stack.get("/image/v2/tasks?status=nope", ADMIN).status_code == 400


def test_versions_are_public_and_an_empty_id_is_no_image(stack: Stack) -> None:
    assert stack.client.simulate_get("/image").status_code == 300
    assert stack.get("/image/v2/images/", P1).status_code == 404


def test_a_listed_image_is_the_image_shown(stack: Stack) -> None:
    """The lists read images as their views show them (times formatted by PostgreSQL, the id as
    text); one image shown is made from its aggregate in Python: both give the same body, in
    Glance's API and in Nova's image proxy."""
    made = create(stack, tags=["x"], hw_disk_bus="scsi", os_distro="debian")
    r = patch(stack, made["id"], [{"op": "add", "path": "/min_ram", "value": 64}])
    assert r.status_code == 200, r.text
    after = int(r.headers["X-Stratus-Position"])
    shown = stack.get(f"/image/v2/images/{made['id']}", P1, after=after).json
    assert [
        i for i in stack.get("/image/v2/images", P1, after=after).json["images"] if i["id"] == made["id"]
    ] == [shown]
    assert shown["created_at"].endswith("Z") and len(shown["created_at"]) == 20
    nova = stack.get(f"/v2.1/images/{made['id']}", P1, after=after).json["image"]
    listed = [
        i for i in stack.get("/v2.1/images/detail", P1, after=after).json["images"] if i["id"] == made["id"]
    ]
    assert listed == [nova] and (nova["created"], nova["updated"]) == (
        shown["created_at"],
        shown["updated_at"],
    )
