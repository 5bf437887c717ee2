"""The libvirt port against libvirt's own test hypervisor: XML, lifecycle, inventory, error classes."""

from __future__ import annotations

import dataclasses
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import libvirt
import pytest

from commands.states import PowerState
from stratus.config import Settings
from workers.guest_network import MetadataNetwork
from workers.libvirt_driver import QEMU_NAMESPACE, LibvirtDriver, domain_xml
from workers.virt import BootImage, DomainNotFound, GuestSpec, PermanentVirtError, TemporaryVirtError

HOST_XML = """<?xml version="1.0"?>
<node>
  <cpu>
    <mhz>2000</mhz><model>x86_64</model>
    <nodes>1</nodes><sockets>1</sockets><cores>{vcpus}</cores><threads>1</threads>
    <active>{vcpus}</active><max>{vcpus}</max>
  </cpu>
  <memory>{memory_kib}</memory>
  <pool type='dir'>
    <name>default</name>
    <uuid>dfe224cb-28fb-8dd0-c4b2-64eb3f0f4566</uuid>
    <capacity unit='GiB'>{disk_gb}</capacity>
    <allocation unit='GiB'>0</allocation>
    <available unit='GiB'>{disk_gb}</available>
    <target><path>/var/lib/libvirt/images</path></target>
  </pool>
</node>
"""


def write_host_xml(directory: Path, vcpus: int = 8, memory_mb: int = 16384, disk_gb: int = 200) -> str:
    path = directory / "host.xml"
    path.write_text(HOST_XML.format(vcpus=vcpus, memory_kib=memory_mb * 1024, disk_gb=disk_gb))
    return f"test://{path}"


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[libvirt.virConnect]:
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    c = libvirt.open(write_host_xml(tmp_path))
    yield c
    c.close()


@pytest.fixture
def driver(conn: libvirt.virConnect, tmp_path: Path) -> LibvirtDriver:
    return LibvirtDriver(lambda: conn, instances_path=tmp_path)


def guest(tmp_path: Path, **kw: object) -> GuestSpec:
    u = str(uuid.uuid4())
    fields: dict[str, object] = {
        "uuid": u,
        "vcpus": 1,
        "memory_mb": 256,
        "console_log": str(tmp_path / "instances" / u / "console.log"),
    }
    fields.update(kw)
    return GuestSpec(**fields)  # type: ignore[arg-type]


def test_domain_xml_names_sizes_and_boots_the_guest(tmp_path: Path) -> None:
    g = guest(tmp_path, vcpus=2, memory_mb=512, boot=BootImage("/k/vmlinuz", "/k/initrd", "console=ttyS0"))
    root = ET.fromstring(domain_xml(g))
    assert root.get("type") == "qemu"
    assert root.findtext("name") == f"instance-{g.uuid}"
    assert root.findtext("uuid") == g.uuid
    assert (root.findtext("memory"), root.find("memory").get("unit")) == ("512", "MiB")  # type: ignore[union-attr]
    assert root.findtext("vcpu") == "2"
    assert root.findtext("os/kernel") == "/k/vmlinuz"
    assert root.findtext("os/initrd") == "/k/initrd"
    assert root.findtext("os/cmdline") == "console=ttyS0"
    # a pty for libvirt's console stream (the serial console), logged to the file the console
    # output is read from
    serial = root.find("devices/serial")
    assert serial is not None and serial.get("type") == "pty"
    assert serial.find("log").get("file") == g.console_log  # type: ignore[union-attr]
    assert root.find("devices/console/target").get("type") == "serial"  # type: ignore[union-attr]
    # a VNC display, on the host's loopback only (the hypervisor worker relays it)
    graphics = root.find("devices/graphics")
    assert graphics is not None and (graphics.get("type"), graphics.get("listen")) == ("vnc", "127.0.0.1")


def test_domain_xml_without_kernel_or_console(tmp_path: Path) -> None:
    root = ET.fromstring(domain_xml(guest(tmp_path, console_log=None)))
    assert root.find("os/kernel") is None
    assert root.find("devices/serial") is None


PROXY = ("env", "STRATUS_METADATA_PROXY_KEY_FILE=/keys/a,b", "/venv/bin/python", "-m", "processes.cli",
         "metadata-proxy", "--instance-id", "i-1", "--project-id", "p 1")  # fmt: skip


def test_domain_xml_gives_the_metadata_network_through_qemus_options(tmp_path: Path) -> None:
    g = guest(tmp_path, metadata_proxy=PROXY, mac="fa:16:3e:00:00:01")
    root = ET.fromstring(domain_xml(g, metadata_network=True))
    args = [a.get("value") for a in root.findall(f"{{{QEMU_NAMESPACE}}}commandline/{{{QEMU_NAMESPACE}}}arg")]
    assert args[0] == "-netdev" and args[2] == "-device"
    # restricted to the forward; the command shell-quoted for QEMU's /bin/sh -c, commas doubled
    assert args[1] == (
        "user,id=stratus-metadata,net=169.254.0.0/16,host=169.254.0.2,restrict=on,"
        "guestfwd=tcp:169.254.169.254:80-cmd:env STRATUS_METADATA_PROXY_KEY_FILE=/keys/a,,b /venv/bin/python"
        " -m processes.cli metadata-proxy --instance-id i-1 --project-id 'p 1'"
    )
    assert args[3] == "virtio-net-pci,netdev=stratus-metadata,addr=0x1e,mac=fa:16:3e:00:00:01"
    # not asked (a host that is not QEMU), or no proxy: no network at all
    for xml in (domain_xml(g), domain_xml(guest(tmp_path), metadata_network=True)):
        assert "commandline" not in xml and "qemu/1.0" not in xml


def test_the_test_driver_runs_a_guest_without_the_metadata_network(
    driver: LibvirtDriver, conn: libvirt.virConnect, tmp_path: Path
) -> None:
    """A worker with the network enabled on libvirt's test driver: its guests run, without it."""
    g = guest(tmp_path, metadata_proxy=PROXY)
    assert driver.spawn(g) == PowerState.RUNNING
    assert "commandline" not in conn.lookupByUUIDString(g.uuid).XMLDesc(0)


def test_the_metadata_network_needs_the_proxy_key(tmp_path: Path) -> None:
    settings = Settings()
    assert MetadataNetwork.configured(settings) is None  # off by default
    with pytest.raises(ValueError, match="STRATUS_METADATA_PROXY_KEY_FILE"):
        MetadataNetwork.configured(dataclasses.replace(settings, metadata_guest_network="user"))
    on = dataclasses.replace(
        settings,
        metadata_guest_network="user",
        metadata_proxy_key_file=tmp_path / "k",
        metadata_bind="10.0.0.1:8776",
    )
    network = MetadataNetwork.configured(on)
    assert network is not None
    command = network.proxy_command("i-1", "p1")
    assert command[-6:] == ("--instance-id", "i-1", "--project-id", "p1", "--service", "10.0.0.1:8776")
    assert f"STRATUS_METADATA_PROXY_KEY_FILE={tmp_path / 'k'}" in command
    assert Settings.from_env({"STRATUS_METADATA_GUEST_NETWORK": "user"}).metadata_guest_network == "user"
    with pytest.raises(ValueError, match="STRATUS_METADATA_GUEST_NETWORK"):
        Settings.from_env({"STRATUS_METADATA_GUEST_NETWORK": "bridge"})


def test_inventory_comes_from_the_host(tmp_path: Path) -> None:
    d = LibvirtDriver.open(write_host_xml(tmp_path, vcpus=4, memory_mb=8192, disk_gb=100))
    try:
        inv = d.inventory()
    finally:
        d.close()
    assert (inv.vcpus, inv.memory_mb, inv.disk_gb, inv.hypervisor_type) == (4, 8192, 100, "TEST")


def test_inventory_without_a_storage_pool_measures_the_instances_path(tmp_path: Path) -> None:
    d = LibvirtDriver.open("test:///default", instances_path=tmp_path)
    try:
        inv = d.inventory()
    finally:
        d.close()
    assert inv.vcpus == 16 and inv.memory_mb == 3072 and inv.disk_gb >= 0


def test_spawn_runs_the_domain(driver: LibvirtDriver, conn: libvirt.virConnect, tmp_path: Path) -> None:
    g = guest(tmp_path, boot=BootImage("/nonexistent/vmlinuz", cmdline="console=ttyS0"))
    assert driver.spawn(g) == PowerState.RUNNING
    dom = conn.lookupByUUIDString(g.uuid)
    assert dom.name() == g.name and dom.isActive()
    assert driver.power_state(g.uuid) == PowerState.RUNNING
    assert [d.uuid for d in driver.list_domains() if d.name == g.name] == [g.uuid]
    assert Path(g.console_log or "").parent.is_dir()


def test_spawn_again_is_harmless(driver: LibvirtDriver, conn: libvirt.virConnect, tmp_path: Path) -> None:
    g = guest(tmp_path)
    driver.spawn(g)
    assert driver.spawn(g) == PowerState.RUNNING
    conn.lookupByUUIDString(g.uuid).destroy()  # defined but stopped, as after a crash mid-spawn
    assert driver.spawn(g) == PowerState.RUNNING


def test_a_soft_reboot_shuts_the_guest_down_and_starts_it_again(
    driver: LibvirtDriver, conn: libvirt.virConnect, tmp_path: Path
) -> None:
    """As Nova's: the guest's ACPI power button, then a start (a new run of the domain: a new id)."""
    assert_rebooted_softly(driver, conn, guest(tmp_path))


def assert_rebooted_softly(driver: LibvirtDriver, conn: libvirt.virConnect, g: GuestSpec) -> None:
    """``g`` spawned, then soft-rebooted by ``driver``: running, in a new run of its domain."""
    driver.spawn(g)
    before = conn.lookupByUUIDString(g.uuid).ID()
    assert driver.reboot(g.uuid, hard=False) == PowerState.RUNNING
    dom = conn.lookupByUUIDString(g.uuid)
    assert dom.isActive() and dom.ID() != before


class _DeafDomain:
    """A domain whose guest never hears the ACPI power button (still booting, or no handler)."""

    def __init__(self, dom: libvirt.virDomain) -> None:
        self._dom = dom

    def shutdown(self) -> int:
        return 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._dom, name)


class _DeafGuests(LibvirtDriver):
    def _require(self, uuid: str) -> libvirt.virDomain:
        return _DeafDomain(super()._require(uuid))  # type: ignore[return-value]


def test_a_soft_reboot_the_guest_ignores_is_a_power_cycle_at_the_timeout(
    conn: libvirt.virConnect, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A missed button must not leave the server ACTIVE with nothing done (seen with a real guest
    asked to reboot while it was still booting): after the shutdown timeout the guest is powered off
    and started again, as Nova falls back to a hard reboot."""
    deaf = _DeafGuests(lambda: conn, instances_path=tmp_path, shutdown_timeout=0.2)
    assert_rebooted_softly(deaf, conn, guest(tmp_path))
    assert "ignored the ACPI shutdown" in caplog.text


def test_destroy_removes_the_domain_and_is_idempotent(
    driver: LibvirtDriver, conn: libvirt.virConnect, tmp_path: Path
) -> None:
    g = guest(tmp_path)
    driver.spawn(g)
    driver.destroy(g.uuid)
    assert g.uuid not in {d.UUIDString() for d in conn.listAllDomains()}
    driver.destroy(g.uuid)
    with pytest.raises(DomainNotFound):
        driver.power_state(g.uuid)


def test_destroy_a_defined_but_stopped_domain(
    driver: LibvirtDriver, conn: libvirt.virConnect, tmp_path: Path
) -> None:
    g = guest(tmp_path)
    conn.defineXML(domain_xml(g))
    assert driver.power_state(g.uuid) == PowerState.SHUTDOWN
    driver.destroy(g.uuid)
    assert driver.list_domains() == []


def test_a_name_clash_is_permanent(driver: LibvirtDriver, conn: libvirt.virConnect, tmp_path: Path) -> None:
    g = guest(tmp_path)
    squatter = GuestSpec(uuid=str(uuid.uuid4()), vcpus=1, memory_mb=128)
    conn.defineXML(domain_xml(squatter).replace(squatter.name, g.name))
    with pytest.raises(PermanentVirtError) as e:
        driver.spawn(g)
    assert e.value.code == libvirt.VIR_ERR_OPERATION_FAILED
    assert "already exists" in e.value.message
    assert isinstance(e.value.__cause__, libvirt.libvirtError)


def test_invalid_input_is_permanent(driver: LibvirtDriver, tmp_path: Path) -> None:
    with pytest.raises(PermanentVirtError) as e:
        driver.spawn(guest(tmp_path, memory_mb=-1))
    assert not isinstance(e.value, TemporaryVirtError)


def test_a_lost_connection_is_temporary_and_reopened(tmp_path: Path) -> None:
    uri = write_host_xml(tmp_path)
    opened: list[libvirt.virConnect] = []

    def connect() -> libvirt.virConnect:
        opened.append(libvirt.open(uri))
        return opened[-1]

    d = LibvirtDriver(connect)
    d.list_domains()
    opened[0].close()  # the daemon went away under us
    with pytest.raises(TemporaryVirtError):
        d.list_domains()
    assert d.list_domains() == []
    assert len(opened) == 2
    d.close()
