"""End to end, every part a real process on real services, as `stratus run` wires them.

The API runs under gunicorn, the projector and the scheduler as `stratus <part>` processes, all on a
real nats-server and a real PostgreSQL. The hypervisor worker runs in this test's process so that the
test can look into the very libvirt connection it drives (libvirt's test driver keeps its domains
per connection). Everything crosses the real HTTP, NATS and SQL boundaries.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import libvirt
import orjson
import pytest

from api import bootstrap
from commands.app import Stratus
from stratus.config import Settings
from stratus.eventstore import Factory, NatsBridge
from tests.fixtures.identity import ADMIN_PASSWORD, Identities
from tests.fixtures.processes import free_port
from workers import hypervisor
from workers.libvirt_driver import LibvirtDriver

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
HOST_XML = """<node>
  <cpu><nodes>1</nodes><sockets>1</sockets><cores>4</cores><threads>1</threads><active>4</active>
       <mhz>2000</mhz><model>e2e</model></cpu>
  <memory>4194304</memory>
</node>
"""


@dataclasses.dataclass
class Http:
    base: str
    # Sent with every call (the admin's token, once the test has one).
    auth: dict[str, str] = dataclasses.field(default_factory=dict)

    def call(
        self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], Any]:
        data = orjson.dumps(body) if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        for k, v in {**self.auth, **(headers or {})}.items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                raw = resp.read()
                return resp.status, dict(resp.headers), orjson.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            return e.code, dict(e.headers), orjson.loads(raw) if raw else None


def _wait(what: str, probe: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; last saw {last!r}")


@pytest.fixture
def parts(settings: Settings, database_url: str, tmp_path: Path) -> Iterator[tuple[Settings, Http]]:
    port = free_port()
    s = dataclasses.replace(
        settings,
        database_url=database_url,
        api_bind=f"127.0.0.1:{port}",
        api_workers=2,
        data_dir=tmp_path / "data",
        host_name="e2e-compute",
    )
    seeded = bootstrap.main(s, ADMIN_PASSWORD)
    env = {**os.environ, **s.to_env()}
    stratus = str(Path(sys.executable).parent / "stratus")
    procs = [
        subprocess.Popen(
            [stratus, part],
            env=env,
            cwd=ROOT,
            stdout=(tmp_path / f"{part}.log").open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        for part in ("projector", "scheduler", "api")
    ]
    http = Http(f"http://127.0.0.1:{port}")
    try:
        _wait("the API", lambda: _answers(http), timeout=60)
        identities = Identities(lambda method, path, headers, body: http.call(method, path, body, headers))
        http.auth = {"X-Auth-Token": identities.login_admin(after=seeded.position)}
        yield s, http
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        for p, part in zip(procs, ("projector", "scheduler", "api"), strict=True):
            assert p.returncode in (0, -15), (part, (tmp_path / f"{part}.log").read_text()[-3000:])


def _answers(http: Http) -> bool:
    try:
        return http.call("GET", "/")[0] == 200
    except OSError:
        return False


@pytest.fixture
def compute(parts: tuple[Settings, Http], tmp_path: Path) -> Iterator[libvirt.virConnect]:
    """The hypervisor worker for host e2e-compute, on a libvirt test-driver connection we can inspect."""
    settings, _ = parts
    host_xml = tmp_path / "host.xml"
    host_xml.write_text(HOST_XML)
    (tmp_path / "instances").mkdir()
    conn = libvirt.open(f"test://{host_xml}")
    driver = LibvirtDriver(lambda: conn, instances_path=tmp_path / "instances")
    stop = threading.Event()
    with NatsBridge(settings.nats_urls, name="e2e-hypervisor") as bridge:
        app = Stratus(Factory(bridge=bridge, settings=settings))
        worker = threading.Thread(
            target=hypervisor.run,
            args=(settings,),
            kwargs={"bridge": bridge, "app": app, "driver": driver, "stop": stop, "poll": 0.2},
            daemon=True,
        )
        worker.start()
        try:
            yield conn
        finally:
            stop.set()
            worker.join(timeout=20)
            assert not worker.is_alive(), "the hypervisor worker did not stop"
    conn.close()


def test_a_server_boots_to_active_and_is_deleted_everywhere(
    parts: tuple[Settings, Http], compute: libvirt.virConnect
) -> None:
    _, http = parts
    # the host registers itself and shows up, empty, in os-hypervisors
    hyp = _wait("the hypervisor to register", lambda: _hypervisor(http, "e2e-compute"))
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

    server = _wait("ACTIVE", lambda: _server_in(http, server_id, "ACTIVE"))
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
    _wait("the server to be gone", lambda: http.call("GET", f"/v2.1/servers/{server_id}")[0] == 404)
    with pytest.raises(libvirt.libvirtError):
        compute.lookupByUUIDString(server_id)
    hyp = _wait("resources freed", lambda: _hypervisor(http, "e2e-compute", running_vms=0))
    assert (hyp["vcpus_used"], hyp["memory_mb_used"], hyp["local_gb_used"]) == (0, 0, 0)


def test_no_room_anywhere_puts_the_server_in_error_with_a_fault(
    parts: tuple[Settings, Http], compute: libvirt.virConnect
) -> None:
    _, http = parts
    _wait("the hypervisor to register", lambda: _hypervisor(http, "e2e-compute"))
    http.call(
        "POST",
        "/v2.1/flavors",
        # within the project's RAM quota (50 GiB), beyond the 4 GiB host
        {"flavor": {"name": "huge", "id": "huge", "ram": 16384, "vcpus": 1, "disk": 1}},
    )
    status, _, body = http.call(
        "POST", "/v2.1/servers", {"server": {"name": "big", "flavorRef": "huge"}}
    )
    assert status == 202, body
    server = _wait("ERROR", lambda: _server_in(http, body["server"]["id"], "ERROR"))
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
