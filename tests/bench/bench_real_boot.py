"""Boot times of real QEMU guests through the API: ``POST /v2.1/servers`` → ACTIVE → the guest's
marker on its serial console, at 1, 10 and 50 concurrent boots, against QEMU's own floor.

Run: ``python -m tests.bench.bench_real_boot [--concurrency 1,10,50] [--sequential 3]`` (root; a few
minutes). It installs and starts what it needs as ``tests/test_real_guest.py`` does
(``tests.fixtures.qemu``: QEMU, libvirtd on ``qemu:///system``, the guest built from Debian's
packages), its own nats-server, PostgreSQL from ``DATABASE_URL`` (else 127.0.0.1:5432, else an
embedded one) in a database of its own, and the control plane as deployed, each part its own process:
the API (gunicorn, 2 workers), the projector, the scheduler and one hypervisor worker on QEMU. The
guest's kernel and initramfs are uploaded through the image API, and a flavor of 1 vCPU / 128 MiB is
created; the host's VCPU allocation ratio is raised to 32 through Placement (a 2-core host offers 8
vCPUs at the default 4). For each concurrency C, C clients each ``POST /servers`` once (C = 1:
``--sequential`` boots one after another); a boot's times run from just before its POST to the
moment the log shows it ACTIVE (``Instance.Spawned``, followed by one reader) and to the moment its
console log (written by QEMU on the host's disk) shows the marker. Between levels every server is
deleted and the bench waits for libvirt to have no domain left.

The floor, in the same run: the same guest defined and started directly through ``LibvirtDriver``
on ``qemu:///system``, one at a time, until its marker.
"""

from __future__ import annotations

import argparse
import dataclasses
import http.client
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import libvirt

from stratus.eventstore.subjects import encode_token
from tests.bench.bench_boot import _until, control_plane, percentile, send
from tests.bench.bench_placement import Watcher
from tests.bench.harness import loadavg, machine_lines
from tests.fixtures import qemu
from workers.libvirt_driver import LibvirtDriver
from workers.virt import BootImage, GuestSpec

HOST = "bench-qemu"
CPU_ALLOCATION_RATIO = 32.0  # 2 cores x 32: room for 50 one-vCPU guests (memory: 50 x 128 MiB)
BOOT_TIMEOUT = 600.0


@dataclasses.dataclass
class Round:
    concurrency: int
    to_active: list[float]
    to_marker: list[float]
    errors: dict[str, int]
    seconds: float


def upload(port: int, token: str, path: Path, **fields: Any) -> str:
    status, doc = send(port, token, "POST", "/image/v2/images", {"name": path.name, **fields})
    assert status == 201, doc
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        headers = {"X-Auth-Token": token, "Content-Type": "application/octet-stream"}
        conn.request("PUT", f"/image/v2/images/{doc['id']}/file", path.read_bytes(), headers)
        r = conn.getresponse()
        r.read()
        assert r.status == 204, r.status
    finally:
        conn.close()
    return str(doc["id"])


def overcommit_vcpus(port: int, token: str, ratio: float) -> None:
    """Let the one host take 50 one-vCPU guests: its VCPU inventory's allocation ratio, set through
    Placement as an operator would (a 2-core host has 8 vCPUs at the default ratio of 4)."""
    status, doc = send(port, token, "GET", "/placement/resource_providers", None)
    assert status == 200, doc
    (provider,) = doc["resource_providers"]
    path = f"/placement/resource_providers/{provider['uuid']}/inventories"
    status, inv = send(port, token, "GET", path, None)
    assert status == 200, inv
    vcpu = {**inv["inventories"]["VCPU"], "allocation_ratio": ratio}
    body = {"resource_provider_generation": inv["resource_provider_generation"], **vcpu}
    status, doc = send(port, token, "PUT", f"{path}/VCPU", body)
    assert status == 200, doc


def fault_of(port: int, token: str, server_id: str) -> str:
    status, doc = send(port, token, "GET", f"/v2.1/servers/{server_id}", None)
    fault = (doc or {}).get("server", {}).get("fault") or {}
    return f"{fault.get('message', f'HTTP {status}')} {fault.get('details', '')}"[:300]


def marker_seen(log: Path) -> bool:
    try:
        return qemu.MARKER.encode() in log.read_bytes()
    except OSError:
        return False


def boots(
    port: int, token: str, watcher: Watcher, body: dict[str, Any], consoles: Path, c: int, n: int
) -> Round:
    """``c`` clients, each booting ``n`` servers one after another."""
    to_active: list[float] = []
    to_marker: list[float] = []
    errors: dict[str, int] = {}
    lock = threading.Lock()
    start = threading.Barrier(c + 1)

    def client(k: int) -> None:
        start.wait()
        for i in range(n):
            began = time.perf_counter()
            status, doc = send(
                port, token, "POST", "/v2.1/servers", {"server": {**body, "name": f"q{c}-{k}-{i}"}}
            )
            outcome = watcher.wait(doc["server"]["id"], BOOT_TIMEOUT) if status == 202 else None
            if outcome is None or outcome[1] != "spawned":
                why = f"HTTP {status}" if status != 202 else "no answer"
                if outcome is not None:
                    why = fault_of(port, token, doc["server"]["id"])
                with lock:
                    errors[why] = errors.get(why, 0) + 1
                continue
            log = consoles / doc["server"]["id"] / "console.log"
            deadline = began + BOOT_TIMEOUT
            while not marker_seen(log) and time.perf_counter() < deadline:
                time.sleep(0.05)
            marked = time.perf_counter()
            with lock:
                to_active.append(outcome[0] - began)
                if marker_seen(log):
                    to_marker.append(marked - began)
                else:
                    errors["no marker"] = errors.get("no marker", 0) + 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(c)]
    for t in threads:
        t.start()
    start.wait()
    began = time.perf_counter()
    for t in threads:
        t.join()
    return Round(c, to_active, to_marker, errors, time.perf_counter() - began)


def delete_all(port: int, token: str) -> None:
    status, doc = send(port, token, "GET", "/v2.1/servers?all_tenants=1", None)
    assert status == 200, doc
    for server in doc["servers"]:
        send(port, token, "DELETE", f"/v2.1/servers/{server['id']}", None)

    def no_domains() -> bool:
        conn = libvirt.open(qemu.URI)
        try:
            return not conn.listAllDomains()
        finally:
            conn.close()

    _until(no_domains, "domains left", timeout=300)


def floor(guest_files: Path, runs: int, tmp: Path) -> list[float]:
    """QEMU's own time: define and start the same guest directly, until its marker; one at a time."""
    driver = LibvirtDriver.open(qemu.URI, instances_path=tmp / "floor")
    boot = BootImage(
        kernel=str(guest_files / "vmlinuz"),
        initrd=str(guest_files / "initrd"),
        cmdline=(guest_files / "cmdline").read_text().strip(),
    )
    times: list[float] = []
    try:
        for _ in range(runs):
            guest_id = str(uuid.uuid4())
            log = tmp / "floor" / guest_id / "console.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            began = time.perf_counter()
            driver.spawn(GuestSpec(guest_id, 1, 128, boot, str(log)))
            while not marker_seen(log) and time.perf_counter() - began < BOOT_TIMEOUT:
                time.sleep(0.05)
            times.append(time.perf_counter() - began)
            driver.destroy(guest_id)
    finally:
        driver.close()
    return times


def table(rounds: list[Round], direct: list[float]) -> str:
    f50 = statistics.median(direct)
    lines = [
        "| concurrent boots | boots | errors | wall s | POST→ACTIVE p50 s | p99 s "
        "| POST→marker p50 s | p99 s | marker p50 / floor p50 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rounds:
        a50, a99 = percentile(r.to_active, 0.5), percentile(r.to_active, 0.99)
        m50, m99 = percentile(r.to_marker, 0.5), percentile(r.to_marker, 0.99)
        lines.append(
            f"| {r.concurrency} | {len(r.to_marker)} | {sum(r.errors.values())} | {r.seconds:.1f} "
            f"| {a50:.2f} | {a99:.2f} | {m50:.2f} | {m99:.2f} | {m50 / f50:.1f} |"
        )
    lines.append(
        f"| floor: `LibvirtDriver.spawn` on QEMU, one at a time | {len(direct)} | 0 | {sum(direct):.1f} "
        f"| | | {f50:.2f} | {percentile(direct, 0.99):.2f} | 1 |"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_real_boot", description=__doc__)
    parser.add_argument("--concurrency", default="1,10,50")
    parser.add_argument("--sequential", type=int, default=3, help="boots one after another at concurrency 1")
    args = parser.parse_args(argv)
    levels = [int(c) for c in args.concurrency.split(",")]

    with (
        tempfile.TemporaryDirectory(prefix="stratus-bench-qemu-") as d,
        qemu.libvirtd(Path(d) / "libvirtd.log"),
    ):
        tmp = Path(d)
        guest_files = qemu.build_guest(tmp / "guest")
        settings = {"host_name": HOST, "libvirt_uri": qemu.URI, "reconcile_interval_seconds": 0.0}
        with control_plane("bench_qemu", tmp, [["scheduler"], ["hypervisor"]], **settings) as cloud:
            port, token = cloud.port, cloud.token
            consoles = cloud.settings.data_dir / "instances" / encode_token(HOST)
            status, doc = send(port, token, "POST", "/v2.1/flavors", {"flavor": {
                "name": "q.tiny", "ram": 128, "vcpus": 1, "disk": 1}})  # fmt: skip
            assert status == 200, doc
            kernel = upload(port, token, guest_files / "vmlinuz", disk_format="aki", container_format="aki")
            ramdisk = upload(port, token, guest_files / "initrd", disk_format="ari", container_format="ari")
            image = upload(
                port, token, guest_files / "cmdline", disk_format="raw", container_format="bare",
                kernel_id=kernel, ramdisk_id=ramdisk,
                os_command_line=(guest_files / "cmdline").read_text().strip(),
            )  # fmt: skip
            body = {"flavorRef": doc["flavor"]["id"], "imageRef": image, "networks": "none"}
            watcher = Watcher(cloud.settings).start()
            try:
                cloud.wait_for_hosts(1)
                overcommit_vcpus(port, token, CPU_ALLOCATION_RATIO)
                print("\n".join(machine_lines({"postgresql": cloud.pg_source, "hypervisor": "QEMU (TCG)"})))
                rounds = []
                for c in levels:
                    print(f"{c} concurrent (load {loadavg()})", flush=True)
                    n = args.sequential if c == 1 else 1
                    rounds.append(boots(port, token, watcher, body, consoles, c, n))
                    delete_all(port, token)
            finally:
                watcher.close()
        direct = floor(guest_files, args.sequential, tmp)
    print(f"load average at end: {loadavg()}")
    print()
    print(table(rounds, direct))
    for r in rounds:
        if r.errors:
            print(f"errors at {r.concurrency} concurrent: {r.errors}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
