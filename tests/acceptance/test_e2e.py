"""End to end, every part a real process on real services, as `stratus run` wires them.

The API runs under gunicorn, the projector and the scheduler as `stratus <part>` processes, all on a
real nats-server and a real PostgreSQL. The hypervisor worker runs in this test's process so that the
test can look into the very libvirt connection it drives (libvirt's test driver keeps its domains
per connection). Everything crosses the real HTTP, NATS and SQL boundaries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import libvirt
import pytest

from stratus.config import Settings
from tests.fixtures.deployed import Http, wait_for

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_a_server_boots_to_active_and_is_deleted_everywhere(
    parts: tuple[Settings, Http], compute: libvirt.virConnect
) -> None:
    _, http = parts
    # the host registers itself and shows up, empty, in os-hypervisors
    hyp = wait_for("the hypervisor to register", lambda: _hypervisor(http, "e2e-compute"))
    assert (hyp["vcpus_used"], hyp["memory_mb_used"], hyp["running_vms"]) == (0, 0, 0)

    status, _, body = http.call(
        "POST",
        "/v2.1/flavors",
        {"flavor": {"name": "e2e.small", "id": "e2e.small", "ram": 256, "vcpus": 2, "disk": 1}},
    )
    assert status == 200, body
    status, headers, body = http.call(
        "POST", "/v2.1/servers", {"server": {"name": "e2e-vm", "flavorRef": "e2e.small"}}
    )
    assert status == 202, body
    server_id = body["server"]["id"]
    position = int(headers["x-stratus-position"])

    # read-your-writes: with the position the create returned, the server is there at once
    status, _, body = http.call(
        "GET", f"/v2.1/servers/{server_id}", headers={"X-Stratus-Min-Position": str(position)}
    )
    assert status == 200 and body["server"]["status"] in ("BUILD", "ACTIVE"), body

    server = wait_for("ACTIVE", lambda: _server_in(http, server_id, "ACTIVE"))
    assert server["OS-EXT-STS:power_state"] == 1
    assert server["OS-EXT-SRV-ATTR:host"] == "e2e-compute"
    dom = compute.lookupByUUIDString(server_id)
    assert dom.isActive() and dom.name() == f"instance-{server_id}"
    assert dom.maxMemory() == 256 * 1024 and dom.maxVcpus() == 2
    hyp = _hypervisor(http, "e2e-compute")
    assert hyp is not None
    assert (hyp["vcpus_used"], hyp["memory_mb_used"], hyp["local_gb_used"], hyp["running_vms"]) == (
        2,
        256,
        1,
        1,
    )

    status, headers, _ = http.call("DELETE", f"/v2.1/servers/{server_id}")
    assert status == 204
    wait_for("the server to be gone", lambda: http.call("GET", f"/v2.1/servers/{server_id}")[0] == 404)
    with pytest.raises(libvirt.libvirtError):
        compute.lookupByUUIDString(server_id)
    hyp = wait_for("resources freed", lambda: _hypervisor(http, "e2e-compute", running_vms=0))
    assert (hyp["vcpus_used"], hyp["memory_mb_used"], hyp["local_gb_used"]) == (0, 0, 0)


def test_no_room_anywhere_puts_the_server_in_error_with_a_fault(
    parts: tuple[Settings, Http], compute: libvirt.virConnect
) -> None:
    _, http = parts
    wait_for("the hypervisor to register", lambda: _hypervisor(http, "e2e-compute"))
    http.call(
        "POST",
        "/v2.1/flavors",
        # within the project's RAM quota (50 GiB), beyond the 4 GiB host
        {"flavor": {"name": "huge", "id": "huge", "ram": 16384, "vcpus": 1, "disk": 1}},
    )
    status, _, body = http.call("POST", "/v2.1/servers", {"server": {"name": "big", "flavorRef": "huge"}})
    assert status == 202, body
    server = wait_for("ERROR", lambda: _server_in(http, body["server"]["id"], "ERROR"))
    assert "No valid host" in server["fault"]["message"]
    assert compute.numOfDomains() == 0


def _server_in(http: Http, server_id: str, status: str) -> dict[str, Any] | None:
    code, _, body = http.call("GET", f"/v2.1/servers/{server_id}")
    if code != 200:
        return None
    server: dict[str, Any] = body["server"]
    if server["status"] == "ERROR" and status != "ERROR":
        raise AssertionError(f"server went to ERROR: {server.get('fault')}")
    return server if server["status"] == status else None


def _hypervisor(http: Http, name: str, **expect: int) -> dict[str, Any] | None:
    code, _, body = http.call("GET", "/v2.1/os-hypervisors/detail")
    if code != 200:
        return None
    for h in body["hypervisors"]:
        if h["hypervisor_hostname"] == name and all(h[k] == v for k, v in expect.items()):
            return dict(h)
    return None
