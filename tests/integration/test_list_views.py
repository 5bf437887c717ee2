"""The bytes of the other lists: ``GET /flavors`` and ``/flavors/detail``, Glance's ``/images`` and
Nova's image proxy (``/images``, ``/images/detail``), ``/os-hypervisors`` and its ``/detail``, and
``/os-keypairs``, for an admin and a member, at the microversions that change their views: the same
bytes as recorded (``list_views.json``, a digest a body), so a change made for speed changes no
answer. The hypervisors' routes besides the lists (one host, its uptime, the statistics, the
search) and the lists' markers and errors too.

The rows are written into the read model directly (fixed ids, times and contents); what differs
from run to run (the personas' project and user ids, a live host's address and uptime line) is
replaced by names before the digest. ``STRATUS_RECORD_VIEWS=1`` records the digests again (after a
change that is meant to change an answer); ``STRATUS_VIEW_BODIES=<file>`` writes the bodies
themselves, to compare two runs' bodies line by line.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg

from projections.schema import LIVE_SCHEMA
from stratus.config import Settings
from stratus.liveness import my_ip
from tests.fixtures.api import ADMIN, P1, P2, Stack, alive
from tests.fixtures.recorded_bodies import assert_recorded

GOLDEN = Path(__file__).with_name("list_views.json")
T0 = datetime(2026, 11, 26, 16, 52, 21, tzinfo=UTC)
COMPUTE = ("2.1", "2.2", "2.10", "2.28", "2.33", "2.35", "2.53", "2.55", "2.61", "2.75", "2.88", "2.102")
_UPTIME = re.compile(r'"uptime":" [^"]*"')


def _uuid(kind: int, n: int) -> UUID:
    """Fixed ids, distinct in their high bits too (a host's integer id is made of those)."""
    return UUID(int=0xABC0_0000_0000_4000_8000_0000_0000_0000 + ((n + 1) << 100) + (kind << 32) + n)


def _flavors(p1: str) -> list[dict[str, Any]]:
    """Public and private flavors, odd ids and names, specs of every kind, swap and none."""
    return [
        {"flavorid": "1", "name": "m1.tiny", "vcpus": 1, "ram": 512, "disk": 1},
        {"flavorid": "2", "name": "m1.small", "vcpus": 1, "ram": 2048, "disk": 20, "swap": 512,
         "ephemeral": 5, "rxtx_factor": 1.5, "description": "a small one",
         "extra_specs": {"hw:cpu_policy": "dedicated", "quota:cpu_shares": "10", "é": "ü"}},
        {"flavorid": "odd/fläv or", "name": 'Odd "ü" <x>', "vcpus": 2, "ram": 1024, "disk": 0,
         "description": ""},
        {"flavorid": "private-p1", "name": "p1 only", "vcpus": 4, "ram": 4096, "disk": 40,
         "is_public": False, "projects": [p1], "extra_specs": {"big": "18446744073709551616"}},
        {"flavorid": "private-none", "name": "nobody's", "vcpus": 8, "ram": 8192, "disk": 80,
         "is_public": False},
        {"flavorid": "gone", "name": "deleted", "vcpus": 1, "ram": 1, "disk": 1, "deleted": True},
    ]  # fmt: skip


def _images(p1: str, p2: str) -> list[dict[str, Any]]:
    """Images of every visibility and status, with properties and tags, two hidden (one whose
    properties have base properties' names), one deleted."""
    base = {"container_format": "bare", "disk_format": "qcow2", "owner": p1, "status": "active"}
    return [
        {**base, "name": "cirros", "visibility": "public", "size": 21430272, "checksum": "c" * 32,
         "os_hash_algo": "sha512", "os_hash_value": "d" * 128, "min_disk": 1, "min_ram": 64,
         "tags": ["b", "a"], "properties": {"hw_disk_bus": "virtio", "kernel_id": None, "n": 7}},
        {**base, "name": "queued", "visibility": "private", "status": "queued", "container_format": None,
         "disk_format": None},
        {**base, "name": 'Bild "ü"', "visibility": "shared", "owner": p2, "protected": True,
         "properties": {"é": "ü", "big": 18446744073709551616}},
        {**base, "name": "theirs", "visibility": "private", "owner": p2},
        {**base, "name": None, "visibility": "community", "owner": p2, "status": "killed"},
        {**base, "name": "hidden", "visibility": "public", "os_hidden": True},
        {**base, "name": "saving", "visibility": "public", "status": "saving"},
        {**base, "name": "gone", "visibility": "public", "status": "deleted", "deleted": True},
        {**base, "name": "clash", "visibility": "public", "os_hidden": True,  # base names as properties
         "properties": {"zeta": 1, "status": "p", "self": "s", "tags": ["t"], "schema": None, "a": "b"}},
    ]  # fmt: skip


def _hosts() -> list[dict[str, Any]]:
    """An up host with usage and reserves, one disabled, one forced down (the list's order: names)."""
    return [
        {"hostname": "h1", "vcpus": 8, "memory_mb": 16384, "disk_gb": 100, "vcpus_used": 2,
         "memory_mb_used": 1024, "disk_gb_used": 10, "running_vms": 2, "memory_mb_reserved": 512,
         "disk_gb_reserved": 1},
        {"hostname": "h2", "vcpus": 4, "memory_mb": 8192, "disk_gb": 50, "disabled": True,
         "disabled_reason": "maintenance"},
        {"hostname": "h3", "vcpus": 2, "memory_mb": 2048, "disk_gb": 20, "forced_down": True},
    ]  # fmt: skip


def _insert(conn: psycopg.Connection[Any], table: str, row: dict[str, Any], jsonb: tuple[str, ...]) -> None:
    values = ", ".join("%s::jsonb" if k in jsonb else "%s" for k in row)
    params = [json.dumps(v) if k in jsonb else v for k, v in row.items()]
    conn.execute(f"INSERT INTO {LIVE_SCHEMA}.{table} ({', '.join(row)}) VALUES ({values})", params)


def _write(conn: psycopg.Connection[Any], stack: Stack, p1: str, p2: str) -> None:
    kept = {"version": 1, "position": 1}
    for n, flavor in enumerate(_flavors(p1)):
        row = {"id": _uuid(1, n), "created_at": T0, **kept, **flavor}
        _insert(conn, "flavors", row, ("extra_specs", "projects"))
    for n, image in enumerate(_images(p1, p2)):
        at = T0 + timedelta(minutes=n // 2, microseconds=n * 1001)  # pairs share a time: ordered by id
        row = {"id": _uuid(2, n), "aggregate_id": _uuid(2, n), "created_at": at, "updated_at": at, **kept}
        _insert(conn, "images", {**row, **image}, ("tags", "properties"))
    conn.execute(
        f"INSERT INTO {LIVE_SCHEMA}.image_members VALUES (%s, %s, 'accepted', now(), now())",
        (_uuid(2, 2), p1),
    )
    for n, host in enumerate(_hosts()):
        ratios = {f"{r}_allocation_ratio": 1.0 for r in ("cpu", "ram", "disk")}
        row = {"id": _uuid(3, n), "hypervisor_type": "QEMU", "created_at": T0, "updated_at": T0, **ratios}
        _insert(conn, "hosts", {**row, **kept, **host}, ())
    for n, (name, on) in enumerate((("vm-a", "h1"), ("vm-b", "h1"), ("vm-c", "h2"))):
        server = {"id": _uuid(4, n), "name": name, "project_id": p1, "user_id": "u", "flavor": {}}
        state = {"vm_state": "active", "status": "ACTIVE", "power_state": 1, "host": on}
        _insert(
            conn, "instances", {**server, **state, "created_at": T0, "updated_at": T0, **kept}, ("flavor",)
        )
    for m, (who, name) in enumerate(((stack.user_id("alice"), "a"), (stack.user_id("bob"), "b"))):
        for n, (key, kind) in enumerate(
            (("zeta", "ssh"), ("alpha", "x509"), ("mid-1", "ssh"), ("mid 2", "ssh"))
        ):
            key_of = {"public_key": f"ssh-ed25519 AAAA{n} {name}@x", "fingerprint": f"{n:02x}:ff"}
            row = {"id": _uuid(5 + n, m), "user_id": who, "name": f"{key}-{name}", "type": kind, **key_of}
            row["created_at"] = T0
            _insert(conn, "keypairs", {**row, **kept}, ())


def _more_hypervisors() -> list[str]:
    """Hosts paged by a marker (its integer id before 2.53, its UUID from it: each refused where the
    other is the id), a marker not found, the pattern with paging, one host by each kind of id, its
    uptime, the statistics and the routes 2.53 removed."""
    h1, h2, h3 = (_uuid(3, n) for n in range(3))
    number = {h: int(str(h)[:8], 16) >> 1 or 1 for h in (h1, h2, h3)}  # api.services.integer_id
    base = "/v2.1/os-hypervisors"
    return [
        f"{base}?limit=1", f"{base}/detail?limit=1&marker={number[h1]}", f"{base}?limit=1&marker={h1}",
        f"{base}/detail?marker={h2}", f"{base}/detail?marker={number[h3]}", f"{base}/detail?marker=nope",
        f"{base}/detail?limit=0", f"{base}?hypervisor_hostname_pattern=h&limit=1",
        f"{base}/detail?hypervisor_hostname_pattern=zz",
        f"{base}/detail?hypervisor_hostname_pattern=2&with_servers=true",
        f"{base}/{number[h1]}", f"{base}/{h1}", f"{base}/h2", f"{base}/{h3}?with_servers=1",
        f"{base}/{number[h2]}?with_servers=true", f"{base}/{number[h1]}/uptime", f"{base}/{h1}/uptime",
        f"{base}/{number[h2]}/uptime", f"{base}/statistics", f"{base}/h/search", f"{base}/h1/servers",
    ]  # fmt: skip


def _paths() -> list[tuple[str, str | None, str]]:
    """(who, compute microversion or None, path) for every request recorded."""
    flavors = ["/v2.1/flavors", "/v2.1/flavors/detail", "/v2.1/flavors/detail?limit=2",
               "/v2.1/flavors/detail?limit=2&marker=2", "/v2.1/flavors?is_public=none",
               "/v2.1/flavors/detail?is_public=none",
               "/v2.1/flavors/detail?is_public=false&sort_key=name"]  # fmt: skip
    glance = ["/image/v2/images", "/image/v2/images?limit=2", "/image/v2/images?visibility=community",
              "/image/v2/images?os_hidden=true", "/image/v2/images?member_status=all",
              f"/image/v2/images?limit=2&marker={_uuid(2, 6)}", f"/image/v2/images?marker={_uuid(2, 1)}",
              "/image/v2/images?tag=a&tag=b&limit=1", "/image/v2/images?limit=1&name=Bild%20%22%C3%BC%22",
              "/image/v2/images?visibility=all&limit=3"]  # fmt: skip
    nova_images = ["/v2.1/images", "/v2.1/images/detail", "/v2.1/images/detail?limit=2"]
    hypervisors = ["/v2.1/os-hypervisors", "/v2.1/os-hypervisors/detail",
                   "/v2.1/os-hypervisors/detail?limit=2",
                   "/v2.1/os-hypervisors?with_servers=1", "/v2.1/os-hypervisors/detail?with_servers=true",
                   "/v2.1/os-hypervisors/detail?hypervisor_hostname_pattern=h"]  # fmt: skip
    hypervisors += _more_hypervisors()
    keypairs = [
        "/v2.1/os-keypairs",
        "/v2.1/os-keypairs?limit=2",
        "/v2.1/os-keypairs?user_id=BOB",
        "/v2.1/os-keypairs?limit=1&marker=alpha-a",
        "/v2.1/os-keypairs?marker=nope",
    ]
    per_version = flavors + nova_images + keypairs
    cases: list[tuple[str, str | None, str]] = [(who, None, p) for who in (ADMIN, P1, P2) for p in glance]
    for version in COMPUTE:
        cases += [(who, version, p) for who in (ADMIN, P1) for p in per_version]
        cases += [(ADMIN, version, p) for p in hypervisors]
    return cases


def test_the_list_views_bodies_are_the_recorded_ones(stack: Stack, api_settings: Settings) -> None:
    p1, p2 = stack.project_id("p1"), stack.project_id("p2")
    for who in (ADMIN, P1, P2):
        stack.auth(who)
    with psycopg.connect(api_settings.database_url or "", autocommit=True) as conn:
        _write(conn, stack, p1, p2)
    alive(stack, "h1", "h3", forced_down=("h3",))  # h2 is down; h3 beats but is forced down
    names = {p1: "PROJECT-1", p2: "PROJECT-2", stack.user_id("bob"): "BOB", stack.user_id("alice"): "ALICE"}
    bodies: dict[str, str] = {}
    for who, version, path in _paths():
        headers = stack.headers(who)
        if version is not None:
            headers["OpenStack-API-Version"] = f"compute {version}"
        query = path.partition("?")[2].replace("BOB", stack.user_id("bob"))
        r = stack.client.simulate_get(path.split("?")[0], query_string=query, headers=headers)
        text = _UPTIME.sub('"uptime":"UPTIME"', r.content.decode()).replace(f'"{my_ip()}"', '"HOST-IP"')
        for value, name in names.items():
            text = text.replace(value, name)
        bodies[f"{version} {who} {path}"] = f"{r.status_code} {text}"
    assert_recorded(bodies, GOLDEN)
