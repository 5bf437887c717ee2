"""Ids are ours, and image storage has a quota.

Before: an image's client-chosen id was its aggregate id, so a member could take the id of another
kind of thing (a flavor's, another user's key pair's, both derivable) and block it, and "already
exists" told whether any UUID was in use; an image deleted through a non-canonical id kept its data
on disk; `{"id": ""}` answered 500; nothing limited image storage; a key pair over quota still cost
an RSA key generation.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest

from commands.errors import AlreadyExists, QuotaExceeded
from commands.flavor import flavor_aggregate_id
from commands.image import Image
from commands.image_usage import MIB, ImageLimits
from commands.images.create import CreateImage, RecordImageUpload, image_usage
from commands.keypair import keypair_aggregate_id
from commands.keypairs.manage import CreateKeyPair
from stratus.config import Settings
from tests.fixtures.api import P1, P2, Stack, upload


@pytest.fixture
def api_settings(api_settings: Settings) -> Settings:
    """The shared settings, with 1 MiB and 20 images per project."""
    return dataclasses.replace(api_settings, image_count_total=20, image_size_total_mb=1)


def test_an_image_cannot_take_the_id_of_anything_else(stack: Stack) -> None:
    """The ids a member can compute (a flavor's, another user's key pair's) or know (a server's)
    stay theirs: the image gets its own aggregate, and the flavor and key pair are made as usual."""
    carol = stack.auth(P2) and stack.user_id("carol")
    flavor_agg = str(flavor_aggregate_id("m1.later"))
    keypair_agg = str(keypair_aggregate_id(carol, "carols-key"))
    stack.flavor(id="tiny")
    server, _ = stack.server("tiny", P2)
    made = []
    for chosen in (flavor_agg, keypair_agg, server):
        r = stack.request("POST", "/image/v2/images", P1, json={"id": chosen, "name": "squatter"})
        assert r.status_code == 201, r.text  # nothing else's existence shows through
        made.append(r.json["id"])
    assert made == [flavor_agg, keypair_agg, server]
    stack.flavor(id="m1.later", name="later")
    r = stack.request("POST", "/v2.1/os-keypairs", P2, json={"keypair": {"name": "carols-key"}})
    assert r.status_code in (200, 201), r.text
    assert stack.request("GET", f"/v2.1/servers/{server}", P2).status_code == 200
    # an image's own id is still an image's: Glance's 409
    r = stack.request("POST", "/image/v2/images", P1, json={"id": server, "name": "again"})
    assert r.status_code == 409 and "already exists" in r.text


def test_an_image_id_is_a_uuid_and_any_form_of_it_names_the_same_image(
    stack: Stack, api_settings: Settings
) -> None:
    for bad in ("", "x", "1234"):
        r = stack.request("POST", "/image/v2/images", P1, json={"id": bad, "name": "bad"})
        assert r.status_code == 400, (bad, r.text)
    image = upload(stack, b"data" * 100, P1, id="ABCDEF00-0000-4000-8000-000000000001")
    iid = image["id"]
    assert iid == "abcdef00-0000-4000-8000-000000000001"
    stored = api_settings.data_dir / "images" / iid
    assert any(stored.iterdir())
    r = stack.request("DELETE", f"/image/v2/images/{iid.upper()}", P1)
    assert r.status_code == 204, r.text
    assert not stored.exists()  # the data went with it
    assert stack.request("GET", f"/image/v2/images/{iid}", P1).status_code == 404


def test_a_v1_image_recorded_under_its_own_id_still_loads(stack: Stack) -> None:
    """Logs written before Image.Created v2 kept the chosen id as the aggregate id."""
    app = stack.handlers.app
    legacy = Image.create("11111111-2222-4333-8444-555555555555", **_fields())
    legacy._id = legacy.image_id  # where version 1 kept it  # type: ignore[attr-defined]
    assert str(legacy.id) == "11111111-2222-4333-8444-555555555555"
    app.save(legacy)
    found = stack.handlers.image("11111111-2222-4333-8444-555555555555")
    assert found.image_id == "11111111-2222-4333-8444-555555555555"
    with pytest.raises(AlreadyExists):
        stack.handlers.bus.handle(CreateImage(owner="p", image_id="11111111-2222-4333-8444-555555555555"))


def _fields() -> dict[str, Any]:
    return {
        "name": "old", "owner": "p", "visibility": "public", "container_format": "bare",
        "disk_format": "raw", "min_disk": 0, "min_ram": 0, "protected": False, "tags": [],
        "properties": {},
    }  # fmt: skip


def test_image_storage_counts_in_the_projects_quota(stack: Stack, api_settings: Settings) -> None:
    limits = ImageLimits(image_count_total=2, image_size_total=1)
    catalog = stack.handlers.bus.extended(image_limits=limits)
    raw = {"container_format": "bare", "disk_format": "raw"}
    first = catalog.handle(CreateImage(owner="p1", name="a", **raw))
    catalog.handle(CreateImage(owner="p1", name="b", **raw))
    with pytest.raises(QuotaExceeded, match="image_count_total"):
        catalog.handle(CreateImage(owner="p1", name="c"))
    catalog.handle(CreateImage(owner="p2", name="other project"))
    catalog.handle(RecordImageUpload(first.id, None, MIB // 2, "0" * 32, "sha256", "0" * 64))
    assert image_usage(catalog.uow, "p1").remaining(limits) == MIB // 2


def test_an_upload_past_the_quota_is_a_413_and_leaves_nothing_on_disk(
    stack: Stack, api_settings: Settings
) -> None:
    """Through the API, with this module's deployment limit of 1 MiB per project."""
    upload(stack, b"x" * (MIB // 2), P1)
    body = {"name": "big", "disk_format": "raw", "container_format": "bare"}
    big = stack.request("POST", "/image/v2/images", P1, json=body).json["id"]
    headers = {**stack.auth(P1), "Content-Type": "application/octet-stream"}
    r = stack.client.simulate_put(f"/image/v2/images/{big}/file", headers=headers, body=b"y" * MIB)
    assert r.status_code == 413, r.text
    assert "image_size_total" in r.text
    assert not any(p.is_file() for p in (api_settings.data_dir / "images" / big).glob("*"))
    assert stack.request("GET", f"/image/v2/images/{big}", P1).json["status"] == "queued"
    # another project still has its whole quota
    upload(stack, b"z" * (MIB // 2), P2)


def test_no_rsa_key_is_generated_for_a_key_pair_that_will_be_refused(stack: Stack) -> None:
    generated: list[int] = []
    lock = threading.Lock()

    def counting_key() -> tuple[str, str]:
        from commands.keypairs.keys import generate_ssh_key

        with lock:
            generated.append(1)
        return generate_ssh_key()

    from tests.fixtures.facades.operations import Operations

    Operations(stack.handlers.app).set_quota("p1", {"key_pairs": 1}, {})
    catalog = stack.handlers.bus.extended(generate_key=counting_key)
    catalog.handle(CreateKeyPair("u1", "first", None, "p1"))
    assert len(generated) == 1
    with pytest.raises(QuotaExceeded):
        catalog.handle(CreateKeyPair("u1", "second", None, "p1"))
    with pytest.raises(AlreadyExists):
        catalog.handle(CreateKeyPair("u1", "first", None, "p1"))
    assert len(generated) == 1
