"""Acceptance: the dashboard's serial console (console.js, xterm.js) in a real browser, over
``stratus serialproxy``'s websocket, to the host's end of the relay.

The stack is the API's (``tests.fixtures.api``: the API app on the real JetStream and PostgreSQL,
the real projector), served over HTTP for the browser, with a hypervisor worker on libvirt's test
driver whose guests' consoles are loopbacks (``tests.fixtures.consoles``: the test driver has no
console streams; a real guest's serial port is tests/acceptance/test_console_guest.py's) and the
serial proxy on its own port. What is tested: the page asks the API for the console URL, the
browser opens the websocket on the proxy (its Origin allowed, the dashboard's policy allowing the
connection), keys typed in the terminal reach the guest's end and its answer is drawn, and leaving
the page closes the host's side.
"""

from __future__ import annotations

import dataclasses
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIServer, make_server

import libvirt
import pytest

from api.readmodel import open_pool
from commands.servers.scheduling import PlaceInstance
from processes import consoleproxy
from stratus.config import Settings
from stratus.context import CommandContext, acting
from stratus.eventstore import NatsBridge
from tests.fixtures.api import ADMIN, P1, Stack
from tests.fixtures.consoles import LoopbackConsoles
from tests.fixtures.hypervisor import FAST_RETRY, HOST, stack_host
from tests.fixtures.processes import free_port
from tests.fixtures.workers import eventually
from workers.scheduler import SCHEDULER

pytestmark = pytest.mark.slow

WAIT_MS = 30_000


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


@pytest.fixture
def proxy_port() -> int:
    return free_port()


@pytest.fixture
def api_settings(api_settings: Settings, proxy_port: int) -> Settings:
    """The API answers console URLs on the proxy this test runs."""
    return dataclasses.replace(api_settings, serialproxy_base_url=f"ws://127.0.0.1:{proxy_port}/")


@pytest.fixture
def loopbacks(
    stack: Stack, api_settings: Settings, bridge: NatsBridge, conn: libvirt.virConnect, tmp_path: Path
) -> Iterator[LoopbackConsoles]:
    instances = tmp_path / "instances"
    driver = LoopbackConsoles(lambda: conn, instances_path=instances)
    worker = stack_host(
        stack.handlers.app, api_settings, bridge, driver, instances, poll=0.1, retry=FAST_RETRY
    )
    try:
        yield driver
    finally:
        worker.close()


@pytest.fixture
def serialproxy(api_settings: Settings, bridge: NatsBridge, proxy_port: int) -> Iterator[None]:
    pool = open_pool(api_settings.database_url or "")
    proxy = consoleproxy.build(api_settings, "serialproxy", pool, bridge)
    try:
        with proxy.server("127.0.0.1", proxy_port) as server:
            thread = threading.Thread(target=server.serve_forever, daemon=True)
            thread.start()
            try:
                yield
            finally:
                server.shutdown()
                thread.join(timeout=10)
    finally:
        pool.close()


@pytest.fixture
def http_api(stack: Stack) -> Iterator[str]:
    """The stack's API app over HTTP (the browser's), from a thread of this process."""
    server = make_server("127.0.0.1", 0, stack.app, server_class=_ThreadingServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _active_server(stack: Stack) -> str:
    flavor, _ = stack.flavor()
    r = stack.request(
        "POST", "/v2.1/servers", P1, json={"server": {"name": "vm-console", "flavorRef": flavor}}
    )
    assert r.status_code == 202, r.text
    server = str(r.json["server"]["id"])
    eventually(lambda: stack.get("/v2.1/os-hypervisors", ADMIN).json["hypervisors"])
    with acting(CommandContext(actor=SCHEDULER, correlation_id=r.headers["x-openstack-request-id"])):
        stack.handlers.place_instance(PlaceInstance(server, HOST))

    def active() -> bool:
        s = stack.get(f"/v2.1/servers/{server}", P1).json.get("server", {})
        return s.get("status") == "ACTIVE" and s.get("OS-EXT-STS:task_state") is None

    eventually(active)
    return server


def test_the_serial_console_in_the_browser_reaches_the_guests_end_and_closes_it(
    stack: Stack,
    loopbacks: LoopbackConsoles,
    serialproxy: None,
    http_api: str,
    page: Any,
    screenshots: Path,
) -> None:
    stack.auth(P1)  # bob, a member of p1, with his password
    server = _active_server(stack)
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)

    page.goto(f"{http_api}/dashboard")
    page.fill("#signin input[name=user]", "bob")
    page.fill("#signin input[name=password]", "bob-password")
    page.fill("#signin input[name=project]", "p1")
    page.click("#signin button[type=submit]")
    page.wait_for_selector("#servers")
    page.evaluate(f"location.hash = '#/servers/{server}'")
    page.click("#open-console", timeout=WAIT_MS)
    page.wait_for_selector("#console-status[data-state=open]", timeout=WAIT_MS)
    ((uuid, kind, stream),) = loopbacks.opened
    assert (uuid, kind) == (server, "serial")

    # keys typed reach the guest's end, one message each, and what it answers is drawn
    page.click("#terminal")
    page.keyboard.type("ok")
    page.wait_for_function(
        "() => document.querySelector('#terminal .xterm-rows').textContent.includes('echo:oecho:k')",
        timeout=WAIT_MS,
    )
    # xterm.js' own style sheets were applied (mirrored: the policy refuses inline <style>): the text
    # is the terminal's white, not the page's dark grey on black (what it is without them)
    rows = "getComputedStyle(document.querySelector('#terminal .xterm-rows'))"
    assert page.evaluate(f"{rows}.color") == "rgb(255, 255, 255)"
    assert page.evaluate("document.adoptedStyleSheets.length") >= 1
    assert not [m for m in refused if "connect-src" in m]  # the websocket was allowed
    page.screenshot(path=str(screenshots / "console.png"))

    # leaving the page closes the websocket, and the proxy closes the host's side
    page.click("a:text-is('← The server')")
    page.wait_for_selector("#timeline")
    eventually(stream.closed.is_set)
