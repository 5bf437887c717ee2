"""Acceptance: the stock ``openstack`` CLI and openstacksdk against a whole Stratus, as an operator uses it.

The API under gunicorn, the projector, the scheduler and a hypervisor worker on libvirt's test
driver run as ``stratus <part>`` processes on a real JetStream and PostgreSQL, with identity seeded
as ``stratus run`` seeds it. The CLI is the real ``openstack`` command in a subprocess, configured
only by ``OS_*`` variables with password auth (``HOME`` points at an empty directory, so no
clouds.yaml can interfere); every command's JSON output is checked, not only its exit status.

To extend: add a ``test_<area>_with_the_cli(cloud)`` that calls ``cloud.openstack(...)`` (JSON
back) or ``cloud.openstack_fails(...)`` (stderr back), and its openstacksdk twin with ``cloud.sdk()``.
"""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import openstack
import pytest

from tests.fixtures.deployed import HOST, Cloud, wait_for

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


# -- identity -------------------------------------------------------------------------------------
def test_identity_with_the_cli(cloud: Cloud) -> None:
    token = cloud.openstack("token issue")
    assert set(token) >= {"id", "expires", "project_id", "user_id"}
    assert len(token["project_id"]) == 32 and token["expires"] > time.strftime("%Y-%m-%dT%H:%M:%S")

    project = cloud.openstack("project", "create", "--description", "the web team", "web")
    assert project["name"] == "web" and project["enabled"] is True and project["domain_id"] == "default"
    assert project["description"] == "the web team"
    listed = {p["Name"]: p["ID"] for p in cloud.openstack("project", "list")}
    assert listed == {"admin": token["project_id"], "web": project["id"]}
    assert cloud.openstack("project", "show", "web")["id"] == project["id"]
    assert "409" in cloud.openstack_fails("project", "create", "web")

    user = cloud.openstack("user", "create", "--password", "alice-pw", "--project", "web", "alice")
    assert user["name"] == "alice" and user["enabled"] is True
    assert user["default_project_id"] == project["id"]
    assert "password" not in user
    assert {u["Name"] for u in cloud.openstack("user", "list")} == {"admin", "alice"}
    assert cloud.openstack("user", "show", "alice")["id"] == user["id"]

    roles = {r["Name"]: r["ID"] for r in cloud.openstack("role", "list")}
    assert set(roles) == {"admin", "manager", "member", "reader"}
    # Without a role in the project, alice cannot get a token scoped to it.
    alice = cloud.env("alice", "alice-pw", "web")
    cloud.openstack_fails("token", "issue", env=alice)
    assert cloud.openstack_quiet("role", "add", "--project", "web", "--user", "alice", "member") == ""

    assignments = cloud.openstack("role", "assignment", "list", "--project", "web", "--names")
    assert assignments == [
        {
            "Role": "member",
            "User": "alice@Default",
            "Group": "",
            "Project": "web@Default",
            "Domain": "",
            "System": "",
            "Inherited": False,
        }
    ]
    everyone = cloud.openstack("role", "assignment", "list")
    assert {(a["Role"], a["User"], a["Project"]) for a in everyone} == {
        (roles["admin"], token["user_id"], token["project_id"]),
        (roles["member"], user["id"], project["id"]),
    }

    # alice works in her project, and is not an admin.
    alice_token = cloud.openstack("token", "issue", env=alice)
    assert alice_token["user_id"] == user["id"] and alice_token["project_id"] == project["id"]
    # (openstack falls back to the projects she has roles in when she may not list them all)
    assert [p["Name"] for p in cloud.openstack("project", "list", env=alice)] == ["web"]
    assert "403" in cloud.openstack_fails("user", "list", env=alice)
    assert "403" in cloud.openstack_fails("hypervisor", "list", env=alice)

    # A revoked token stops working at once.
    doomed = cloud.openstack("token", "issue", env=alice)["id"]
    assert _status(cloud, "/v2.1/servers", doomed) == 200
    cloud.openstack_quiet("token", "revoke", doomed)
    assert _status(cloud, "/v2.1/servers", doomed) == 401

    # A disabled user can neither log in nor use the tokens she holds.
    held = alice_token["id"]
    assert _status(cloud, "/v2.1/servers", held) == 200
    cloud.openstack_quiet("user", "set", "--disable", "alice")
    assert cloud.openstack("user", "show", "alice")["enabled"] is False
    assert _status(cloud, "/v2.1/servers", held) == 401
    cloud.openstack_fails("token", "issue", env=alice)
    cloud.openstack_quiet("user", "set", "--enable", "alice")
    assert cloud.openstack("token", "issue", env=alice)["user_id"] == user["id"]


def _status(cloud: Cloud, path: str, token: str) -> int:
    req = urllib.request.Request(cloud.base + path, headers={"X-Auth-Token": token})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


# -- compute --------------------------------------------------------------------------------------
def test_compute_with_the_cli(cloud: Cloud) -> None:
    flavor = cloud.openstack(
        "flavor", "create", "--ram", "512", "--disk", "1", "--vcpus", "1", "--id", "m1.tiny", "m1.tiny"
    )
    assert (flavor["id"], flavor["ram"], flavor["vcpus"], flavor["disk"]) == ("m1.tiny", 512, 1, 1)
    assert [f["Name"] for f in cloud.openstack("flavor", "list")] == ["m1.tiny"]
    shown = cloud.openstack("flavor", "show", "m1.tiny")
    assert shown["name"] == "m1.tiny" and shown["os-flavor-access:is_public"] is True

    hypervisors = wait_for("the hypervisor to register", lambda: cloud.openstack("hypervisor", "list"))
    assert [h["Hypervisor Hostname"] for h in hypervisors] == [HOST]
    assert hypervisors[0]["State"] == "up"

    # A member of another project boots a server; the admin's project does not see it.
    cloud.openstack("project", "create", "dev")
    cloud.openstack("user", "create", "--password", "bob-pw", "--project", "dev", "bob")
    cloud.openstack_quiet("role", "add", "--project", "dev", "--user", "bob", "member")
    bob = cloud.env("bob", "bob-pw", "dev")
    image = cloud.openstack(
        "image", "create", "--file", str(cloud.image_file), "--disk-format", "raw",
        "--container-format", "bare", "tiny", env=bob,
    )  # fmt: skip
    assert image["status"] == "active" and image["name"] == "tiny"

    server = cloud.openstack(
        "server", "create", "--flavor", "m1.tiny", "--image", "tiny", "--wait", "vm1", env=bob
    )
    assert server["name"] == "vm1" and server["status"] == "ACTIVE"
    # the CLI negotiates 2.52: the flavor is embedded (2.47), by its original name
    flavor = server["flavor"]
    assert (flavor["original_name"], flavor["vcpus"], flavor["ram"]) == ("m1.tiny", 1, 512), flavor
    assert server["image"].startswith("tiny")

    listed = cloud.openstack("server", "list", env=bob)
    assert [(s["Name"], s["Status"], s["Image"], s["Flavor"]) for s in listed] == [
        ("vm1", "ACTIVE", "tiny", "m1.tiny")
    ]
    assert cloud.openstack("server", "list") == []  # the admin's own project
    everywhere = cloud.openstack("server", "list", "--all-projects")
    assert [s["ID"] for s in everywhere] == [server["id"]]
    assert "403" in cloud.openstack_fails("server", "list", "--all-projects", env=bob)

    shown = cloud.openstack("server", "show", "vm1", env=bob)
    assert shown["id"] == server["id"] and shown["status"] == "ACTIVE"
    assert shown["OS-EXT-STS:power_state"] in ("Running", 1)
    admin_view = cloud.openstack("server", "show", server["id"])
    assert admin_view["OS-EXT-SRV-ATTR:host"] == HOST

    # the hypervisor's usage left Nova's body at 2.88 (placement has it): ask for the last one with it
    (detail,) = cloud.openstack("--os-compute-api-version", "2.87", "hypervisor", "list", "--long")
    assert (detail["vCPUs Used"], detail["Memory MB Used"]) == (1, 512), detail

    # what needs a later microversion than 2.1: no network (2.37), tags (2.52), a description (2.19)
    bare = cloud.openstack(
        "server", "create", "--flavor", "m1.tiny", "--image", "tiny", "--nic", "none",
        "--tag", "blue", "--tag", "web", "--wait", "vm2", env=bob,
    )  # fmt: skip
    assert bare["status"] == "ACTIVE" and bare["addresses"] in ({}, "")
    cloud.openstack_quiet("server", "set", "--description", "no network here", "vm2", env=bob)
    bare = cloud.openstack("server", "show", "vm2", env=bob)
    assert (bare["description"], sorted(bare["tags"])) == ("no network here", ["blue", "web"])
    assert bare["locked"] is False
    cloud.openstack_quiet("server", "delete", "--wait", "vm2", env=bob)

    cloud.openstack_quiet("server", "delete", "--wait", "vm1", env=bob)
    assert cloud.openstack("server", "list", env=bob) == []
    assert "No Server found" in cloud.openstack_fails("server", "show", server["id"], env=bob)


# -- the same through openstacksdk ----------------------------------------------------------------
def test_the_same_with_openstacksdk(cloud: Cloud) -> None:
    admin = cloud.sdk()
    assert admin.compute.get_endpoint() == f"{cloud.base}/v2.1"
    identity: Any = admin.identity  # the v3 proxy (the SDK types it as v2 or v3)
    project = identity.create_project(name="sdk", domain_id="default", description="sdk team")
    assert "sdk" in {p.name for p in identity.projects()}
    user = identity.create_user(name="carol", password="carol-pw", default_project_id=project.id)
    assert identity.get_user(user.id).name == "carol"
    member = identity.find_role("member")
    identity.assign_project_role_to_user(project, user, member)
    assert identity.validate_user_has_project_role(project, user, member)

    flavor = admin.compute.create_flavor(name="sdk.tiny", ram=256, vcpus=1, disk=1)
    assert admin.compute.get_flavor(flavor.id).ram == 256

    carol = cloud.sdk("carol", "carol-pw", "sdk")
    image = carol.image.create_image(
        name="sdk-image", filename=str(cloud.image_file), disk_format="raw", container_format="bare"
    )
    assert carol.image.get_image(image.id).status == "active"
    # the SDK negotiates 2.52, where Nova requires networks (2.37)
    server = carol.compute.create_server(
        name="sdk-vm", flavor_id=flavor.id, image_id=image.id, networks="auto", tags=["sdk"]
    )
    server = carol.compute.wait_for_server(server, status="ACTIVE", wait=120)
    assert server.status == "ACTIVE" and server.project_id == project.id
    assert server.tags == ["sdk"] and server.flavor.original_name == "sdk.tiny" and server.is_locked is False
    assert [s.name for s in carol.compute.servers()] == ["sdk-vm"]
    assert [h.name for h in admin.compute.hypervisors()] == [HOST]
    with pytest.raises(openstack.exceptions.ForbiddenException):
        list(carol.compute.hypervisors())

    carol.compute.delete_server(server)
    carol.compute.wait_for_delete(server, wait=120)
    assert list(carol.compute.servers()) == []


def test_a_kept_alive_connection_outlives_the_sdks_poll_interval(cloud: Cloud) -> None:
    """The API's threaded workers keep connections alive; openstacksdk polls a server every 2 s on
    its pooled connection, so a server that closed idle connections after gunicorn's default 2 s
    met some polls with a connection being closed (a ConnectFailure, seen in CI)."""
    host, port = cloud.base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        for _ in range(2):
            conn.request("GET", "/")
            r = conn.getresponse()
            r.read()
            assert r.status == 200 and r.getheader("Connection", "").lower() != "close"
            time.sleep(2.5)  # idle longer than the sdk's interval between polls
    finally:
        conn.close()
