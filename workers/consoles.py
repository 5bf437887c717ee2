"""The host's side of the consoles: what ``stratus.consolerelay`` relays to the console proxies.

The hypervisor worker serves ``console-open`` for its host (docs/consoles.md): a serial console is
libvirt's console stream of the guest's first serial port, a graphical console a connection to the
guest's VNC display on the host's loopback. The driver opens them (``ConsoleDriver``); here its
errors become the relay's refusals, which the proxy turns into a clear answer to its client.
"""

from __future__ import annotations

import contextlib
import logging
import socket

from stratus.consolerelay import Opener, Source
from stratus.hostrpc import NOT_FOUND, UNAVAILABLE, HostRefused
from workers.virt import ConsoleDriver, DomainNotFound, VirtError

log = logging.getLogger(__name__)


class SocketStream:
    """A TCP connection as a console stream (a guest's VNC display)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    @classmethod
    def connect(cls, host: str, port: int, timeout: float = 5.0) -> SocketStream:
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.settimeout(None)
        return cls(sock)

    def read(self, size: int) -> bytes:
        return self._sock.recv(size)

    def write(self, data: bytes) -> None:
        self._sock.sendall(data)

    def close(self) -> None:
        with contextlib.suppress(OSError):  # already shut down by the other end
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()


def opener(driver: ConsoleDriver) -> Opener:
    """``console-open``'s sources on ``driver``: ``serial`` and ``vnc``."""

    def open_console(server_id: str, kind: str) -> Source:
        try:
            if kind == "serial":
                return driver.open_serial(server_id)
            return driver.open_vnc(server_id)
        except DomainNotFound as e:
            raise HostRefused(NOT_FOUND, f"No guest {server_id} on this host") from e
        except VirtError as e:
            log.info("console %s of %s cannot be opened: %s", kind, server_id, e)
            raise HostRefused(UNAVAILABLE, f"The {kind} console of {server_id} cannot be opened: {e}") from e

    return open_console
