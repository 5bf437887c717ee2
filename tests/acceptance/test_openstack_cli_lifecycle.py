"""Acceptance: server actions, instance actions, console output and console URLs with the stock
``openstack`` CLI against a whole Stratus (the processes of ``test_openstack_cli``; a hypervisor on
libvirt's test driver)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from api.metadata.passwords import password_store
from tests.fixtures.deployed import HOST, Cloud, wait_for

pytestmark = pytest.mark.slow


def test_server_actions_with_the_cli(cloud: Cloud, tmp_path: Path) -> None:
    cloud.openstack("flavor", "create", "--ram", "256", "--disk", "1", "--vcpus", "1", "tiny")
    cloud.openstack(
        "image", "create", "--file", str(cloud.image_file), "--disk-format", "raw",
        "--container-format", "bare", "img",
    )  # fmt: skip
    wait_for("the hypervisor", lambda: cloud.openstack("hypervisor", "list"))
    server = cloud.openstack("server", "create", "--flavor", "tiny", "--image", "img", "--wait", "vm")
    assert server["status"] == "ACTIVE"

    cloud.openstack_quiet("server", "stop", "vm")
    assert cloud.settled("vm", "SHUTOFF")["OS-EXT-STS:power_state"] in ("Shutdown", 4)
    assert "vm_state stopped" in cloud.openstack_fails("server", "stop", "vm")
    cloud.openstack_quiet("server", "start", "vm")
    cloud.settled("vm", "ACTIVE")
    cloud.openstack_quiet("server", "reboot", "--hard", "vm")
    cloud.settled("vm", "ACTIVE")
    cloud.openstack_quiet("server", "lock", "vm")
    cloud.openstack_quiet("server", "unlock", "vm")
    cloud.openstack(
        "image", "create", "--file", str(cloud.image_file), "--disk-format", "raw",
        "--container-format", "bare", "img2",
    )  # fmt: skip
    rebuilt = cloud.openstack("server", "rebuild", "--image", "img2", "vm")
    # the CLI shows the server as it reads it back: still rebuilding, or already done on the test driver
    assert rebuilt["image"].startswith("img2") and rebuilt["status"] in ("REBUILD", "ACTIVE"), rebuilt
    assert cloud.settled("vm", "ACTIVE")["image"].startswith("img2")

    events = cloud.openstack("server", "event", "list", "vm")
    actions = [e["Action"] for e in events]
    assert actions == ["rebuild", "unlock", "lock", "reboot", "start", "stop", "create"], actions
    stop = next(e for e in events if e["Action"] == "stop")
    shown = cloud.openstack("server", "event", "show", "vm", stop["Request ID"])
    assert shown["action"] == "stop" and shown["request_id"] == stop["Request ID"]
    (event,) = shown["events"]
    assert event["event"] == "compute_stop_instance" and event["result"] == "Success"

    log = tmp_path / "data" / "instances" / HOST / server["id"] / "console.log"
    log.write_text("Linux version 6.1\nSTRATUS-GUEST-READY\n")
    done = cloud.run("console", "log", "show", "--lines", "1", "vm")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "STRATUS-GUEST-READY"

    # the consoles' URLs, each with its own one-use token (docs/consoles.md)
    serial = cloud.openstack("console", "url", "show", "--serial", "vm")
    assert (serial["protocol"], serial["type"]) == ("serial", "serial"), serial
    assert serial["url"].startswith("ws://127.0.0.1:6083/?token="), serial
    novnc = cloud.openstack("console", "url", "show", "--novnc", "vm")
    assert (novnc["protocol"], novnc["type"]) == ("vnc", "novnc"), novnc
    assert novnc["url"].startswith("http://127.0.0.1:6080/vnc_lite.html?path=%3Ftoken%3D"), novnc
    assert "400" in cloud.openstack_fails("console", "url", "show", "--spice", "vm")

    cloud.openstack_quiet("server", "delete", "--wait", "vm")


def _flavor(shown: dict[str, Any]) -> str:
    """The flavor's name as the CLI shows it (embedded in the server from microversion 2.47)."""
    flavor = shown["flavor"]
    return str(flavor["name"] if isinstance(flavor, dict) else flavor.split(" ")[0])


def test_resize_and_migrate_with_the_cli(cloud: Cloud) -> None:
    """Two hosts: a resize confirmed, a cold migration reverted, each seen by the CLI as Nova's."""
    cloud.start_hypervisor("cli-compute-2")
    cloud.openstack("flavor", "create", "--ram", "256", "--disk", "1", "--vcpus", "1", "tiny")
    cloud.openstack("flavor", "create", "--ram", "512", "--disk", "1", "--vcpus", "2", "small")
    cloud.openstack(
        "image", "create", "--file", str(cloud.image_file), "--disk-format", "raw",
        "--container-format", "bare", "img",
    )  # fmt: skip
    wait_for("two hypervisors", lambda: len(cloud.openstack("hypervisor", "list")) == 2 or None)
    server = cloud.openstack("server", "create", "--flavor", "tiny", "--image", "img", "--wait", "vm")
    first = cloud.openstack("server", "show", server["id"])["OS-EXT-SRV-ATTR:host"]

    cloud.openstack_quiet("server", "resize", "--flavor", "small", "--wait", "vm")
    resized = cloud.settled("vm", "VERIFY_RESIZE")
    assert resized["OS-EXT-SRV-ATTR:host"] != first
    assert _flavor(resized) == "small", resized["flavor"]
    (migration,) = cloud.openstack("server", "migration", "list", "--server", "vm")
    assert (migration["Status"], migration["Source Compute"]) == ("finished", first), migration
    cloud.openstack_quiet("server", "resize", "confirm", "vm")
    assert cloud.settled("vm", "ACTIVE")["OS-EXT-SRV-ATTR:host"] == resized["OS-EXT-SRV-ATTR:host"]
    assert "vm_state active" in cloud.openstack_fails("server", "resize", "confirm", "vm")  # Nova's 409

    cloud.openstack_quiet("server", "migrate", "--wait", "vm")
    migrated = cloud.settled("vm", "VERIFY_RESIZE")
    assert migrated["OS-EXT-SRV-ATTR:host"] == first and _flavor(migrated) == "small"
    cloud.openstack_quiet("server", "resize", "revert", "vm")
    reverted = cloud.settled("vm", "ACTIVE")
    assert reverted["OS-EXT-SRV-ATTR:host"] == resized["OS-EXT-SRV-ATTR:host"]
    statuses = sorted(m["Status"] for m in cloud.openstack("server", "migration", "list", "--server", "vm"))
    assert statuses == ["confirmed", "reverted"]

    actions = [e["Action"] for e in cloud.openstack("server", "event", "list", "vm")]
    assert actions == ["revertResize", "migrate", "confirmResize", "resize", "create"], actions
    cloud.openstack_quiet("server", "delete", "--wait", "vm")
    # the usage left the hypervisor's body at 2.88 (placement has it): the last version with it
    hypervisors = cloud.openstack("--os-compute-api-version", "2.87", "hypervisor", "list", "--long")
    assert all(h["vCPUs Used"] == 0 for h in hypervisors), hypervisors


def test_server_password_with_the_sdk_and_the_cli(cloud: Cloud, tmp_path: Path) -> None:
    """``os-server-password`` (api/server_password.py) through openstacksdk's ``get_server_password``
    and ``clear_server_password`` and the CLI's ``server set --no-password``; the password is posted
    to the store the metadata service keeps it in, as a guest's post would leave it."""
    cloud.openstack("flavor", "create", "--ram", "256", "--disk", "1", "--vcpus", "1", "tiny")
    cloud.openstack(
        "image", "create", "--file", str(cloud.image_file), "--disk-format", "raw",
        "--container-format", "bare", "img",
    )  # fmt: skip
    wait_for("the hypervisor", lambda: cloud.openstack("hypervisor", "list"))
    server = cloud.openstack("server", "create", "--flavor", "tiny", "--image", "img", "--wait", "vm")
    sdk = cloud.sdk()
    passwords = password_store(tmp_path / "data")
    assert sdk.compute.get_server_password(server["id"]) == ""

    passwords.set_once(server["id"], b"c2VjcmV0LWVuY3J5cHRlZA==")
    assert sdk.compute.get_server_password(server["id"]) == "c2VjcmV0LWVuY3J5cHRlZA=="
    assert cloud.openstack_quiet("server", "set", "--no-password", "vm") == ""
    assert sdk.compute.get_server_password(server["id"]) == ""
    passwords.set_once(server["id"], b"posted-again")  # the guest may post again once cleared
    assert sdk.compute.get_server_password(server["id"]) == "posted-again"
    sdk.compute.clear_server_password(server["id"])
    assert passwords.get(server["id"]) is None

    passwords.set_once(server["id"], b"last")
    cloud.openstack_quiet("server", "delete", "--wait", "vm")
    assert passwords.get(server["id"]) is None  # gone with the server
