"""The stock ``openstack`` CLI against the running processes (gunicorn API, projector, scheduler and
a libvirt test-driver hypervisor, from ``tests.fixtures.deployed``): a key pair, an image uploaded from a
file, and a server booted from that image with that key, reaching ACTIVE with a fixed address.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import libvirt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from stratus.config import Settings
from tests.fixtures.deployed import Http, cli
from tests.fixtures.openstack_forks import OPENSTACK

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(OPENSTACK).exists(), reason="python-openstackclient is not installed"),
]


def test_keypair_image_and_server_with_them(
    parts: tuple[Settings, Http], compute: libvirt.virConnect, tmp_path: Path
) -> None:
    settings, http = parts
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    public = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    (tmp_path / "key.pub").write_text(public + " cli@test\n")
    data = os.urandom(256 * 1024)
    (tmp_path / "disk.img").write_bytes(data)

    kp = cli(http, tmp_path, "keypair", "create", "--public-key", "key.pub", "clikey", "-f", "json")
    assert kp["name"] == "clikey" and len(kp["fingerprint"].split(":")) == 16
    image = cli(
        http, tmp_path, "image", "create", "--file", "disk.img", "--disk-format", "raw",
        "--container-format", "bare", "cli-image", "-f", "json",
    )  # fmt: skip
    assert image["status"] == "active" and image["size"] == len(data)
    listed = cli(http, tmp_path, "image", "list", "-f", "json")
    assert "cli-image" in [i["Name"] for i in listed]

    cli(http, tmp_path, "flavor", "create", "--ram", "128", "--vcpus", "1", "--disk", "1", "cli.tiny")
    server = cli(
        http, tmp_path, "server", "create", "--flavor", "cli.tiny", "--image", "cli-image",
        "--key-name", "clikey", "--wait", "cli-vm", "-f", "json",
    )  # fmt: skip
    assert server["status"] == "ACTIVE"
    assert server["key_name"] == "clikey"
    shown = cli(http, tmp_path, "server", "show", "cli-vm", "-f", "json")
    addresses = shown["addresses"]
    assert "private" in (addresses if isinstance(addresses, dict) else {"private": addresses})
    assert "10.0.0." in json.dumps(addresses)
    assert compute.lookupByUUIDString(shown["id"]).isActive()

    cli(http, tmp_path, "image", "save", "--file", "out.img", "cli-image")
    assert (tmp_path / "out.img").read_bytes() == data
    cli(http, tmp_path, "server", "delete", "--wait", "cli-vm")
    cli(http, tmp_path, "image", "delete", "cli-image")
    cli(http, tmp_path, "keypair", "delete", "clikey")
    assert not (settings.data_dir / "images" / image["id"]).exists()
