"""The virtualization port: what the hypervisor worker needs from a hypervisor, in our own words.

The worker speaks only this module's vocabulary: a ``GuestSpec`` to spawn, Nova's power states
back, and two kinds of failure, ``TemporaryVirtError`` (retry with backoff) and
``PermanentVirtError`` (record a fault). ``workers.libvirt_driver`` implements the port on libvirt
and translates every ``libvirtError`` into one of them; tests may implement it too, to simulate
failures libvirt's test driver cannot produce.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class VirtError(Exception):
    """A hypervisor operation failed; ``code`` is the hypervisor's own error code, if it has one."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class TemporaryVirtError(VirtError):
    """Retrying later may succeed: a timeout, a lost connection, a busy host."""


class PermanentVirtError(VirtError):
    """Retrying cannot help: invalid input, a name clash, an unsupported configuration."""


class DomainNotFound(PermanentVirtError):
    """The operation needs a guest that does not exist on this host."""


# The file name of a guest's config drive in its directory (Nova's): the driver that defined a
# guest with one removes it with the guest, whichever step destroys it.
CONFIG_DRIVE_NAME = "disk.config"


@dataclass(frozen=True)
class BootImage:
    """Direct kernel boot: the guest starts from a kernel (and initramfs) on the host's disk."""

    kernel: str
    initrd: str | None = None
    cmdline: str | None = None


@dataclass(frozen=True)
class GuestSpec:
    """What a hypervisor needs to know to run one instance."""

    uuid: str
    vcpus: int
    memory_mb: int
    boot: BootImage | None = None
    # Where the guest's serial console is written; None: no serial console.
    console_log: str | None = None
    # The config drive's ISO 9660 image on the host, attached as a cdrom; None: no config drive.
    config_drive: str | None = None
    # The metadata network (``workers.guest_network``): the command each of the guest's connections
    # to 169.254.169.254:80 is handed to, and its NIC's MAC (the server's port's; None: QEMU's);
    # None: no network. A hypervisor that cannot give it (libvirt's test driver) leaves it out.
    metadata_proxy: tuple[str, ...] | None = None
    mac: str | None = None

    @property
    def name(self) -> str:
        return f"instance-{self.uuid}"


@dataclass(frozen=True)
class HostInventory:
    """What a hypervisor reports it has: CPUs, memory, disk, and its type."""

    vcpus: int
    memory_mb: int
    disk_gb: int
    hypervisor_type: str


@dataclass(frozen=True)
class DomainInfo:
    """One guest the hypervisor runs: its uuid, name and power state."""

    uuid: str
    name: str
    power_state: int


class VirtDriver(Protocol):
    """The virtualization port: what the hypervisor worker asks of a hypervisor (libvirt's driver,
    or a test double in tests)."""

    def inventory(self) -> HostInventory: ...

    def spawn(self, guest: GuestSpec) -> int:
        """Define and start the guest (idempotent: a guest already running is left so); its power state."""
        ...

    def destroy(self, uuid: str) -> None:
        """Stop and undefine the guest; nothing to do when it does not exist."""
        ...

    def power_state(self, uuid: str) -> int:
        """Nova's power state of the guest; ``DomainNotFound`` when it does not exist."""
        ...

    def list_domains(self) -> Sequence[DomainInfo]: ...

    def close(self) -> None: ...


@runtime_checkable
class WatchableDriver(Protocol):
    """A hypervisor that reports changes to its guests as they happen."""

    def watch(self, on_change: Callable[[str], None]) -> None:
        """Call ``on_change(uuid)`` whenever a guest starts, stops, crashes, pauses..."""
        ...


class ConsoleStream(Protocol):
    """A guest's console, open on its host: ``read`` blocks and returns b"" at the end; ``close``
    (from any thread) makes a blocked ``read`` return."""

    def read(self, size: int) -> bytes: ...

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class ConsoleDriver(Protocol):
    """A hypervisor whose guests' consoles can be opened on the host (``workers.consoles``): each
    raises ``DomainNotFound`` for no such guest, ``VirtError`` when the console cannot be had."""

    def open_serial(self, uuid: str) -> ConsoleStream:
        """The guest's first serial port (libvirt's console stream)."""
        ...

    def open_vnc(self, uuid: str) -> ConsoleStream:
        """The guest's VNC display (its RFB server on the host's loopback)."""
        ...


@runtime_checkable
class PowerDriver(Protocol):
    """What the power actions need of a hypervisor; each returns the guest's power state after it.

    Every call needs the guest to exist (``DomainNotFound`` otherwise) and is idempotent: a guest
    already in the wanted state is left so, which makes a redelivered action harmless.
    """

    def power_state(self, uuid: str) -> int: ...

    def power_on(self, uuid: str) -> int: ...

    def power_off(self, uuid: str) -> int:
        """Ask the guest to shut down (ACPI), wait for it, and pull the plug if it does not."""
        ...

    def reboot(self, uuid: str, *, hard: bool) -> int: ...

    def pause(self, uuid: str) -> int: ...

    def unpause(self, uuid: str) -> int: ...

    def suspend(self, uuid: str) -> int:
        """Save the guest's memory to disk and stop it (libvirt's managed save, as Nova does)."""
        ...

    def resume(self, uuid: str) -> int: ...

    def destroy(self, uuid: str) -> None:
        """Stop the guest at once and remove its definition (shelve offloads with it)."""
        ...
