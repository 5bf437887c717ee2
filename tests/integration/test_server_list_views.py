"""The bytes of ``GET /servers/detail``, ``GET /servers`` and ``GET /servers/{id}``, for an admin and a
member, at the microversions that change a server's view, for servers in many states (ACTIVE on a
live host with ports, metadata, tags and a lock; ERROR with faults; building without a host or an
image; deleted; in a server group; another project's): the same bytes as recorded
(``server_list_views.json``, a digest a body), so a change made for speed changes no answer.

The rows are written into the read model directly (fixed ids, times and contents); what differs
from run to run (the personas' project ids, and so the ``hostId`` made of them) is replaced by
names before the digest. ``STRATUS_RECORD_VIEWS=1`` records the digests again (after a change that
is meant to change an answer); ``STRATUS_VIEW_BODIES=<file>`` writes the bodies themselves, to
compare two runs' bodies line by line.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg

from projections.schema import LIVE_SCHEMA
from stratus.config import Settings
from stratus.imagestore import user_data_store
from tests.fixtures.api import ADMIN, P1, P2, Stack, alive
from tests.fixtures.recorded_bodies import assert_recorded

GOLDEN = Path(__file__).with_name("server_list_views.json")
VERSIONS = (
    "2.1", "2.3", "2.9", "2.16", "2.19", "2.26", "2.47", "2.63", "2.71", "2.73", "2.75", "2.90", "2.96",
    "2.98", "2.100",
)  # fmt: skip
T0 = datetime(2026, 11, 26, 16, 52, 21, tzinfo=UTC)
_JSONB = ("flavor", "metadata", "ports", "tags", "image", "user_data", "fault")
SMALL = {
    "id": "m1.small", "name": "m1.small", "vcpus": 1, "ram": 512, "disk": 10, "ephemeral": 0, "swap": 0,
    "extra_specs": {},
}  # fmt: skip
ODD = {
    "id": "odd/fläv or", "name": "odd", "vcpus": 2, "ram": 1024, "disk": 1, "ephemeral": 3, "swap": 5,
    "extra_specs": {"hw:cpu_policy": "dedicated", "quota:cpu_shares": "10"},
}  # fmt: skip
PORTS = [
    {"network_id": "n1", "network_name": "private", "address": "10.0.0.5", "mac": "fa:16:3e:00:00:01"},
    {"network_id": "n2", "network_name": "public", "address": "172.24.4.9", "mac": "fa:16:3e:00:00:02"},
    {"network_id": "n1", "network_name": "private", "address": "10.0.0.6", "mac": "fa:16:3e:00:00:03"},
]


def sid(n: int) -> str:
    return str(UUID(int=0x5E5E_0000_0000_4000_8000_0000_0000_0000 + n))


def _servers(p1: str, p2: str, user_data: str) -> list[dict[str, Any]]:
    """The rows: every state and part a view shows differently."""
    base = {"project_id": p1, "user_id": "u-1", "flavor": SMALL, "image_ref": "cirros-0.6.2"}
    return [
        {
            **base,
            "id": sid(1),
            "name": "web-1",
            "vm_state": "active",
            "status": "ACTIVE",
            "host": "h1",
            "power_state": 1,
            "metadata": {"é": "ü", "role": "web", "a": "1"},
            "tags": ["b", "a"],
            "ports": PORTS,
            "locked_by": "owner",
            "locked_reason": "maintenance",
            "key_name": "k1",
            "description": "the web server",
            "access_ip_v4": "192.0.2.1",
            "access_ip_v6": "2001:db8::1",
            "hostname": "web-one",
            "config_drive": True,
            "disk_config": "AUTO",
            "availability_zone": "zone-b",
            "reservation_id": "r-0000abcd",
            "launch_index": 2,
            "image": {"kernel_id": "kern", "ramdisk_id": "ram", "os_command_line": "console=ttyS0"},
            "user_data": {"id": user_data, "size": 5},
            "launched_at": T0 + timedelta(microseconds=991679),
        },
        {
            **base,
            "id": sid(2),
            "name": "broken",
            "vm_state": "error",
            "status": "ERROR",
            "host": "h2",
            "fault": {
                "code": 500,
                "message": "No valid host",
                "details": "Traceback...",
                "created": "2026-11-26T16:50:00.123456+00:00",
            },
            "user_data": {"sha256": "0" * 64},
        },
        {
            **base,
            "id": sid(3),
            "name": "refused",
            "vm_state": "error",
            "status": "ERROR",
            "fault": {"code": 404, "message": "Image not found", "details": "gone"},
            "flavor": ODD,
        },
        {
            **base,
            "id": sid(4),
            "name": 'Bau "ü" <x>',
            "vm_state": "building",
            "status": "BUILD",
            "task_state": "scheduling",
            "image_ref": "",
            "flavor": ODD,
            "metadata": {"big": 18446744073709551616},
        },
        {
            **base,
            "id": sid(5),
            "name": "stopped",
            "vm_state": "stopped",
            "status": "SHUTOFF",
            "host": "h1",
            "power_state": 4,
            "image_ref": "img/ü x",
            "image": {"os_command_line": 7},
            "launched_at": T0,
            "fault": {"code": "x", "message": "old"},
        },
        {
            **base,
            "id": sid(6),
            "name": "gone",
            "vm_state": "deleted",
            "status": "DELETED",
            "host": "h2",
            "deleted": True,
            "deleted_at": T0 + timedelta(hours=1),
            "launched_at": T0,
            "fault": {"code": 500, "message": "Deleted in error", "details": "d"},
        },
        {
            **base,
            "id": sid(7),
            "name": "grouped",
            "vm_state": "active",
            "status": "ACTIVE",
            "host": "h3",
            "power_state": 1,
            "ports": PORTS[:1],
            "task_state": "rebooting",
        },
        {
            **base,
            "id": sid(8),
            "name": "theirs",
            "project_id": p2,
            "user_id": "u-2",
            "vm_state": "active",
            "status": "ACTIVE",
            "host": "h1",
            "power_state": 1,
            "metadata": {"x": "y"},
        },
        {
            **base,
            "id": sid(9),
            "name": "verify",
            "vm_state": "resized",
            "status": "VERIFY_RESIZE",
            "host": "h1",
            "task_state": None,
            "availability_zone": "",
        },
    ]


def _insert(conn: psycopg.Connection[Any], server: dict[str, Any], n: int) -> None:
    row = {
        "created_at": T0 - timedelta(minutes=n // 2),  # pairs share a time: ordered by id
        "updated_at": T0 + timedelta(seconds=n),
        "version": 1,
        "position": 1,
        **server,
    }
    for name in _JSONB:
        if name in row:
            row[name] = json.dumps(row[name])
    values = ", ".join("%s::jsonb" if k in _JSONB else "%s" for k in row)
    conn.execute(
        f"INSERT INTO {LIVE_SCHEMA}.instances ({', '.join(row)}) VALUES ({values})", list(row.values())
    )


def _hosts(conn: psycopg.Connection[Any]) -> None:
    for n, (name, zone, disabled) in enumerate(
        (("h1", "zone-b", False), ("h2", None, True), ("h3", None, False))
    ):
        conn.execute(
            f"INSERT INTO {LIVE_SCHEMA}.hosts (id, hostname, hypervisor_type, vcpus, memory_mb, disk_gb, "
            "cpu_allocation_ratio, ram_allocation_ratio, disk_allocation_ratio, availability_zone, disabled, "
            "created_at, updated_at, version, position) "
            "VALUES (%s, %s, 'qemu', 1, 1, 1, 1, 1, 1, %s, %s, now(), now(), 1, 1)",
            (UUID(int=n + 1), name, zone, disabled),
        )
    conn.execute(
        f"INSERT INTO {LIVE_SCHEMA}.server_groups (id, name, project_id, user_id, policy, members, "
        "created_at, updated_at, position) "
        "VALUES (%s, 'g', 'x', 'u', 'anti-affinity', %s::jsonb, now(), now(), 1)",
        (UUID(int=77), json.dumps({sid(7): "h3", sid(1): "h1"})),
    )


def _paths() -> list[tuple[str, str]]:
    """(who, path) for every request recorded."""
    lists = [
        "/v2.1/servers/detail?limit=100",
        "/v2.1/servers/detail",
        "/v2.1/servers/detail?limit=3",
        "/v2.1/servers?limit=100",
    ]
    admin = [
        "/v2.1/servers/detail?all_tenants=1",
        "/v2.1/servers/detail?all_tenants=1&deleted=1",
        "/v2.1/servers/detail?all_tenants=1&limit=2&marker=" + sid(2),
    ]
    shows = [f"/v2.1/servers/{sid(n)}" for n in range(1, 10)]
    return (
        [(ADMIN, p) for p in lists + admin + shows]
        + [(P1, p) for p in lists + shows]
        + [(P2, "/v2.1/servers/detail"), (P2, f"/v2.1/servers/{sid(8)}")]
    )


def test_the_server_views_bodies_are_the_recorded_ones(stack: Stack, api_settings: Settings) -> None:
    p1, p2 = stack.project_id("p1"), stack.project_id("p2")
    for who in (ADMIN, P1, P2):
        stack.auth(who)
    blob = user_data_store(api_settings.data_dir).put(b"hello")
    with psycopg.connect(api_settings.database_url or "", autocommit=True) as conn:
        _hosts(conn)
        for n, server in enumerate(_servers(p1, p2, blob)):
            _insert(conn, server, n)
    alive(stack, "h1", "h3")  # h2 is down: its guests' power state is unknown, its host_status DOWN
    names = {p1: "PROJECT-1", p2: "PROJECT-2", blob: "BLOB"}
    for project in (p1, p2):
        for host in ("h1", "h2", "h3"):
            names[hashlib.sha224((project + host).encode()).hexdigest()] = f"HOSTID-{names[project]}-{host}"
    bodies: dict[str, str] = {}
    for version in VERSIONS:
        for who, path in _paths():
            headers = {**stack.headers(who), "OpenStack-API-Version": f"compute {version}"}
            r = stack.client.simulate_get(
                path.split("?")[0], query_string=path.partition("?")[2], headers=headers
            )
            text = r.content.decode()
            for value, name in names.items():
                text = text.replace(value, name)
            bodies[f"{version} {who} {path}"] = f"{r.status_code} {text}"
    # another project's server and a deleted one are not found; every other answer is a view
    missing = {case for case, body in bodies.items() if not body.startswith("200 ")}
    assert {case.split("/")[-1] for case in missing} == {sid(6), sid(8)}, sorted(missing)[:5]
    assert_recorded(bodies, GOLDEN)
