"""``stratus serialproxy`` and ``stratus novncproxy``: a websocket to a guest's console, for one token.

Before the websocket is opened (in the HTTP upgrade request, so that a refusal is a plain HTTP
answer and no websocket is ever left half open), the proxy checks, in this order:

0. that it is a websocket upgrade at all: a plain GET is answered from noVNC's web files when the
   proxy has them (``web``: Debian's ``novnc`` package puts them in /usr/share/novnc, as Nova's
   novncproxy serves them), and is 426 otherwise; it spends no token;
1. the browser's ``Origin`` (absent: not a browser, as Nova allows): its host must be one of the
   allowed ones (the base URL's host and ``console_allowed_origins``); otherwise 403;
2. the token (``?token=``): spent now, whatever follows; unknown, used, expired or for another
   console type: 403 with the reason;
3. the server, in the read model: deleted, or no longer on the host the token was issued for
   (moved): 403;
4. the guest's host opens the console (``stratus.consolerelay``): 503 when it cannot.

Then bytes go both ways: websocket messages (binary or text) to the guest, the guest's bytes as
binary messages. When either end closes, so does the other. The proxy pings the host's side every
``PING_SECONDS`` so that a host never keeps a session for a proxy that died.
"""

from __future__ import annotations

import dataclasses
import logging
import mimetypes
import queue
import threading
from collections.abc import Callable, Iterable
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.sync.server import Server, ServerConnection, serve

from api.consoles.tokens import ConsoleTokens, TokenRefused
from stratus.consolerelay import PING_SECONDS, HostRefused, HostUnavailable, Relay

log = logging.getLogger("stratus.consoles")


@dataclasses.dataclass(frozen=True)
class ServerPlace:
    """Where the read model has a server now."""

    host: str | None
    deleted: bool


# (host, server_id, kind, on_data) → an open relay (``stratus.consolerelay.open_relay`` on a bridge)
OpenRelay = Callable[[str, str, str, Callable[[bytes], None]], Relay]


def allowed_hosts(base_url: str, extra: Iterable[str]) -> frozenset[str]:
    """The hosts a browser's Origin may name: the base URL's and the configured ones."""
    hosts = {h.strip().lower() for h in extra if h.strip()}
    base = urlsplit(base_url).hostname
    if base:
        hosts.add(base.lower())
    return frozenset(hosts)


@dataclasses.dataclass
class _Session:
    relay: Relay
    inbox: queue.Queue[bytes]


class ConsoleProxy:
    """One console proxy: ``kind`` ("serial" or "vnc") for tokens of ``console_type``."""

    def __init__(
        self,
        *,
        kind: str,
        console_type: str,
        tokens: ConsoleTokens,
        place: Callable[[str], ServerPlace | None],
        open_relay: OpenRelay,
        allowed_origins: frozenset[str],
        ping_seconds: float = PING_SECONDS,
        web: Path | None = None,
    ) -> None:
        self._kind = kind
        self._type = console_type
        self._tokens = tokens
        self._place = place
        self._open_relay = open_relay
        self._origins = allowed_origins
        self._ping = ping_seconds
        self._web = web.resolve() if web is not None and web.is_dir() else None
        self._sessions: dict[int, _Session] = {}
        self._lock = threading.Lock()

    def server(self, host: str, port: int) -> Server:
        """The websocket server on ``host:port`` (``serve_forever`` it; ``shutdown`` stops it)."""
        return serve(
            self.handle,
            host,
            port,
            process_request=self.check,
            process_response=self.opened,
            select_subprotocol=_binary_if_offered,
            compression=None,  # a console's bytes are small and interactive, and often compressed (RFB)
            max_size=1024 * 1024,
        )

    # -- before the websocket ----------------------------------------------------------------------
    def check(self, connection: ServerConnection, request: Request) -> Response | None:
        """None to open the websocket; otherwise the refusal, as an HTTP answer."""
        if request.headers.get("Upgrade", "").lower() != "websocket":  # the token is left unspent
            if self._web is not None:
                return _static(connection, self._web, urlsplit(request.path).path)
            return connection.respond(HTTPStatus.UPGRADE_REQUIRED, "This is a websocket endpoint.\n")
        origin = request.headers.get("Origin")
        if origin is not None and (urlsplit(origin).hostname or "").lower() not in self._origins:
            log.info("console refused: Origin %.100s is not allowed", origin)
            return connection.respond(HTTPStatus.FORBIDDEN, "The request's Origin is not allowed.\n")
        token = parse_qs(urlsplit(request.path).query).get("token", [""])[0]
        try:
            grant = self._tokens.take(token, self._type)
        except TokenRefused as e:
            log.info("console refused: %s", e)
            return connection.respond(HTTPStatus.FORBIDDEN, f"{e}\n")
        place = self._place(grant.server_id)
        if place is None or place.deleted:
            return connection.respond(HTTPStatus.FORBIDDEN, "The console's server was deleted.\n")
        if place.host != grant.host:
            return connection.respond(HTTPStatus.FORBIDDEN, "The console's server moved to another host.\n")
        inbox: queue.Queue[bytes] = queue.Queue()
        try:
            relay = self._open_relay(grant.host, grant.server_id, self._kind, inbox.put)
        except (HostRefused, HostUnavailable) as e:
            log.info("console of %s not opened: %s", grant.server_id, e)
            return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, f"The console is not available: {e}\n")
        with self._lock:
            self._sessions[id(connection)] = _Session(relay, inbox)
        log.info("console %s of %s opened", self._kind, grant.server_id)
        return None

    def opened(self, connection: ServerConnection, _request: Request, response: Response) -> None:
        """After the handshake: a session whose websocket did not open (a malformed upgrade) is
        closed here, not left to the host's idle timeout."""
        if response.status_code != HTTPStatus.SWITCHING_PROTOCOLS:
            with self._lock:
                session = self._sessions.pop(id(connection), None)
            if session is not None:
                session.relay.close()

    # -- the websocket ----------------------------------------------------------------------------
    def handle(self, ws: ServerConnection) -> None:
        with self._lock:
            session = self._sessions.pop(id(ws), None)
        if session is None:  # cannot happen: ``check`` accepted the request
            ws.close(1011, "no console session")
            return
        relay, inbox = session.relay, session.inbox
        sender = threading.Thread(target=self._to_client, args=(ws, relay, inbox), daemon=True)
        sender.start()
        try:
            for message in ws:
                relay.send(message if isinstance(message, bytes) else message.encode())
        except ConnectionClosed:
            pass  # the client went away: close the guest's side below
        finally:
            relay.close()
            inbox.put(b"")
            sender.join(timeout=10)

    def _to_client(self, ws: ServerConnection, relay: Relay, inbox: queue.Queue[bytes]) -> None:
        """The guest's bytes to the client; a ping to the host when nothing came for a while."""
        while True:
            try:
                data = inbox.get(timeout=self._ping)
            except queue.Empty:
                relay.ping()
                continue
            if not data:
                ws.close(1000, "the console closed")
                return
            try:
                ws.send(data)
            except ConnectionClosed:
                return


def _static(connection: ServerConnection, web: Path, path: str) -> Response:
    """A file of noVNC's web directory (never one outside it), or 404."""
    wanted = (web / unquote(path).lstrip("/")).resolve()
    if wanted.is_dir():
        wanted = wanted / "vnc_lite.html"
    if not wanted.is_relative_to(web) or not wanted.is_file():
        return connection.respond(HTTPStatus.NOT_FOUND, "Not found.\n")
    body = wanted.read_bytes()
    kind = mimetypes.guess_type(wanted.name)[0] or "application/octet-stream"
    headers = Headers([("Content-Type", kind), ("Content-Length", str(len(body)))])
    return Response(HTTPStatus.OK, "OK", headers, body)


def _binary_if_offered(_connection: ServerConnection, offered: Any) -> Any:
    """noVNC asks for the ``binary`` subprotocol; a plain client asks for none."""
    return "binary" if "binary" in offered else None
