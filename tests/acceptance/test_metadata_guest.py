"""A real guest (QEMU, TCG) reads its own metadata over HTTP at 169.254.169.254.

The guest's network is QEMU's user-mode network (slirp) on 169.254.0.0/16, whose ``guestfwd``
hands each connection to 169.254.169.254:80 to ``stratus metadata-proxy`` on its standard input and
output; the proxy signs the server's id (``X-Instance-ID``) and passes the request to the real
metadata service, serving the server the Compute API made, from the real read model. The guest is
the busybox guest of ``deploy/guest/build_image.py`` with the kernel's virtio-net modules and an
``/init`` that fetches its metadata, tries to pass for another project's server, posts its password,
prints what it got on the serial console and powers off.

The first test starts QEMU directly with these options (and checks the proxy's signing, a forged
``X-Instance-ID``, the password); the second boots the server through the Compute API on a
hypervisor worker whose domains carry them (``STRATUS_METADATA_GUEST_NETWORK=user``,
``workers.guest_network``), with the guest of ``deploy/guest/build_image.py``, and reads the
``meta_data.json`` its guest printed back through ``os-getConsoleOutput``.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import libvirt
import orjson
import pytest

from api.metadata.app import Deps, create_app
from api.metadata.caller import Identifier
from api.metadata.passwords import PasswordStore
from api.readmodel import open_pool
from commands.network import FixedNetwork
from stratus.config import Settings
from stratus.eventstore import NatsBridge
from stratus.imagestore import user_data_store
from stratus.metadata.vendordata import Providers
from tests.fixtures import qemu
from tests.fixtures.api import P1, P2, Stack
from tests.fixtures.guests import boot_guest, remove_guest, wait
from tests.fixtures.hypervisor import stack_host
from tests.fixtures.processes import ROOT
from workers.libvirt_driver import LibvirtDriver

pytestmark = pytest.mark.slow

MODULES = (
    "virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci", "failover",
    "net_failover", "virtio_net",
)  # fmt: skip
METADATA = "http://169.254.169.254/openstack/latest"
INIT = f"""#!/bin/busybox sh
/bin/busybox mkdir -p /proc /sys /dev /tmp
/bin/busybox mount -t devtmpfs devtmpfs /dev
exec >/dev/console 2>&1 </dev/console
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
for m in {" ".join(MODULES)}; do insmod /lib/modules/$m.ko; done
ip link set eth0 up
ip addr add 169.254.0.15/16 dev eth0
echo BEGIN-META; wget -q -O - {METADATA}/meta_data.json; echo; echo END-META
echo BEGIN-USER; wget -q -O - {METADATA}/user_data; echo; echo END-USER
echo BEGIN-FORGED; wget -q -O - --header "X-Instance-ID: $(cat /proc/cmdline | sed 's/.*other=//')" \\
  --header "X-Tenant-ID: someone-else" {METADATA}/meta_data.json; echo; echo END-FORGED
wget -q -O - --post-data=guest-password {METADATA}/password
echo BEGIN-PASSWORD; wget -q -O - {METADATA}/password; echo; echo END-PASSWORD
poweroff -f
"""
# Run with deploy/guest/build_image.py's helpers: the kernel and busybox from Debian's packages, and
# an initramfs of busybox, the modules above and INIT.
BUILD = """
import gzip, shutil, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import build_image as b
out, init, modules = Path(sys.argv[2]), sys.argv[3], sys.argv[4].split()
with tempfile.TemporaryDirectory(prefix="stratus-guest-") as tmp:
    work = Path(tmp)
    work.chmod(0o755)
    kernel = b.unpack(b.kernel_package(), work)
    busybox = (b.unpack("busybox-static", work) / "bin" / "busybox").read_bytes()
    shutil.copyfile(next(kernel.glob("boot/vmlinuz-*")), out / "vmlinuz")
    cpio = b.Cpio()
    for d in ("bin", "sbin", "dev", "proc", "sys", "tmp", "lib", "lib/modules"):
        cpio.dir(d)
    cpio.chardev("dev/console", 5, 1)
    cpio.file("bin/busybox", busybox, 0o755)
    cpio.file("init", init.encode(), 0o755)
    for name in modules:
        cpio.file(f"lib/modules/{name}.ko", b.module(kernel, name))
    (out / "initrd").write_bytes(gzip.compress(cpio.close(), 6))
"""


@pytest.fixture(scope="module")
def own_init_guest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The guest with this module's ``/init`` (fetch, forge, post, print, power off), for QEMU
    started directly."""
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("real QEMU: qemu-system-x86_64 is not installed (tests/fixtures/qemu.py installs it)")
    out = tmp_path_factory.mktemp("metadata-guest")
    argv = [sys.executable, "-c", BUILD, str(ROOT / "deploy" / "guest"), str(out), INIT, " ".join(MODULES)]
    built = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    if built.returncode != 0:
        pytest.skip(f"real QEMU: the guest cannot be built (apt-get download?): {built.stderr[-400:]}")
    return out


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def service(stack: Stack, api_settings: Settings) -> Iterator[tuple[str, Path]]:
    """The metadata service on a port of this machine, and its proxy key file."""
    key = api_settings.data_dir / "metadata-proxy.key"
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_bytes(base64.b64encode(os.urandom(32)))
    pool = open_pool(api_settings.database_url or "")
    deps = Deps(
        pool=pool,
        settings=api_settings,
        identifier=Identifier(key.read_bytes().strip(), "off"),
        providers=Providers(("StaticJSON",), {}, (), 5.0, 5.0),
        user_data=user_data_store(api_settings.data_dir),
        passwords=PasswordStore(api_settings.data_dir / "metadata_passwords"),
    )
    server: WSGIServer = make_server("127.0.0.1", 0, create_app(deps), handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", key
    finally:
        server.shutdown()
        server.server_close()
        pool.close()


def _server(stack: Stack, who: str, name: str, user_data: bytes) -> dict[str, Any]:
    stack.handlers.network = FixedNetwork("private", "10.0.0.0/24")
    flavors = stack.get("/v2.1/flavors", who).json["flavors"]
    flavor_id = flavors[0]["id"] if flavors else stack.flavor(id="tiny")[0]
    body = {
        "server": {"name": name, "flavorRef": flavor_id, "user_data": base64.b64encode(user_data).decode()}
    }
    r = stack.request("POST", "/v2.1/servers", who, json=body)
    assert r.status_code == 202, r.text
    r = stack.get(f"/v2.1/servers/{r.json['server']['id']}", who, after=int(r.headers["X-Stratus-Position"]))
    return dict(r.json["server"])


def _between(console: str, name: str) -> str:
    return console.split(f"BEGIN-{name}", 1)[1].split(f"END-{name}", 1)[0].strip()


def test_the_real_guest_reads_its_own_metadata_at_169_254_169_254(
    stack: Stack, api_settings: Settings, service: tuple[str, Path], own_init_guest: Path
) -> None:
    address, key = service
    mine = _server(stack, P1, "guest-one", b"#!/bin/sh\necho user data of guest one\n")
    theirs = _server(stack, P2, "other-project", b"p2 secret")
    proxy = (
        f"env PYTHONPATH={ROOT} STRATUS_METADATA_PROXY_KEY_FILE={key} {sys.executable} -m processes.cli"
        f" metadata-proxy --instance-id {mine['id']} --project-id {mine['tenant_id']} --service {address}"
    )
    assert "," not in proxy  # QEMU's option syntax would need it doubled
    netdev = f"user,id=n0,net=169.254.0.0/16,host=169.254.0.2,guestfwd=tcp:169.254.169.254:80-cmd:{proxy}"
    argv = [
        "qemu-system-x86_64", "-machine", "accel=tcg", "-m", "256", "-nographic", "-no-reboot",
        "-kernel", str(own_init_guest / "vmlinuz"), "-initrd", str(own_init_guest / "initrd"),
        "-append", f"console=ttyS0 quiet panic=-1 other={theirs['id']}",
        "-netdev", netdev, "-device", "virtio-net-pci,netdev=n0",
    ]  # fmt: skip
    ran = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    console = ran.stdout.replace("\r", "")
    assert "END-PASSWORD" in console, (ran.returncode, console[-3000:], ran.stderr[-2000:])

    md = orjson.loads(_between(console, "META"))
    assert md["uuid"] == mine["id"] and md["name"] == "guest-one" and md["project_id"] == mine["tenant_id"]
    assert md["hostname"] == "guest-one.novalocal"
    assert _between(console, "USER") == "#!/bin/sh\necho user data of guest one"
    # the guest's own X-Instance-ID is dropped by the proxy: it is still itself, never P2's server
    assert orjson.loads(_between(console, "FORGED"))["uuid"] == mine["id"]
    assert "p2 secret" not in console and theirs["id"] not in _between(console, "META")
    assert _between(console, "PASSWORD") == "guest-password"
    stored = api_settings.data_dir / "metadata_passwords" / mine["id"]
    assert stored.read_bytes() == b"guest-password"


# -- the guest booted by the hypervisor worker, through the Compute API ------------------------------
HOST = "metadata-guest-host"
METADATA = "STRATUS-METADATA"  # deploy/guest/build_image.py's lines around the meta_data.json it read


def test_a_guest_booted_through_the_api_reads_its_metadata_through_the_workers_network(
    stack: Stack,
    api_settings: Settings,
    bridge: NatsBridge,
    service: tuple[str, Path],
    guest_files: Path,
    tmp_path: Path,
) -> None:
    address, key = service
    settings = dataclasses.replace(
        api_settings,
        host_name=HOST,
        metadata_guest_network="user",
        metadata_bind=address,
        metadata_proxy_key_file=key,
    )
    instances = tmp_path / "instances"
    instances.mkdir()
    driver = LibvirtDriver.open(qemu.URI, instances_path=instances, shutdown_timeout=30.0)
    conn = libvirt.open(qemu.URI)

    worker = stack_host(stack.handlers.app, settings, bridge, driver, instances, poll=0.2, host=HOST)
    server_id = ""
    try:
        server_id = boot_guest(stack, guest_files, HOST, name="reads-its-metadata")

        # the domain carries the network: QEMU's user-mode netdev with the forward, signed for this server
        xml = wait("the domain", lambda: _domain_xml(conn, server_id), 60)
        assert "guestfwd=tcp:169.254.169.254:80-cmd:" in xml and f"--instance-id {server_id}" in xml
        qemu_log = Path("/var/log/libvirt/qemu") / f"instance-{server_id}.log"
        started = wait("QEMU's command line", lambda: qemu_log.is_file() and qemu_log.read_text(), 60)
        assert "spawn=deny" not in started, (
            "libvirt runs QEMU with seccomp's spawn=deny: QEMU cannot start the metadata proxy. "
            "Set seccomp_sandbox = 0 in /etc/libvirt/qemu.conf and restart libvirtd (docs/metadata.md)"
        )

        def console() -> str:
            r = stack.request(
                "POST", f"/v2.1/servers/{server_id}/action", P1, json={"os-getConsoleOutput": {}}
            )
            return str(r.json["output"]) if r.status_code == 200 else ""

        try:
            printed = wait(
                f"{METADATA} end on the console", lambda: (c := console()).count(f"{METADATA} end") and c, 150
            )
        except AssertionError as e:
            raise AssertionError(f"{e}; the console: {console()[-3000:]}") from None
        text = printed.replace("\r", "").split(f"{METADATA} begin", 1)[1].split(f"{METADATA} end", 1)[0]
        md = orjson.loads(text.strip())
        server = stack.get(f"/v2.1/servers/{server_id}", P1).json["server"]
        assert md["uuid"] == server_id and md["name"] == "reads-its-metadata"
        assert md["project_id"] == server["tenant_id"] and md["hostname"] == "reads-its-metadata.novalocal"

        assert stack.request("DELETE", f"/v2.1/servers/{server_id}", P1).status_code == 204
        wait("the guest to go", lambda: _domain_xml(conn, server_id) is None or None, 60)
    finally:
        worker.close()
        remove_guest(conn, server_id)
        conn.close()
        driver.close()


def _domain_xml(conn: libvirt.virConnect, server_id: str) -> str | None:
    try:
        return str(conn.lookupByUUIDString(server_id).XMLDesc(0))
    except libvirt.libvirtError:
        return None
