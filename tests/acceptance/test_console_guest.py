"""The consoles of a real guest (QEMU, TCG), through the API, the console proxies and the host's
hypervisor worker, as an operator deploys them (docs/consoles.md).

The guest is ``deploy/guest/build_image.py``'s, booted through the Compute API onto a hypervisor
worker on ``qemu:///system`` (``tests.fixtures.qemu`` provides QEMU and libvirtd, or the test skips
and says why). Its serial port is a pty logged to ``console.log`` and its busybox shell reads it:
a line typed into the serial console's websocket is run and its output comes back. Its VNC display
answers a websocket client through ``stratus novncproxy`` with ``RFB 003.008``, the handshake (no
authentication: the token was the authentication) and a framebuffer update of its screen.
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import libvirt
import pytest
from websockets.sync.client import ClientConnection, connect

from api.readmodel import open_pool
from processes import consoleproxy
from stratus.config import Settings
from stratus.eventstore import NatsBridge
from tests.fixtures import qemu
from tests.fixtures.api import P1, Stack
from tests.fixtures.guests import boot_guest, remove_guest, wait
from tests.fixtures.hypervisor import stack_host
from workers.libvirt_driver import EventLoop, LibvirtDriver

pytestmark = pytest.mark.slow

URI = qemu.URI
HOST = "qemu-console-host"


def _session_threads() -> list[str]:
    """The host's console session threads (``stratus.consolerelay``: console-<session>-in/out)."""
    return [t.name for t in threading.enumerate() if t.name.startswith("console-")]


def token_of(url: str) -> str:
    query = parse_qs(urlsplit(url).query)
    if "path" in query:  # noVNC's: path=?token=...
        query = parse_qs(urlsplit(query["path"][0]).query)
    return query["token"][0]


class Received:
    """A websocket's binary messages as one byte stream."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.data = b""

    def more(self, timeout: float) -> None:
        message = self.ws.recv(timeout=timeout)
        self.data += message if isinstance(message, bytes) else message.encode()

    def exactly(self, n: int, timeout: float = 30) -> bytes:
        while len(self.data) < n:
            self.more(timeout)
        out, self.data = self.data[:n], self.data[n:]
        return out

    def until(self, found: Callable[[bytes], bool], timeout: float) -> bytes:
        deadline = time.monotonic() + timeout
        while not found(self.data):
            left = deadline - time.monotonic()
            assert left > 0, f"not received within {timeout}s: {self.data[-2000:]!r}"
            with contextlib.suppress(TimeoutError):
                self.more(min(left, 1.0))
        return self.data


@dataclasses.dataclass
class Proxies:
    serial: str
    novnc: str


@pytest.fixture
def proxies(api_settings: Settings, bridge: NatsBridge) -> Iterator[Proxies]:
    """``stratus serialproxy`` and ``stratus novncproxy`` (their composition, on this test's pool and
    bridge) on ports of this machine."""
    pool = open_pool(api_settings.database_url or "")
    servers = []
    try:
        addresses = []
        for name in ("serialproxy", "novncproxy"):
            server = consoleproxy.build(api_settings, name, pool, bridge).server("127.0.0.1", 0)
            servers.append(server)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            addresses.append(f"ws://127.0.0.1:{server.socket.getsockname()[1]}/")
        yield Proxies(*addresses)
    finally:
        for server in servers:
            server.shutdown()
        pool.close()


def test_a_real_guest_s_serial_shell_and_vnc_display_through_the_proxies(
    stack: Stack,
    api_settings: Settings,
    bridge: NatsBridge,
    guest_files: Path,
    proxies: Proxies,
    tmp_path: Path,
) -> None:
    instances = tmp_path / "instances"
    instances.mkdir()
    EventLoop.start()  # as the hypervisor's main does: the console stream must work beside it
    driver = LibvirtDriver.open(URI, instances_path=instances, shutdown_timeout=30.0)
    conn = libvirt.open(URI)

    worker = stack_host(stack.handlers.app, api_settings, bridge, driver, instances, poll=0.2, host=HOST)
    server_id = ""
    try:
        server_id = boot_guest(stack, guest_files, HOST, name="console")

        def console_output() -> str:
            r = stack.request(
                "POST", f"/v2.1/servers/{server_id}/action", P1, json={"os-getConsoleOutput": {}}
            )
            return str(r.json["output"]) if r.status_code == 200 else ""

        # the serial port is a pty now; its log still feeds os-getConsoleOutput
        wait("the boot marker", lambda: qemu.MARKER in console_output(), 120)

        def remote(protocol: str, kind: str) -> str:
            headers = {**stack.headers(P1), "OpenStack-API-Version": "compute 2.6"}
            body = {"remote_console": {"protocol": protocol, "type": kind}}
            r = stack.client.simulate_post(
                f"/v2.1/servers/{server_id}/remote-consoles", headers=headers, json=body
            )
            assert r.status_code == 200, r.text
            return str(r.json["remote_console"]["url"])

        # -- the serial console: a line typed in is run by the guest's shell ----------------------
        asked = time.monotonic()
        token = token_of(remote("serial", "serial"))
        issued = time.monotonic() - asked
        with connect(f"{proxies.serial}?token={token}", open_timeout=30) as ws:
            opened = time.monotonic() - asked
            got = Received(ws)
            ws.send(b"\n")  # the shell answers with its prompt
            got.until(bool, 30)
            first_byte = time.monotonic() - asked
            word = f"stratus-{secrets.token_hex(4)}"
            typed = time.monotonic()
            ws.send(f"echo {word}\n".encode())
            got.until(lambda d: f"echo {word}".encode() in d, 60)
            echoed = time.monotonic() - typed  # the tty's echo: to the guest and back
            text = got.until(lambda d: f"\n{word}".encode() in d.replace(b"\r", b""), 60).decode(
                errors="replace"
            )
        # the client left: the host's side ended too (libvirt's stream aborted, its threads gone)
        wait("the host's session to end", lambda: not _session_threads(), 15)
        lines = text.replace("\r", "").split("\n")
        assert f"echo {word}" in text and word in lines, text  # the tty's echo, then the command's output
        print(
            f"\nconsole token request: issued {issued * 1000:.0f} ms, websocket open {opened * 1000:.0f} ms,"
            f" first guest byte {first_byte * 1000:.0f} ms; a typed line echoed in {echoed * 1000:.0f} ms"
        )  # docs/performance.md, "Consoles"

        # -- the graphical console: RFB through the noVNC proxy --------------------------------------
        token = token_of(remote("vnc", "novnc"))
        binary: Any = ["binary"]
        with connect(f"{proxies.novnc}?token={token}", subprotocols=binary, open_timeout=30) as ws:
            rfb = Received(ws)
            assert rfb.exactly(12) == b"RFB 003.008\n"
            ws.send(b"RFB 003.008\n")
            (count,) = rfb.exactly(1)
            types = rfb.exactly(count)
            assert 1 in types, types  # None: the token was the authentication
            ws.send(b"\x01")
            assert rfb.exactly(4) == b"\0\0\0\0"  # SecurityResult: OK
            ws.send(b"\x01")  # ClientInit: shared
            width, height = struct.unpack(">HH", rfb.exactly(4))
            rfb.exactly(16)  # the pixel format
            (name_length,) = struct.unpack(">I", rfb.exactly(4))
            name = rfb.exactly(name_length)
            assert width > 0 and height > 0, (width, height, name)
            ws.send(struct.pack(">BBHHHH", 3, 0, 0, 0, width, height))  # FramebufferUpdateRequest, full
            assert rfb.exactly(1) == b"\x00"  # FramebufferUpdate
            rfb.exactly(1)  # padding
            (rectangles,) = struct.unpack(">H", rfb.exactly(2))
            assert rectangles >= 1
        wait("the host's session to end", lambda: not _session_threads(), 15)
    finally:
        worker.close()
        remove_guest(conn, server_id)
        conn.close()
        driver.close()
