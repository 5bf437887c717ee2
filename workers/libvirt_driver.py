"""The virtualization port on libvirt: domain XML, lifecycle calls, host inventory, error translation.

One XML generator serves libvirt's test driver (``test:///...``, unit tests) and real QEMU
(``qemu:///system``, end-to-end): domains are always ``type='qemu'``, boot a kernel directly when
the guest has one, and write their serial console to a file. Every ``libvirtError`` is translated
here, where it enters, into the port's ``TemporaryVirtError`` or ``PermanentVirtError``; nothing
above this module sees libvirt.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path

import libvirt

from commands.states import PowerState
from workers.consoles import SocketStream
from workers.virt import (
    CONFIG_DRIVE_NAME,
    ConsoleStream,
    DomainInfo,
    DomainNotFound,
    GuestSpec,
    HostInventory,
    PermanentVirtError,
    TemporaryVirtError,
    VirtError,
)

log = logging.getLogger(__name__)

_GIB = 1024**3
VNC_LISTEN = "127.0.0.1"
# libvirt's namespace for QEMU's own command-line options in a domain (its ``qemu:`` prefix).
QEMU_NAMESPACE = "http://libvirt.org/schemas/domain/qemu/1.0"
ET.register_namespace("qemu", QEMU_NAMESPACE)
# The metadata network (workers/guest_network.py): the guest's link-local net, where the host
# (slirp's gateway) sits, the metadata address forwarded, the netdev's id.
METADATA_GUEST_NET = "169.254.0.0/16"
METADATA_HOST_ADDRESS = "169.254.0.2"
METADATA_ADDRESS = "169.254.169.254"
METADATA_NETDEV = "stratus-metadata"
# The NIC's PCI slot: QEMU places the options libvirt passes through before the devices libvirt
# addresses itself (video in slot 2...), so the NIC takes a slot libvirt leaves free on i440fx.
METADATA_NIC_SLOT = "0x1e"

# Nova's mapping (nova/virt/libvirt/guest.py): SHUTDOWN means "shutting down", reported as SHUTDOWN.
_POWER_STATE = {
    libvirt.VIR_DOMAIN_NOSTATE: PowerState.NOSTATE,
    libvirt.VIR_DOMAIN_RUNNING: PowerState.RUNNING,
    libvirt.VIR_DOMAIN_BLOCKED: PowerState.RUNNING,
    libvirt.VIR_DOMAIN_PAUSED: PowerState.PAUSED,
    libvirt.VIR_DOMAIN_SHUTDOWN: PowerState.SHUTDOWN,
    libvirt.VIR_DOMAIN_SHUTOFF: PowerState.SHUTDOWN,
    libvirt.VIR_DOMAIN_CRASHED: PowerState.CRASHED,
    libvirt.VIR_DOMAIN_PMSUSPENDED: PowerState.SUSPENDED,
}

# Errors after which the same call may succeed later (possibly on a new connection).
_TEMPORARY_CODES = frozenset(
    {
        libvirt.VIR_ERR_OPERATION_TIMEOUT,
        libvirt.VIR_ERR_SYSTEM_ERROR,
        libvirt.VIR_ERR_NO_CONNECT,
        libvirt.VIR_ERR_INVALID_CONN,
        libvirt.VIR_ERR_RPC,
        libvirt.VIR_ERR_AGENT_UNRESPONSIVE,
        libvirt.VIR_ERR_OPERATION_ABORTED,
        libvirt.VIR_ERR_AUTH_UNAVAILABLE,
        libvirt.VIR_ERR_RESOURCE_BUSY,
    }
)
_CONNECTION_CODES = frozenset({libvirt.VIR_ERR_NO_CONNECT, libvirt.VIR_ERR_INVALID_CONN, libvirt.VIR_ERR_RPC})
_TRANSPORT_DOMAINS = frozenset({libvirt.VIR_FROM_REMOTE, libvirt.VIR_FROM_RPC})

# The flags both the test driver and QEMU accept; guests here have no UEFI NVRAM.
_UNDEFINE_FLAGS = libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE | libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA


def is_connection_lost(code: int | None, domain: int | None) -> bool:
    """The connection is unusable (Nova's rule): reopen it before the next call."""
    if code in _CONNECTION_CODES:
        return True
    return code in (libvirt.VIR_ERR_SYSTEM_ERROR, libvirt.VIR_ERR_INTERNAL_ERROR) and (
        domain in _TRANSPORT_DOMAINS
    )


def classify(code: int | None, domain: int | None, message: str) -> VirtError:
    """Our exception for a libvirt error code: temporary (retry with backoff) or permanent."""
    if code == libvirt.VIR_ERR_NO_DOMAIN:
        return DomainNotFound(message, code)
    if code in _TEMPORARY_CODES or is_connection_lost(code, domain):
        return TemporaryVirtError(message, code)
    return PermanentVirtError(message, code)


def metadata_network_args(proxy: tuple[str, ...], mac: str | None) -> list[str]:
    """QEMU's options for the metadata network (``workers.guest_network``): a user-mode network on
    169.254.0.0/16, isolated from the host, whose connections to 169.254.169.254:80 are each handed
    to a new ``proxy`` (run by ``/bin/sh -c``: each word shell-quoted; a comma doubled, QEMU's
    escape in an option's value), and a virtio NIC on it."""
    command = " ".join(shlex.quote(word) for word in proxy).replace(",", ",,")
    netdev = (
        f"user,id={METADATA_NETDEV},net={METADATA_GUEST_NET},host={METADATA_HOST_ADDRESS},restrict=on,"
        f"guestfwd=tcp:{METADATA_ADDRESS}:80-cmd:{command}"
    )
    device = f"virtio-net-pci,netdev={METADATA_NETDEV},addr={METADATA_NIC_SLOT}" + (
        f",mac={mac}" if mac else ""
    )
    return ["-netdev", netdev, "-device", device]


def domain_xml(guest: GuestSpec, *, arch: str | None = None, metadata_network: bool = False) -> str:
    """The domain definition for ``guest``: the same document for the test driver and for QEMU.
    ``metadata_network``: give the guest its network to the metadata service (QEMU only: through
    QEMU's own options, since libvirt's ``<interface type='user'>`` has no ``guestfwd``)."""
    dom = ET.Element("domain", type="qemu")
    ET.SubElement(dom, "name").text = guest.name
    ET.SubElement(dom, "uuid").text = guest.uuid
    ET.SubElement(dom, "memory", unit="MiB").text = str(guest.memory_mb)
    ET.SubElement(dom, "vcpu").text = str(guest.vcpus)
    os_ = ET.SubElement(dom, "os")
    type_ = ET.SubElement(os_, "type")
    type_.text = "hvm"
    if arch:
        type_.set("arch", arch)
    if guest.boot is not None:
        ET.SubElement(os_, "kernel").text = guest.boot.kernel
        if guest.boot.initrd:
            ET.SubElement(os_, "initrd").text = guest.boot.initrd
        if guest.boot.cmdline:
            ET.SubElement(os_, "cmdline").text = guest.boot.cmdline
    # ACPI lets the guest honour a graceful shutdown or reboot.
    ET.SubElement(ET.SubElement(dom, "features"), "acpi")
    ET.SubElement(dom, "on_poweroff").text = "destroy"
    ET.SubElement(dom, "on_reboot").text = "restart"
    ET.SubElement(dom, "on_crash").text = "destroy"
    devices = ET.SubElement(dom, "devices")
    if guest.console_log:
        # A pty, so that libvirt's console stream can reach the serial port (the serial console,
        # docs/consoles.md), logged to the file ``os-getConsoleOutput`` reads. Appended, not
        # truncated, on every start: the console log keeps the guest's whole history.
        serial = ET.SubElement(devices, "serial", type="pty")
        ET.SubElement(serial, "log", file=guest.console_log, append="on")
        ET.SubElement(serial, "target", port="0")
        console = ET.SubElement(devices, "console", type="pty")
        ET.SubElement(console, "target", type="serial", port="0")
    # The graphical console: a VNC display on the host's loopback only, on a port libvirt picks; the
    # hypervisor worker relays it to ``stratus novncproxy`` (docs/consoles.md).
    graphics = ET.SubElement(devices, "graphics", type="vnc", port="-1", autoport="yes", listen=VNC_LISTEN)
    ET.SubElement(graphics, "listen", type="address", address=VNC_LISTEN)
    if guest.config_drive:
        # Nova's config drive device: a read-only cdrom, on IDE for x86 guests (i440fx), on SCSI
        # (virtio-scsi) where the machine has no IDE bus (aarch64's virt).
        ide = arch in (None, "x86_64", "i686")
        cdrom = ET.SubElement(devices, "disk", type="file", device="cdrom")
        ET.SubElement(cdrom, "driver", name="qemu", type="raw")
        ET.SubElement(cdrom, "source", file=guest.config_drive)
        ET.SubElement(cdrom, "target", dev="hda" if ide else "sda", bus="ide" if ide else "scsi")
        ET.SubElement(cdrom, "readonly")
        if not ide:
            ET.SubElement(devices, "controller", type="scsi", model="virtio-scsi")
    if metadata_network and guest.metadata_proxy:
        commandline = ET.SubElement(dom, f"{{{QEMU_NAMESPACE}}}commandline")
        for arg in metadata_network_args(guest.metadata_proxy, guest.mac):
            ET.SubElement(commandline, f"{{{QEMU_NAMESPACE}}}arg", value=arg)
    return ET.tostring(dom, encoding="unicode")


class EventLoop:
    """libvirt's default event loop, run in a daemon thread, so connections deliver domain events.

    libvirt's event loop is process-wide by libvirt's design: it must be registered before a
    connection is opened for that connection to deliver events, and at most once per process.
    ``start()`` does both (idempotent); the hypervisor worker calls it before opening its driver.
    """

    _lock = threading.Lock()
    _started = False

    @classmethod
    def start(cls) -> None:
        with cls._lock:
            if cls._started:
                return
            libvirt.virEventRegisterDefaultImpl()
            threading.Thread(target=cls._run, name="libvirt-events", daemon=True).start()
            cls._started = True

    @classmethod
    def started(cls) -> bool:
        return cls._started

    @staticmethod
    def _run() -> None:
        while True:
            libvirt.virEventRunDefaultImpl()


class LibvirtDriver:
    """``VirtDriver`` on one libvirt connection, reopened after the connection is lost.

    ``connect`` opens the connection (called lazily, and again after a connection error); tests
    that need the state of ``test:///default`` across calls pass a function returning one shared
    connection.
    """

    def __init__(
        self,
        connect: Callable[[], libvirt.virConnect],
        *,
        storage_pool: str = "default",
        instances_path: Path | None = None,
        arch: str | None = None,
        shutdown_timeout: float = 60.0,
    ) -> None:
        self._connect = connect
        self._shutdown_timeout = shutdown_timeout
        self._watchers: list[Callable[[str], None]] = []
        self._conn: libvirt.virConnect | None = None
        self._storage_pool = storage_pool
        self._instances_path = instances_path
        self._arch = arch

    @classmethod
    def open(cls, uri: str, **kw: object) -> LibvirtDriver:
        """A driver on ``uri``. libvirt's default error handler prints every error to stderr;
        ours are raised as exceptions instead, so that printing is switched off (process-wide)."""
        libvirt.registerErrorHandler(_ignore_libvirt_report, None)
        return cls(lambda: libvirt.open(uri), **kw)  # type: ignore[arg-type]

    # -- plumbing -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _translated(self, action: str) -> Iterator[None]:
        try:
            yield
        except libvirt.libvirtError as e:
            code, domain = e.get_error_code(), e.get_error_domain()
            if is_connection_lost(code, domain):
                self._drop_connection()
            raise classify(code, domain, f"{action}: {e.get_error_message() or e}") from e

    def _connection(self) -> libvirt.virConnect:
        if self._conn is None:
            with self._translated("connect"):
                self._conn = self._connect()
                for on_change in self._watchers:  # a reopened connection: register again
                    self._register(self._conn, on_change)
        return self._conn

    # -- lifecycle events -----------------------------------------------------------------------
    def watch(self, on_change: Callable[[str], None]) -> None:
        """Call ``on_change(uuid)`` on every lifecycle event (started, stopped, crashed, suspended,
        resumed, defined, undefined...) of this host's domains. Events arrive only when
        ``EventLoop.start()`` ran before the connection was opened; without them the periodic
        reconciliation still finds every change, later."""
        self._watchers.append(on_change)
        if self._conn is not None:
            self._register(self._conn, on_change)

    @staticmethod
    def _register(conn: libvirt.virConnect, on_change: Callable[[str], None]) -> None:
        """Register for lifecycle events; a connection that cannot deliver them (no event loop when
        it was opened) is left to the periodic reconciliation, with a note in the log."""

        def callback(
            _conn: object, dom: libvirt.virDomain, _event: int, _detail: int, _opaque: object
        ) -> None:
            on_change(dom.UUIDString())

        if not EventLoop.started():
            log.info("libvirt's event loop is not running: guests' changes are found by reconciliation only")
            return
        try:
            conn.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, callback, None)
        except libvirt.libvirtError as e:
            log.warning("no lifecycle events from this connection (%s): reconciliation only", e)

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(libvirt.libvirtError):  # it is already broken
                conn.close()

    def _lookup(self, uuid: str) -> libvirt.virDomain | None:
        try:
            return self._connection().lookupByUUIDString(uuid)
        except libvirt.libvirtError as e:
            if e.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                return None
            raise

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with self._translated("close"):
                conn.close()

    # -- the port -------------------------------------------------------------------------------
    def inventory(self) -> HostInventory:
        with self._translated("host inventory"):
            conn = self._connection()
            _model, memory_mb, cpus, *_ = conn.getInfo()
            hypervisor_type = conn.getType()
            disk_gb = self._disk_gb(conn)
        return HostInventory(
            vcpus=cpus, memory_mb=memory_mb, disk_gb=disk_gb, hypervisor_type=hypervisor_type
        )

    def _disk_gb(self, conn: libvirt.virConnect) -> int:
        """The storage pool's capacity if the host has one, else the instances filesystem's size."""
        try:
            pool = conn.storagePoolLookupByName(self._storage_pool)
        except libvirt.libvirtError as e:
            if e.get_error_code() != libvirt.VIR_ERR_NO_STORAGE_POOL:
                raise
        else:
            return int(pool.info()[1] // _GIB)
        if self._instances_path is None:
            return 0
        st = os.statvfs(self._instances_path)
        return int(st.f_blocks * st.f_frsize // _GIB)

    def spawn(self, guest: GuestSpec) -> int:
        if guest.console_log:
            _make_console_dir(Path(guest.console_log).parent)
        with self._translated(f"spawn {guest.name}"):
            dom = self._lookup(guest.uuid)
            if dom is None:
                network = guest.metadata_proxy is not None and self._is_qemu()
                xml = domain_xml(guest, arch=self._arch, metadata_network=network)
                dom = self._connection().defineXML(xml)
            if not dom.isActive():
                dom.create()
            return _power_state(dom)

    def _is_qemu(self) -> bool:
        """Whether the host is real QEMU (``qemu:///system``), the only one the metadata network's
        QEMU options mean anything to; on another (libvirt's test driver) guests get none."""
        kind = self._connection().getType()
        if kind != "QEMU":
            log.debug("hypervisor %s: guests get no metadata network (QEMU only)", kind)
        return bool(kind == "QEMU")

    def destroy(self, uuid: str) -> None:
        """Stop and undefine the guest, then remove its config drive (Nova's cleanup of the
        instance's files): on a delete, a shelve offload, a move's source, a reconciled orphan."""
        with self._translated(f"destroy {uuid}"):
            dom = self._lookup(uuid)
            if dom is None:
                return
            drives: list[Path] = []
            try:
                drives = self._config_drives(dom)
                if dom.isActive():
                    dom.destroy()
                dom.undefineFlags(_UNDEFINE_FLAGS)
            except libvirt.libvirtError as e:
                # Someone else stopped or removed it between our calls: the outcome we want.
                if e.get_error_code() not in (libvirt.VIR_ERR_NO_DOMAIN, libvirt.VIR_ERR_OPERATION_INVALID):
                    raise
                if self._lookup(uuid) is not None:
                    raise
        for drive in drives:
            try:
                drive.unlink(missing_ok=True)
            except OSError as e:
                raise TemporaryVirtError(f"Cannot remove the config drive {drive}: {e}") from e

    def _config_drives(self, dom: libvirt.virDomain) -> list[Path]:
        """The guest's config drives: its cdroms' files named as one, in this host's instances path
        (never a file elsewhere, whatever a domain defined by someone else says)."""
        if self._instances_path is None:
            return []
        root = self._instances_path.absolute()
        found = []
        for disk in ET.fromstring(dom.XMLDesc()).iter("disk"):
            source = disk.find("source")
            if disk.get("device") != "cdrom" or source is None:
                continue
            path = Path(source.get("file") or "")
            if path.name == CONFIG_DRIVE_NAME and path.parent.parent == root:
                found.append(path)
        return found

    def power_state(self, uuid: str) -> int:
        with self._translated(f"power state of {uuid}"):
            dom = self._lookup(uuid)
            if dom is None:
                raise DomainNotFound(f"No domain with UUID {uuid} on this host", libvirt.VIR_ERR_NO_DOMAIN)
            return _power_state(dom)

    def list_domains(self) -> list[DomainInfo]:
        """The host's guests; one removed while they are listed (a delete, a move) is left out."""
        with self._translated("list domains"):
            found = []
            for d in self._connection().listAllDomains():
                try:
                    found.append(DomainInfo(uuid=d.UUIDString(), name=d.name(), power_state=_power_state(d)))
                except libvirt.libvirtError as e:
                    if e.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                        raise
            return found

    # -- power actions (``PowerDriver``) --------------------------------------------------------
    def _require(self, uuid: str) -> libvirt.virDomain:
        dom = self._lookup(uuid)
        if dom is None:
            raise DomainNotFound(f"No domain with UUID {uuid} on this host", libvirt.VIR_ERR_NO_DOMAIN)
        return dom

    def power_on(self, uuid: str) -> int:
        with self._translated(f"start {uuid}"):
            dom = self._require(uuid)
            if not dom.isActive():
                dom.create()  # restores a managed save image when there is one
            return _power_state(dom)

    def power_off(self, uuid: str) -> int:
        with self._translated(f"stop {uuid}"):
            dom = self._require(uuid)
            if dom.isActive():
                self._shutdown(dom)
            return _power_state(dom)

    def _shutdown(self, dom: libvirt.virDomain) -> None:
        """ACPI shutdown, then destroy if the guest has not powered off within the timeout (Nova's
        clean shutdown)."""
        try:
            dom.shutdown()
        except libvirt.libvirtError as e:
            if e.get_error_code() != libvirt.VIR_ERR_OPERATION_INVALID:  # it stopped meanwhile
                raise
        deadline = time.monotonic() + self._shutdown_timeout
        while dom.isActive() and time.monotonic() < deadline:
            time.sleep(0.1)
        if dom.isActive():
            log.warning(
                "domain %s ignored the ACPI shutdown for %.0fs: destroying it",
                dom.name(),
                self._shutdown_timeout,
            )
            dom.destroy()

    def reboot(self, uuid: str, *, hard: bool) -> int:
        with self._translated(f"{'hard ' if hard else ''}reboot {uuid}"):
            dom = self._require(uuid)
            if not hard and dom.isActive() and dom.state()[0] == libvirt.VIR_DOMAIN_RUNNING:
                # Soft, as Nova's: a clean shutdown (the guest's ACPI power button), then a start. A
                # guest that misses or ignores the button (still booting, say) is powered off at the
                # timeout: the reboot happens either way, never an ACTIVE server with nothing done.
                self._shutdown(dom)
            elif dom.isActive():
                # Hard (or a guest that cannot take a soft one, as Nova falls back): power cycle.
                dom.destroy()
            if dom.hasManagedSaveImage(0):
                dom.managedSaveRemove(0)  # a hard reboot boots afresh, as Nova's does
            dom.create()
            return _power_state(dom)

    def pause(self, uuid: str) -> int:
        with self._translated(f"pause {uuid}"):
            dom = self._require(uuid)
            if dom.state()[0] != libvirt.VIR_DOMAIN_PAUSED:
                dom.suspend()
            return _power_state(dom)

    def unpause(self, uuid: str) -> int:
        with self._translated(f"unpause {uuid}"):
            dom = self._require(uuid)
            if dom.state()[0] == libvirt.VIR_DOMAIN_PAUSED:
                dom.resume()
            return _power_state(dom)

    def suspend(self, uuid: str) -> int:
        with self._translated(f"suspend {uuid}"):
            dom = self._require(uuid)
            if dom.isActive():
                dom.managedSave(0)
            return _power_state(dom)

    def resume(self, uuid: str) -> int:
        with self._translated(f"resume {uuid}"):
            dom = self._require(uuid)
            if not dom.isActive():
                dom.create()
            return _power_state(dom)

    # -- consoles (workers.consoles relays them to the console proxies) ---------------------------
    def open_serial(self, uuid: str) -> ConsoleStream:
        """The guest's serial port through libvirt's console stream (``virDomainOpenConsole``), on a
        connection of its own: its blocking reads must not hold the driver's connection. A session
        open on the same console is taken over (``VIR_DOMAIN_CONSOLE_FORCE``), as ``virsh console
        --force`` does."""
        with self._translated("open the serial console"):
            conn = self._connect()
            own = conn is not self._conn
            try:
                dom = conn.lookupByUUIDString(uuid)
                if not dom.isActive():
                    raise PermanentVirtError(f"Guest {uuid} is not running")
                stream = conn.newStream(0)
                dom.openConsole(None, stream, libvirt.VIR_DOMAIN_CONSOLE_FORCE)
            except BaseException:
                if own:
                    with contextlib.suppress(libvirt.libvirtError):
                        conn.close()
                raise
        return _ConsoleStream(stream, conn if own else None)

    def open_vnc(self, uuid: str) -> ConsoleStream:
        """A connection to the guest's VNC display: the port libvirt gave it, on the host's loopback."""
        dom = self._require(uuid)
        with self._translated("read the guest's VNC display"):
            if not dom.isActive():
                raise PermanentVirtError(f"Guest {uuid} is not running")
            root = ET.fromstring(dom.XMLDesc(0))
        graphics = root.find("./devices/graphics[@type='vnc']")
        port = int(graphics.get("port", "-1")) if graphics is not None else -1
        if graphics is None or port <= 0:
            raise PermanentVirtError(f"Guest {uuid} has no VNC display")
        listen = graphics.get("listen") or VNC_LISTEN
        try:
            return SocketStream.connect(listen, port)
        except OSError as e:
            raise TemporaryVirtError(f"Cannot reach the VNC display of {uuid} at {listen}:{port}: {e}") from e


class _ConsoleStream:
    """libvirt's console stream as a ``ConsoleStream``, on its own connection (closed with it)."""

    def __init__(self, stream: libvirt.virStream, conn: libvirt.virConnect | None) -> None:
        self._stream = stream
        self._conn = conn
        self._closed = threading.Event()

    def read(self, size: int) -> bytes:
        try:
            data = self._stream.recv(size)
        except libvirt.libvirtError as e:
            raise OSError(f"the console stream failed: {e.get_error_message() or e}") from e
        return data if isinstance(data, bytes) else b""  # -2 (would block) does not happen: blocking

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                sent = self._stream.send(bytes(view))
                if sent < 0:
                    raise OSError("the console stream refused the write")
                view = view[sent:]
        except libvirt.libvirtError as e:
            raise OSError(f"the console stream failed: {e.get_error_message() or e}") from e

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        with contextlib.suppress(libvirt.libvirtError):
            self._stream.abort()
        if self._conn is not None:
            with contextlib.suppress(libvirt.libvirtError):
                self._conn.close()


def _power_state(dom: libvirt.virDomain) -> int:
    state, _reason = dom.state()
    return _POWER_STATE.get(state, PowerState.NOSTATE)


def _make_console_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except PermissionError as e:
        raise PermanentVirtError(f"Cannot create console directory {path}: {e}") from e
    except OSError as e:
        raise TemporaryVirtError(f"Cannot create console directory {path}: {e}") from e


def _ignore_libvirt_report(_ctx: object, _error: object) -> None:
    """libvirt's error callback: errors reach us as exceptions, the printed report is redundant."""
