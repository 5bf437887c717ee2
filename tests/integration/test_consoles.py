"""The remote consoles over the real stack: the API's contract (Nova's keys, statuses and messages per
microversion), the tokens (hashed, one use, expiring, bound to a server and a type) and the proxy
(Origin, token and server checks before any websocket, then bytes both ways through the host's
hypervisor worker over NATS).

The hypervisor worker runs on libvirt's test driver, which has no console streams: its guests'
consoles are loopbacks here (``LoopbackConsoles``, the worker's own ``ConsoleDriver`` port), so what
is tested is everything from the API to the host's end of the relay. The real guest's serial port
and VNC display are tested in tests/acceptance/test_console_guest.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import http.client
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import libvirt
import psycopg
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from api.consoles.tokens import SCHEMA, ConsoleTokens
from api.readmodel import open_pool
from commands.servers.scheduling import PlaceInstance
from processes import consoleproxy
from stratus.config import Settings
from stratus.context import CommandContext, acting
from stratus.eventstore import NatsBridge
from tests.fixtures.api import ADMIN, P1, P2, Stack, assert_fault
from tests.fixtures.consoles import LoopbackConsoles
from tests.fixtures.hypervisor import FAST_RETRY, HOST, stack_host
from tests.fixtures.processes import free_port, serving
from tests.fixtures.workers import eventually
from workers.scheduler import SCHEDULER

V26 = {"OpenStack-API-Version": "compute 2.6"}


@dataclasses.dataclass
class Consoles:
    stack: Stack
    settings: Settings
    driver: LoopbackConsoles
    bridge: NatsBridge
    pool: Any

    def server(self) -> str:
        flavor, _ = self.stack.flavor()
        r = self.stack.request(
            "POST", "/v2.1/servers", P1, json={"server": {"name": "vm", "flavorRef": flavor}}
        )
        assert r.status_code == 202, r.text
        server = str(r.json["server"]["id"])
        eventually(lambda: self.stack.get("/v2.1/os-hypervisors", ADMIN).json["hypervisors"])
        with acting(CommandContext(actor=SCHEDULER, correlation_id=r.headers["x-openstack-request-id"])):
            self.stack.handlers.place_instance(PlaceInstance(server, HOST))
        self.settled(server, "ACTIVE")
        return server

    def settled(self, server: str, status: str) -> None:
        def check() -> bool:
            r = self.stack.get(f"/v2.1/servers/{server}", P1)
            s = r.json.get("server", {}) if r.status_code == 200 else {}
            return s.get("status") == status and s.get("OS-EXT-STS:task_state") is None

        eventually(check)

    def remote(self, server: str, protocol: str, kind: str, who: str = P1, version: str = "2.6") -> Any:
        body = {"remote_console": {"protocol": protocol, "type": kind}}
        headers = {**self.stack.headers(who), "OpenStack-API-Version": f"compute {version}"}
        return self.stack.client.simulate_post(
            f"/v2.1/servers/{server}/remote-consoles", headers=headers, json=body
        )

    def url(self, server: str, protocol: str = "serial", kind: str = "serial") -> str:
        r = self.remote(server, protocol, kind)
        assert r.status_code == 200, r.text
        return str(r.json["remote_console"]["url"])

    @contextlib.contextmanager
    def proxy(
        self, name: str, tokens: ConsoleTokens | None = None, settings: Settings | None = None
    ) -> Iterator[str]:
        """The proxy ``name`` on a port of this machine: its ws:// address."""
        proxy = consoleproxy.build(settings or self.settings, name, self.pool, self.bridge, tokens)
        with proxy.server("127.0.0.1", 0) as server:
            thread = threading.Thread(target=server.serve_forever, daemon=True)
            thread.start()
            try:
                yield f"ws://127.0.0.1:{server.socket.getsockname()[1]}/"
            finally:
                server.shutdown()
                thread.join(timeout=10)


def token_of(url: str) -> str:
    query = parse_qs(urlsplit(url).query)
    if "path" in query:  # noVNC's: path=?token=...
        query = parse_qs(urlsplit(query["path"][0]).query)
    return query["token"][0]


@pytest.fixture
def consoles(
    stack: Stack, api_settings: Settings, bridge: NatsBridge, conn: libvirt.virConnect, tmp_path: Path
) -> Iterator[Consoles]:
    instances = tmp_path / "instances"
    driver = LoopbackConsoles(lambda: conn, instances_path=instances)
    worker = stack_host(
        stack.handlers.app, api_settings, bridge, driver, instances, poll=0.1, retry=FAST_RETRY
    )
    pool = open_pool(api_settings.database_url or "")
    try:
        yield Consoles(stack, api_settings, driver, bridge, pool)
    finally:
        worker.close()
        pool.close()


# -- the API's contract ------------------------------------------------------------------------------
def test_remote_consoles_answer_nova_keys_and_store_only_the_token_hash(consoles: Consoles) -> None:
    server = consoles.server()
    r = consoles.remote(server, "serial", "serial")
    assert r.status_code == 200, r.text
    assert r.json == {
        "remote_console": {"protocol": "serial", "type": "serial", "url": r.json["remote_console"]["url"]}
    }
    url = r.json["remote_console"]["url"]
    assert url.startswith("ws://127.0.0.1:6083/?token=")
    token = token_of(url)

    r = consoles.remote(server, "vnc", "novnc", version="2.8")
    assert r.status_code == 200, r.text
    assert set(r.json["remote_console"]) == {"protocol", "type", "url"}
    novnc = r.json["remote_console"]["url"]
    assert novnc.startswith("http://127.0.0.1:6080/vnc_lite.html?path=%3Ftoken%3D"), novnc
    assert token_of(novnc) != token

    with psycopg.connect(consoles.settings.database_url or "") as conn:
        rows = conn.execute(f"SELECT * FROM {SCHEMA}.tokens WHERE server_id = %s", (server,)).fetchall()
    assert len(rows) == 2
    assert any(hashlib.sha256(token.encode()).digest() in row for row in rows)
    assert not any(token in str(row) for row in rows)  # stored hashed, never in clear
    # ... and nothing of it is on the log
    events = consoles.stack.log.select_notifications(1, 100_000)
    assert not any(token.encode() in bytes(e.state) for e in events)


def test_remote_consoles_errors_are_novas(consoles: Consoles) -> None:
    server = consoles.server()
    # protocol and type outside Nova's enums: the schema's 400
    assert_fault(consoles.remote(server, "telnet", "serial"), 400, "badRequest")
    assert_fault(consoles.remote(server, "mks", "webmks"), 400, "badRequest")  # mks only from 2.8
    assert_fault(
        consoles.remote(server, "mks", "webmks", version="2.8"),
        400,
        "badRequest",
        "Unavailable console type webmks.",
    )
    assert_fault(
        consoles.remote(server, "spice", "spice-html5"),
        400,
        "badRequest",
        "Unavailable console type spice-html5.",
    )
    assert_fault(consoles.remote(server, "vnc", "serial"), 400, "badRequest", "Invalid console type serial")
    # spice-direct is a type from 2.99 on: the schema's 400 before, Nova's "unavailable" after
    r = consoles.remote(server, "spice", "spice-direct", version="2.98")
    assert_fault(r, 400, "badRequest")
    assert "Unavailable" not in r.json["badRequest"]["message"]
    r = consoles.remote(server, "spice", "spice-direct", version="2.99")
    assert_fault(r, 400, "badRequest", "Unavailable console type spice-direct.")
    # not before 2.6; unknown server; another project's server
    assert_fault(consoles.remote(server, "serial", "serial", version="2.5"), 404, "itemNotFound")
    assert_fault(
        consoles.remote("0" * 8 + "-0000-0000-0000-" + "0" * 12, "serial", "serial"), 404, "itemNotFound"
    )
    assert_fault(consoles.remote(server, "serial", "serial", who=P2), 404, "itemNotFound")
    assert consoles.remote(server, "serial", "serial", who=ADMIN).status_code == 200  # admins: any project's
    # a server that is not running: 409
    r = consoles.stack.request("POST", f"/v2.1/servers/{server}/action", P1, json={"os-stop": None})
    assert r.status_code == 202, r.text
    consoles.settled(server, "SHUTOFF")
    assert_fault(
        consoles.remote(server, "serial", "serial"),
        409,
        "conflictingRequest",
        f"Instance {server} is not ready",
    )


def test_the_older_console_actions_until_2_5(consoles: Consoles) -> None:
    server = consoles.server()

    def action(body: dict[str, Any], version: str = "2.1") -> Any:
        headers = {**consoles.stack.headers(P1), "OpenStack-API-Version": f"compute {version}"}
        return consoles.stack.client.simulate_post(
            f"/v2.1/servers/{server}/action", headers=headers, json=body
        )

    r = action({"os-getSerialConsole": {"type": "serial"}})
    assert r.status_code == 200, r.text
    assert set(r.json) == {"console"} and set(r.json["console"]) == {"type", "url"}
    assert r.json["console"]["type"] == "serial" and r.json["console"]["url"].startswith("ws://")
    r = action({"os-getVNCConsole": {"type": "novnc"}}, "2.5")
    assert r.status_code == 200, r.text
    assert r.json["console"]["type"] == "novnc" and "vnc_lite.html?path=" in r.json["console"]["url"]
    assert_fault(
        action({"os-getVNCConsole": {"type": "xvpvnc"}}), 400, "badRequest", "Unavailable console type"
    )
    assert_fault(action({"os-getSerialConsole": {"type": "novnc"}}), 400, "badRequest")  # the schema's enum
    assert_fault(action({"os-getSerialConsole": {}}), 400, "badRequest")
    assert_fault(action({"os-getSerialConsole": {"type": "serial"}}, "2.6"), 404, "itemNotFound")


# -- the tokens and the proxy ------------------------------------------------------------------------
def refusal(url: str, **kw: Any) -> tuple[int, str]:
    with pytest.raises(InvalidStatus) as refused:
        connect(url, open_timeout=10, **kw)
    return refused.value.response.status_code, (refused.value.response.body or b"").decode()


def test_a_token_opens_the_serial_console_once(consoles: Consoles) -> None:
    server = consoles.server()
    token = token_of(consoles.url(server))
    with consoles.proxy("serialproxy") as address:
        with connect(f"{address}?token={token}", open_timeout=10) as ws:
            ws.send(b"uname\n")
            assert ws.recv(timeout=10) == b"echo:uname\n"
            ws.send("text too\n")
            assert ws.recv(timeout=10) == b"echo:text too\n"
        ((uuid, kind, stream),) = consoles.driver.opened
        assert (uuid, kind) == (server, "serial")
        eventually(stream.closed.is_set)  # the client left: the host's side is closed too
        assert refusal(f"{address}?token={token}") == (403, "The console token was already used.\n")
        assert len(consoles.driver.opened) == 1


def test_refusals_come_before_any_websocket(consoles: Consoles) -> None:
    server = consoles.server()
    with consoles.proxy("serialproxy") as address:
        assert refusal(f"{address}?token=forged") == (403, "The console token is unknown.\n")
        assert refusal(address) == (403, "The console token is missing or malformed.\n")
        # a browser from elsewhere, or one that loads the URL as a page: refused before the token
        # is even looked at (it stays good)
        token = token_of(consoles.url(server))
        page = http.client.HTTPConnection(urlsplit(address).netloc, timeout=10)
        page.request("GET", f"/?token={token}")
        answer = page.getresponse()
        assert (answer.status, answer.read()) == (426, b"This is a websocket endpoint.\n")
        page.close()
        bad = {"origin": "http://evil.example"}
        assert refusal(f"{address}?token={token}", **bad) == (403, "The request's Origin is not allowed.\n")
        allowed: Any = "http://127.0.0.1:6083"  # the base URL's host
        with connect(f"{address}?token={token}", origin=allowed, open_timeout=10) as ws:
            ws.send(b"x")
            assert ws.recv(timeout=10) == b"echo:x"
        # a token for the graphical console does not open the serial one
        vnc = token_of(consoles.url(server, "vnc", "novnc"))
        assert refusal(f"{address}?token={vnc}") == (
            403,
            "The console token is for a novnc console, not serial.\n",
        )
    # expired: the proxy's clock is past the token's deadline (600 s by default)
    late = ConsoleTokens(consoles.pool.connection, clock=lambda: time.time() + 601)
    token = token_of(consoles.url(server))
    with consoles.proxy("serialproxy", tokens=late) as address:
        assert refusal(f"{address}?token={token}") == (403, "The console token has expired.\n")
    # a token issued for another host: the server has moved since
    tokens = ConsoleTokens(consoles.pool.connection)
    moved = tokens.issue(server, "serial", "another-host", 600)
    with consoles.proxy("serialproxy") as address:
        assert refusal(f"{address}?token={moved}") == (403, "The console's server moved to another host.\n")
        # deleted: refused, and the token issued before the delete with it
        token = token_of(consoles.url(server))
        r = consoles.stack.request("DELETE", f"/v2.1/servers/{server}", P1)
        assert r.status_code == 204, r.text
        eventually(lambda: consoles.stack.get(f"/v2.1/servers/{server}", P1).status_code == 404)
        assert refusal(f"{address}?token={token}") == (403, "The console's server was deleted.\n")
    assert consoles.driver.opened[0][2].closed.is_set() and len(consoles.driver.opened) == 1


def get(address: str, path: str) -> tuple[int, str, bytes]:
    page = http.client.HTTPConnection(urlsplit(address).netloc, timeout=10)
    try:
        page.request("GET", path)
        answer = page.getresponse()
        return answer.status, answer.getheader("Content-Type") or "", answer.read()
    finally:
        page.close()


def test_the_novnc_proxy_relays_the_vnc_display_and_serves_novnc(consoles: Consoles, tmp_path: Path) -> None:
    server = consoles.server()
    url = consoles.url(server, "vnc", "novnc")
    token = token_of(url)
    web = tmp_path / "novnc"
    (web / "core").mkdir(parents=True)
    (web / "vnc_lite.html").write_text("<html>noVNC</html>")
    (web / "core" / "rfb.js").write_text("export default class RFB {}")
    (tmp_path / "secret").write_text("not for browsers")
    settings = dataclasses.replace(consoles.settings, novnc_web=web)
    binary: Any = ["binary"]  # noVNC's subprotocol
    with consoles.proxy("novncproxy", settings=settings) as address:
        # noVNC's pages, as the URL the API answered names them (the token is not spent by them)
        assert get(address, urlsplit(url).path + "?" + urlsplit(url).query) == (
            200, "text/html", b"<html>noVNC</html>"
        )  # fmt: skip
        assert get(address, "/core/rfb.js")[0] == 200
        assert get(address, "/../secret")[0] == 404 and get(address, "/%2e%2e/secret")[0] == 404
        assert get(address, "/nothing.html")[0] == 404
    with (
        consoles.proxy("novncproxy", settings=settings) as address,
        connect(f"{address}?token={token}", subprotocols=binary, open_timeout=10) as ws,
    ):
        assert ws.subprotocol == "binary"
        ws.send(b"RFB 003.008\n")
        assert ws.recv(timeout=10) == b"echo:RFB 003.008\n"
    assert [(u, k) for u, k, _ in consoles.driver.opened] == [(server, "vnc")]


def test_a_host_that_cannot_open_the_console_is_a_clear_503(consoles: Consoles) -> None:
    server = consoles.server()
    token = token_of(consoles.url(server))
    conn = consoles.driver._connection()
    with consoles.proxy("serialproxy") as address:
        dom = conn.lookupByUUIDString(server)
        dom.destroy()
        dom.undefine()  # gone from the host behind the log's back
        status, text = refusal(f"{address}?token={token}")
    assert status == 503 and text.startswith("The console is not available: No guest"), text


def test_stratus_serialproxy_runs_as_its_own_process(consoles: Consoles, tmp_path: Path) -> None:
    port = free_port()
    settings = dataclasses.replace(consoles.settings, serialproxy_bind=f"127.0.0.1:{port}")
    argv = [sys.executable, "-m", "processes.cli", "serialproxy"]
    server = consoles.server()
    token = token_of(consoles.url(server))
    with serving(argv, settings, port, tmp_path / "serialproxy.log") as proc:
        address = f"ws://127.0.0.1:{port}/"
        assert refusal(f"{address}?token=forged") == (403, "The console token is unknown.\n")
        with connect(f"{address}?token={token}", open_timeout=10) as ws:
            ws.send(b"hello")
            assert ws.recv(timeout=10) == b"echo:hello"
        proc.terminate()
        assert proc.wait(timeout=15) == 0, (tmp_path / "serialproxy.log").read_text()[-2000:]
