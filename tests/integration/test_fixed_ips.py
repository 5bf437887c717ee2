"""Fixed IPs and direct kernel boot, through the command handlers on the real JetStream log.

Addresses are allocated by events on the ``Network`` aggregate appended atomically with the servers'
``Requested`` events; concurrent creates from several handlers (as several API processes would
be) never get the same address, and a deleted server's address is handed out again.
"""

from __future__ import annotations

import ipaddress
import threading
from pathlib import Path
from uuid import uuid4

import pytest
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import get_topic

from commands.app import Stratus
from commands.errors import InvalidInput, NoMoreFixedIps, NotFound
from commands.flavors.create import CreateFlavor
from commands.images.create import CreateImage, RecordImageUpload
from commands.instance import Instance
from commands.network import FixedNetwork, Network
from commands.servers.create import CreateServer
from commands.servers.delete import DeleteServer
from stratus.config import Settings
from stratus.eventstore import Factory, NatsBridge
from stratus.imagestore import ImageStore
from tests.fixtures.facades.handlers import Handlers
from workers.compute import BootImages
from workers.virt import PermanentVirtError

NET = FixedNetwork("private", "10.9.0.0/27")  # 30 hosts: .1 is the gateway, .2-.30 for servers


def make_handlers(bridge: NatsBridge, settings: Settings, network: FixedNetwork | None = NET) -> Handlers:
    return Handlers(Stratus(Factory(bridge=bridge, settings=settings)), network=network)


@pytest.fixture
def handlers(bridge: NatsBridge, settings: Settings) -> Handlers:
    h = make_handlers(bridge, settings)
    h.create_flavor(CreateFlavor("1", "m1.tiny", 1, 64, 0))
    return h


def test_addresses_are_allocated_released_and_reused(handlers: Handlers) -> None:
    a = handlers.create_server(CreateServer("a", "p1", "u1", "1"))
    b = handlers.create_server(CreateServer("b", "p1", "u1", "1", networks=(str(NET.id),)))
    none = handlers.create_server(CreateServer("c", "p1", "u1", "1", networks="none"))
    port_a, port_b = handlers.instance(a.id).ports[0], handlers.instance(b.id).ports[0]
    assert (port_a["address"], port_b["address"]) == ("10.9.0.2", "10.9.0.3")
    assert port_a["network_name"] == "private" and port_a["mac"].startswith("fa:16:3e:")
    assert port_a["mac"] != port_b["mac"]
    assert handlers.instance(none.id).ports == []
    network: Network = handlers.app.repository.get(NET.id)
    assert isinstance(network, Network) and network.gateway == "10.9.0.1"

    handlers.delete_server(DeleteServer(a.id, "p1"))  # never placed: deleted at once, address released
    c = handlers.create_server(CreateServer("d", "p1", "u1", "1"))
    assert handlers.instance(c.id).ports[0]["address"] == "10.9.0.2"

    with pytest.raises(NotFound, match="Network"):
        handlers.create_server(CreateServer("x", "p1", "u1", "1", networks=(str(uuid4()),)))
    with pytest.raises(InvalidInput, match="duplicated"):
        handlers.create_server(CreateServer("x", "p1", "u1", "1", networks=(str(NET.id), str(NET.id))))


def test_multi_create_is_one_append_and_all_or_nothing(
    handlers: Handlers, bridge: NatsBridge, settings: Settings
) -> None:
    handlers = make_handlers(bridge, settings, FixedNetwork("small", "10.8.0.0/29"))  # .2-.6: 5 addresses
    before = handlers.app.recorder.max_notification_id() or 0
    result = handlers.create_server(CreateServer("web", "p1", "u1", "1", count=3, reservation_id="r-abc"))
    assert len(result.ids) == 3 and result.reservation_id == "r-abc"
    names = [handlers.instance(i).name for i in result.ids]
    assert names == ["web-1", "web-2", "web-3"]
    # one append: a Network.Defined, 3 allocations and 3 Requested (with whatever else a create
    # records, e.g. quota usage), at consecutive positions
    appended = handlers.app.recorder.read_envelopes(before + 1, 100)  # type: ignore[attr-defined]
    types = [e.to_dict()["type"] for e in appended]
    assert types.count("stratus.network.defined") == 1
    assert types.count("stratus.network.addressallocated") == 3
    assert types.count("stratus.instance.requested") == 3
    assert [e.position for e in appended] == list(range(before + 1, result.position + 1))
    # 5 usable addresses, 3 taken: asking for 3 more fails as a whole and takes nothing
    with pytest.raises(NoMoreFixedIps):
        handlers.create_server(CreateServer("big", "p1", "u1", "1", count=3))
    assert (handlers.app.recorder.max_notification_id() or 0) == result.position
    assert len(handlers.create_server(CreateServer("fit", "p1", "u1", "1", count=2)).ids) == 2


def test_concurrent_creates_never_share_an_address(bridge: NatsBridge, settings: Settings) -> None:
    writers = [make_handlers(bridge, settings) for _ in range(4)]
    writers[0].create_flavor(CreateFlavor("1", "m1.tiny", 1, 64, 0))
    created: list[str] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def create(h: Handlers, n: int) -> None:
        try:
            for i in range(5):
                r = h.create_server(CreateServer(f"vm-{n}-{i}", f"p{n}", "u1", "1"))
                with lock:
                    created.append(r.id)
        except BaseException as e:  # collected and asserted below
            errors.append(e)

    threads = [threading.Thread(target=create, args=(h, n)) for n, h in enumerate(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    addresses = [writers[0].instance(i).ports[0]["address"] for i in created]
    assert len(created) == 20 and len(set(addresses)) == 20
    assert all(ipaddress.ip_address(a) in ipaddress.ip_network(NET.cidr) for a in addresses)
    network: Network = writers[0].app.repository.get(NET.id)
    assert sorted(network.allocations) == sorted(addresses)


def test_kernel_and_ramdisk_come_from_the_image_store(handlers: Handlers, tmp_path: Path) -> None:
    store = ImageStore(tmp_path / "images")
    catalog = handlers.bus

    def image(data: bytes, **properties: str) -> str:
        iid = catalog.handle(
            CreateImage("p1", "img", disk_format="raw", container_format="bare", properties=properties)
        ).id
        stored = store.receive(iid, [data])
        catalog.handle(RecordImageUpload(iid, "p1", stored.size, stored.md5, "sha256", stored.sha256))
        return iid

    kernel, ramdisk = image(b"kernel"), image(b"initrd")
    root = image(b"root", kernel_id=kernel, ramdisk_id=ramdisk, os_command_line="console=ttyS0 quiet")
    sid = handlers.create_server(CreateServer("k", "p1", "u1", "1", image_ref=root)).id
    boot = BootImages(handlers.bus, store)(handlers.instance(sid))
    assert boot is not None and Path(boot.kernel).read_bytes() == b"kernel"
    assert boot.initrd is not None and Path(boot.initrd).read_bytes() == b"initrd"
    assert boot.cmdline == "console=ttyS0 quiet"

    plain = handlers.create_server(CreateServer("p", "p1", "u1", "1", image_ref=kernel)).id
    assert BootImages(handlers.bus, store)(handlers.instance(plain)) is None

    store.remove(kernel)  # the kernel's data is gone: the spawn cannot succeed
    with pytest.raises(PermanentVirtError, match="no data"):
        BootImages(handlers.bus, store)(handlers.instance(sid))


def test_a_version_1_requested_event_still_loads(handlers: Handlers) -> None:
    """Servers requested before version 2 load with no image, key pair, ports or tags (the upcaster)."""
    sid = uuid4()
    state = (
        b'{"timestamp":{"_type_":"datetime_iso","_data_":"2026-01-01T00:00:00+00:00"},'
        b'"originator_topic":"commands.instance:Instance","name":"old","project_id":"p1","user_id":"u1",'
        b'"flavor":{"id":"1","name":"m1.tiny","vcpus":1,"ram":64,"disk":0,"ephemeral":0,"swap":0},'
        b'"image_ref":"","metadata":{},"availability_zone":null,"request_key":null}'
    )
    v1 = StoredEvent(
        originator_id=sid, originator_version=1, topic=get_topic(Instance.Requested), state=state
    )
    handlers.app.recorder.insert_events([v1])
    inst = handlers.instance(str(sid))
    assert inst.name == "old" and inst.ports == [] and inst.tags == [] and inst.image is None
    assert inst.key_name is None and inst.user_data is None and inst.description is None
    assert inst.config_drive is False  # version 7's field, through every upcaster
    handlers.delete_server(DeleteServer(str(sid), "p1"))  # and it can still be acted on
    with pytest.raises(NotFound):
        handlers.instance(str(sid))
