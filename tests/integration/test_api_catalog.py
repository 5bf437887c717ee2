"""The image service (``/image/v2``), key pairs (``/v2.1/os-keypairs``) and what servers take from
them, against the real JetStream, PostgreSQL and projector (``tests.fixtures.api``).
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from cryptography.hazmat.primitives import serialization

from commands.keypair import fingerprint
from stratus.config import Settings
from tests.fixtures.api import ADMIN, P1, P2, Stack, assert_fault, ssh_public_key, upload

KERNEL = b"\x7fELF pretend kernel" * 1000


# -- images ---------------------------------------------------------------------------------------
def test_image_create_upload_show_download_delete(stack: Stack, api_settings: Settings) -> None:
    r = stack.request("GET", "/image")
    assert r.status_code == 300 and r.json["versions"][0]["links"][0]["href"].endswith("/image/v2/")

    image = upload(stack, KERNEL, name="cirros", min_ram=64, os_command_line="console=ttyS0", hw_x="y")
    iid = image["id"]
    assert image["visibility"] == "shared" and image["hw_x"] == "y" and image["self"] == f"/v2/images/{iid}"

    r = stack.get(f"/image/v2/images/{iid}")
    assert r.status_code == 200, r.text
    shown = r.json
    assert shown["status"] == "active" and shown["size"] == len(KERNEL)
    assert shown["checksum"] == hashlib.md5(KERNEL).hexdigest()
    assert shown["os_hash_algo"] == "sha256" and shown["os_hash_value"] == hashlib.sha256(KERNEL).hexdigest()
    assert shown["min_ram"] == 64 and shown["os_command_line"] == "console=ttyS0"
    stored = api_settings.data_dir / "images" / iid / shown["os_hash_value"]
    assert stored.read_bytes() == KERNEL

    r = stack.get(f"/image/v2/images/{iid}/file")
    assert r.status_code == 200 and r.content == KERNEL
    assert r.headers["Content-MD5"] == shown["checksum"]

    # the log holds the digests, never the data
    envelopes = stack.handlers.app.recorder.read_envelopes(1, 10_000)  # type: ignore[attr-defined]
    uploaded = [e.to_dict() for e in envelopes if e.to_dict()["type"] == "stratus.image.uploaded"]
    assert [u["data"]["size"] for u in uploaded] == [len(KERNEL)]
    assert all(len(e.data or b"") < 4096 for e in envelopes)

    # list, filters, paging
    second = upload(stack, b"two", name="other")
    r = stack.get("/image/v2/images?name=cirros", after=_head(stack))
    assert [i["id"] for i in r.json["images"]] == [iid]
    r = stack.get("/image/v2/images?limit=1", after=_head(stack))
    assert [i["id"] for i in r.json["images"]] == [second["id"]]
    assert r.json["next"].startswith("/v2/images?") and f"marker={second['id']}" in r.json["next"]
    r = stack.get(f"/image/v2/images?limit=1&marker={second['id']}")
    assert [i["id"] for i in r.json["images"]] == [iid]
    r = stack.get("/image/v2/images?status=queued")
    assert r.json["images"] == []

    # a second upload is refused; delete removes the data
    headers = {**stack.headers(None), "Content-Type": "application/octet-stream"}
    r = stack.client.simulate_put(f"/image/v2/images/{iid}/file", headers=headers, body=b"again")
    assert_fault(r, 409, "conflictingRequest", "active")
    r = stack.request("DELETE", f"/image/v2/images/{iid}")
    assert r.status_code == 204
    assert not stored.exists()
    assert stack.get(f"/image/v2/images/{iid}").status_code == 404
    assert stack.get(f"/image/v2/images/{iid}/file").status_code == 404


def _head(stack: Stack) -> int:
    return stack.handlers.app.recorder.max_notification_id() or 0


def test_private_images_belong_to_their_project(stack: Stack) -> None:
    mine = upload(stack, b"p1 data", P1, visibility="private")
    r = stack.get(f"/image/v2/images/{mine['id']}", P2)
    assert r.status_code == 404
    r = stack.get("/image/v2/images", P2, after=_head(stack))
    assert mine["id"] not in [i["id"] for i in r.json["images"]]
    r = stack.get("/image/v2/images", P1)
    assert mine["id"] in [i["id"] for i in r.json["images"]]
    assert stack.get(f"/image/v2/images/{mine['id']}/file", P2).status_code == 404
    assert stack.request("DELETE", f"/image/v2/images/{mine['id']}", P2).status_code == 404

    # only an admin publishes; a public image is seen by all but changed only by its owner
    r = stack.request("POST", "/image/v2/images", P1, json={"name": "pub", "visibility": "public"})
    assert_fault(r, 403, "forbidden", "publicize_image")
    public = upload(stack, b"pub", ADMIN, visibility="public")
    assert stack.get(f"/image/v2/images/{public['id']}", P2).status_code == 200
    assert_fault(stack.request("DELETE", f"/image/v2/images/{public['id']}", P2), 403, "forbidden")


def test_image_requests_are_checked(stack: Stack) -> None:
    for body, word in (
        ({"disk_format": "floppy"}, "disk_format"),
        ({"status": "active"}, "status"),
        ({"min_ram": -1}, "min_ram"),
        ({"kernel_id": "not-a-uuid"}, "kernel_id"),
    ):
        assert_fault(stack.request("POST", "/image/v2/images", json=body), 400, "badRequest", word)
    r = stack.request("POST", "/image/v2/images", json={"name": "noformat"})
    iid = r.json["id"]
    headers = {**stack.headers(None), "Content-Type": "application/octet-stream"}
    r = stack.client.simulate_put(f"/image/v2/images/{iid}/file", headers=headers, body=b"x")
    assert_fault(r, 400, "badRequest", "container_format, disk_format")
    r = stack.client.simulate_put(
        f"/image/v2/images/{iid}/file", headers={**headers, "Content-Type": "text/plain"}, body=b"x"
    )
    assert r.status_code in (400, 415)
    assert stack.get("/image/v2/images/nope").status_code == 404


# -- key pairs ------------------------------------------------------------------------------------
def test_keypair_import_generate_show_list_delete(stack: Stack) -> None:
    public_key = ssh_public_key() + " me@host"
    body = {"keypair": {"name": "k1", "public_key": public_key}}
    r = stack.request("POST", "/v2.1/os-keypairs", P1, json=body)
    assert r.status_code == 200, r.text
    kp = r.json["keypair"]
    blob = base64.b64decode(public_key.split()[1])
    md5 = hashlib.md5(blob).hexdigest()
    assert kp["fingerprint"] == ":".join(md5[i : i + 2] for i in range(0, 32, 2)) == fingerprint(public_key)
    assert "private_key" not in kp and kp["public_key"] == public_key

    r = stack.request("POST", "/v2.1/os-keypairs", P1, json={"keypair": {"name": "gen"}})
    assert r.status_code == 200, r.text
    generated = r.json["keypair"]
    private = generated["private_key"]
    assert private.startswith("-----BEGIN RSA PRIVATE KEY-----")
    loaded = serialization.load_pem_private_key(private.encode(), password=None)
    derived = loaded.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    assert generated["public_key"].startswith(derived.decode())
    # the private key is nowhere in the log
    envelopes = stack.handlers.app.recorder.read_envelopes(1, 10_000)  # type: ignore[attr-defined]
    marker = private.splitlines()[1].encode()
    assert not any(marker in (e.data or b"") for e in envelopes)

    r = stack.get("/v2.1/os-keypairs/gen", P1)
    assert r.status_code == 200 and "private_key" not in r.json["keypair"]
    r = stack.get("/v2.1/os-keypairs", P1, after=_head(stack))
    assert sorted(k["keypair"]["name"] for k in r.json["keypairs"]) == ["gen", "k1"]
    # key pairs are per user
    assert stack.get("/v2.1/os-keypairs/k1", P2).status_code == 404
    assert stack.get("/v2.1/os-keypairs", P2, after=_head(stack)).json["keypairs"] == []

    assert_fault(stack.request("POST", "/v2.1/os-keypairs", P1, json=body), 409, "conflictingRequest", "k1")
    bad = {"keypair": {"name": "bad", "public_key": "ssh-rsa not-base64!"}}
    assert_fault(stack.request("POST", "/v2.1/os-keypairs", P1, json=bad), 400, "badRequest", "Keypair data")
    assert stack.request("DELETE", "/v2.1/os-keypairs/k1", P1).status_code == 202
    assert stack.get("/v2.1/os-keypairs/k1", P1).status_code == 404
    assert stack.request("DELETE", "/v2.1/os-keypairs/k1", P1).status_code == 404
    # the name is free again
    assert stack.request("POST", "/v2.1/os-keypairs", P1, json=body).status_code == 200


# -- servers and what they reference --------------------------------------------------------------
def test_server_create_resolves_image_and_key_pair(stack: Stack) -> None:
    flavor_id, _ = stack.flavor()
    kernel = upload(stack, KERNEL, P1, name="vmlinuz", disk_format="aki", container_format="aki")
    ramdisk = upload(stack, b"initrd", P1, name="initrd", disk_format="ari", container_format="ari")
    image = upload(stack, b"root", P1, name="os", kernel_id=kernel["id"], ramdisk_id=ramdisk["id"])
    key = {"keypair": {"name": "mykey", "public_key": ssh_public_key()}}
    assert stack.request("POST", "/v2.1/os-keypairs", P1, json=key).status_code == 200

    sid, position = stack.server(flavor_id, P1, imageRef=image["id"], key_name="mykey")
    r = stack.get(f"/v2.1/servers/{sid}", P1, after=position)
    assert r.json["server"]["image"]["id"] == image["id"] and r.json["server"]["key_name"] == "mykey"
    inst = stack.handlers.instance(sid)
    assert inst.image is not None
    assert (inst.image["kernel_id"], inst.image["ramdisk_id"]) == (kernel["id"], ramdisk["id"])
    assert inst.key_data == key["keypair"]["public_key"]

    def create(who: Any, **fields: Any) -> Any:
        body = {"server": {"name": "vm", "flavorRef": flavor_id, **fields}}
        return stack.request("POST", "/v2.1/servers", who, json=body)

    missing = "6f0c3a58-0000-4000-8000-000000000000"
    assert_fault(create(P1, imageRef=missing), 400, "badRequest", f"Image {missing} could not be found.")
    assert_fault(create(P2, imageRef=image["id"]), 400, "badRequest", "could not be found")  # private
    assert_fault(create(P2, imageRef=image["id"], key_name="mykey"), 400, "badRequest")
    assert_fault(create(P1, key_name="nokey"), 400, "badRequest", "Invalid key_name provided.")
    queued = stack.request("POST", "/image/v2/images", P1, json={"name": "q"}).json
    assert_fault(create(P1, imageRef=queued["id"]), 400, "badRequest", "is not active")
    big = upload(stack, b"big", P1, min_ram=4096)
    assert_fault(create(P1, imageRef=big["id"]), 400, "badRequest", "memory is too small")
    assert_fault(create(P1, user_data="%%% not base64"), 400, "badRequest", "user_data")
    assert "%%%" not in create(P1, user_data="%%% not base64").text  # never echoed
