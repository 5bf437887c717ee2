"""The config drive on libvirt's test driver: the hypervisor worker's spawn writes an ISO 9660 image
labelled ``config-2`` with the metadata trees, built from the log and the user-data store, attaches
it to the domain as a cdrom, and deletes it with the guest (and when the spawn fails). The ISO is
read back with pycdlib, as a guest's kernel would read its Rock Ridge names.
"""

from __future__ import annotations

import io
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import libvirt
import orjson
import pycdlib
import pytest

from commands import loaders
from commands.hosts.register import RegisterHost
from commands.images.create import CreateImage, RecordImageUpload
from commands.instance import Instance
from commands.keypairs.manage import CreateKeyPair
from commands.servers.create import CreateServer
from commands.servers.delete import DeleteServer
from commands.servers.scheduling import PlaceInstance
from commands.states import VmState
from stratus.imagestore import BlobStore, ImageStore
from stratus.metadata.vendordata import Providers
from tests.fixtures.commands import M1_SMALL
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.hypervisor import FAST_RETRY, HOST
from workers.compute import DELETION_REQUESTED, SCHEDULED, SPAWN_FAILED, Compute
from workers.config_drive import ConfigDrives
from workers.libvirt_driver import LibvirtDriver, domain_xml
from workers.virt import GuestSpec

pytestmark = pytest.mark.flavors(M1_SMALL)

USER_DATA = b"#!/bin/sh\necho hello from the config drive\n"


def compute(handlers: Handlers, driver: LibvirtDriver, tmp_path: Path) -> tuple[Compute, BlobStore]:
    """``HOST``'s steps with config drives, and the user-data store they read."""
    handlers.register_host(RegisterHost(HOST, vcpus=4, memory_mb=8192, disk_gb=100))
    user_data = BlobStore(tmp_path / "user_data")
    providers = Providers(("StaticJSON",), {"vendor": "stratus"}, (), 1.0, 1.0)
    drives = ConfigDrives(
        handlers.bus,
        instances_path=tmp_path,
        user_data=user_data,
        providers=providers,
        fixed_cidr="10.0.0.0/24",
    )
    steps = Compute(
        handlers.bus, driver, HOST, instances_path=tmp_path, retry=FAST_RETRY, config_drives=drives
    )
    return steps, user_data


def create(handlers: Handlers, **fields: Any) -> str:
    server = handlers.create_server(CreateServer("vm", "p1", "u1", "small", **fields)).id
    handlers.place_instance(PlaceInstance(server, HOST))
    return server


def cdroms(conn: libvirt.virConnect, server: str) -> list[str]:
    """The source files of the domain's cdrom disks."""
    xml = ET.fromstring(conn.lookupByUUIDString(server).XMLDesc())
    return [d.find("source").get("file") for d in xml.iter("disk") if d.get("device") == "cdrom"]  # type: ignore[union-attr]


def read_iso(path: str) -> tuple[str, dict[str, bytes]]:
    """The volume label and every file (by its Rock Ridge path) of the ISO at ``path``."""
    iso = pycdlib.PyCdlib()
    iso.open(path)
    try:
        label = iso.pvd.volume_identifier.decode().strip()
        files: dict[str, bytes] = {}
        for root, _dirs, names in iso.walk(rr_path="/"):
            for name in names:
                out = io.BytesIO()
                iso.get_file_from_iso_fp(out, rr_path=f"{root.rstrip('/')}/{name}")
                files[f"{root.rstrip('/')}/{name}"] = out.getvalue()
        return label, files
    finally:
        iso.close()


def test_spawn_attaches_a_config_2_iso_with_the_metadata_trees(
    handlers: Handlers, driver: LibvirtDriver, conn: libvirt.virConnect, tmp_path: Path
) -> None:
    steps, store = compute(handlers, driver, tmp_path)
    handlers.bus.handle(CreateKeyPair("u1", "mykey"))
    key = loaders.keypair(handlers.bus.uow, "u1", "mykey").public_key
    filed = {"id": store.put(USER_DATA), "size": len(USER_DATA)}
    server = create(handlers, config_drive=True, user_data=filed, key_name="mykey", metadata={"role": "db"})
    steps.handle(SCHEDULED, server, 1)
    assert handlers.instance(server).vm_state == VmState.ACTIVE

    (source,) = cdroms(conn, server)
    assert source == str((tmp_path / server / "disk.config").absolute())
    label, files = read_iso(source)
    assert label == "config-2"
    meta = orjson.loads(files["/openstack/latest/meta_data.json"])
    assert meta["uuid"] == server and meta["name"] == "vm" and meta["meta"] == {"role": "db"}
    assert meta["public_keys"] == {"mykey": key} and meta["project_id"] == "p1"
    assert meta["availability_zone"] == "nova" and meta["hostname"] == "vm"
    assert files["/openstack/latest/user_data"] == USER_DATA
    assert orjson.loads(files["/openstack/latest/vendor_data.json"]) == {"vendor": "stratus"}
    assert orjson.loads(files["/openstack/latest/vendor_data2.json"]) == {"static": {"vendor": "stratus"}}
    assert orjson.loads(files["/openstack/latest/network_data.json"]) == {}  # no network configured
    # Every dated version, each with what it has (Nova's tree: 2012-08-10 has no vendor data yet).
    assert sorted(n for n in files if n.startswith("/openstack/2012-08-10/")) == [
        "/openstack/2012-08-10/meta_data.json",
        "/openstack/2012-08-10/user_data",
    ]
    assert "random_seed" not in orjson.loads(files["/openstack/2012-08-10/meta_data.json"])
    assert "/openstack/2018-08-27/network_data.json" in files
    assert not any(n.endswith("/password") for n in files)
    # The EC2 tree, of the versions Nova's config drive keeps.
    ec2 = orjson.loads(files["/ec2/latest/meta-data.json"])
    assert ec2["instance-id"] == f"i-{server.replace('-', '')[:8]}" and ec2["hostname"] == "vm"
    assert ec2["public-keys"]["0"]["openssh-key"] == key
    assert files["/ec2/2009-04-04/user-data"] == USER_DATA
    assert {n.split("/")[2] for n in files if n.startswith("/ec2/")} == {"2009-04-04", "latest"}


def test_the_drive_goes_with_the_guest(
    handlers: Handlers, driver: LibvirtDriver, conn: libvirt.virConnect, tmp_path: Path
) -> None:
    steps, _ = compute(handlers, driver, tmp_path)
    server = create(handlers, config_drive=True)
    steps.handle(SCHEDULED, server, 1)
    drive = tmp_path / server / "disk.config"
    assert drive.is_file() and cdroms(conn, server) == [str(drive.absolute())]
    handlers.delete_server(DeleteServer(server, "p1"))
    steps.handle(DELETION_REQUESTED, server, 1)
    assert not drive.exists()
    assert server not in {d.UUIDString() for d in conn.listAllDomains()}


def test_a_failed_spawn_leaves_no_drive(
    handlers: Handlers, driver: LibvirtDriver, conn: libvirt.virConnect, tmp_path: Path
) -> None:
    steps, _ = compute(handlers, driver, tmp_path)
    server = handlers.create_server(CreateServer("clash", "p1", "u1", "small", config_drive=True)).id
    squatter = GuestSpec(uuid=str(uuid.uuid4()), vcpus=1, memory_mb=128)  # holds the name the guest needs
    conn.defineXML(domain_xml(squatter).replace(squatter.name, f"instance-{server}"))
    handlers.place_instance(PlaceInstance(server, HOST))
    steps.handle(SCHEDULED, server, 1)
    inst = handlers.instance(server)
    assert inst.vm_state == VmState.ERROR and inst.fault is not None and inst.fault["code"] == SPAWN_FAILED
    assert not (tmp_path / server / "disk.config").exists()


def test_no_drive_unless_asked_or_forced_by_the_image(
    handlers: Handlers, driver: LibvirtDriver, conn: libvirt.virConnect, tmp_path: Path
) -> None:
    steps, _ = compute(handlers, driver, tmp_path)
    plain = create(handlers)
    steps.handle(SCHEDULED, plain, 1)
    assert cdroms(conn, plain) == [] and not (tmp_path / plain / "disk.config").exists()

    # Nova's configdrive.required_by: the image's img_config_drive=mandatory forces it.
    mandatory = {"img_config_drive": "mandatory"}
    image = handlers.bus.handle(
        CreateImage("p1", "cd", disk_format="raw", container_format="bare", properties=mandatory)
    ).id
    stored = ImageStore(tmp_path / "images").receive(image, [b"root"])
    handlers.bus.handle(RecordImageUpload(image, "p1", stored.size, stored.md5, "sha256", stored.sha256))
    forced = create(handlers, image_ref=image)
    assert handlers.instance(forced).config_drive is True
    steps.handle(SCHEDULED, forced, 1)
    (source,) = cdroms(conn, forced)
    assert read_iso(source)[0] == "config-2"


@pytest.mark.parametrize("arch", [None, "aarch64"])
def test_the_cdrom_in_the_domain_xml(arch: str | None) -> None:
    """A read-only raw cdrom: IDE on x86 (i440fx), virtio-scsi where the machine has no IDE."""
    xml = ET.fromstring(
        domain_xml(GuestSpec(str(uuid.uuid4()), 1, 64, config_drive="/d/disk.config"), arch=arch)
    )
    (disk,) = xml.iter("disk")
    assert disk.get("device") == "cdrom" and disk.find("readonly") is not None
    assert disk.find("source").get("file") == "/d/disk.config"  # type: ignore[union-attr]
    target = disk.find("target")
    assert target is not None
    assert (target.get("bus"), target.get("dev")) == (("ide", "hda") if arch is None else ("scsi", "sda"))


def test_old_requests_have_no_config_drive() -> None:
    """Instance.Requested v6 and older had no config_drive: the upcaster reads them as without one."""
    state: dict[str, Any] = {"disk_config": "MANUAL"}
    Instance.Requested.upcast_v6_v7(state)  # type: ignore[attr-defined]
    assert state["config_drive"] is False


def test_the_driver_removes_its_guests_drive_and_nothing_else(
    handlers: Handlers, driver: LibvirtDriver, conn: libvirt.virConnect, tmp_path: Path
) -> None:
    """Whichever step destroys the guest (a shelve offload, a move's source, a reconciled orphan), its
    drive goes with it; a domain naming a file outside the host's instances path leaves that file."""
    steps, _ = compute(handlers, driver, tmp_path)
    server = create(handlers, config_drive=True)
    steps.handle(SCHEDULED, server, 1)
    drive = tmp_path / server / "disk.config"
    driver.destroy(server)
    assert not drive.exists() and server not in {d.UUIDString() for d in conn.listAllDomains()}

    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere" / "x" / "disk.config"
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_bytes(b"not ours")
    stranger = GuestSpec(str(uuid.uuid4()), 1, 64, config_drive=str(elsewhere))
    conn.defineXML(domain_xml(stranger))
    driver.destroy(stranger.uuid)
    assert elsewhere.read_bytes() == b"not ours"
