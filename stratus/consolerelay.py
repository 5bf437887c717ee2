"""A guest's console as a byte stream over core NATS, between a console proxy and the guest's host.

The console proxies (``stratus serialproxy``, ``stratus novncproxy``) run anywhere that reaches NATS
and PostgreSQL; a guest's serial port (libvirt's console stream) and its VNC display (a socket on
the host's loopback) are only reachable on its host. The host's hypervisor worker is the one
process there that already talks to NATS, so it relays: nothing else listens on a compute host,
and the VNC display never leaves the host's loopback.

A session, named by the proxy with a random id:

1. the proxy subscribes ``_STRATUS.CONSOLE.<host>.<session>.out``, then asks the host
   (``_STRATUS.HOST.<host>.console-open``, request/reply) to open ``{"server_id", "kind", "session"}``;
   the host answers ``{"session": ...}`` once the source is open, or an error (``hostrpc``'s codes);
2. the host publishes what the guest writes to ``.out`` (chunks of at most ``CHUNK`` bytes; an empty
   message is the end), and writes what arrives on ``.in`` to the guest;
3. ``.ctl`` carries ``ping`` (every ``PING_SECONDS``) and ``close``. A host that hears nothing from
   the proxy for ``IDLE_SECONDS`` closes the session: a proxy that died leaves no session behind.

Core NATS keeps the order of one publisher's messages on a subject and does not retry: a console
is a live stream, as a TCP connection to it would be, and a lost proxy ends the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, Protocol
from uuid import UUID, uuid4

import nats.errors
import orjson
from nats.aio.msg import Msg

from stratus.eventstore.bridge import NatsBridge
from stratus.eventstore.subjects import encode_token
from stratus.hostrpc import NOT_FOUND, UNAVAILABLE, HostRefused, HostUnavailable, ask, subject

log = logging.getLogger(__name__)

OPEN = "console-open"
SUBJECT_PREFIX = "_STRATUS.CONSOLE"
KINDS = ("serial", "vnc")
CHUNK = 64 * 1024
PING_SECONDS = 10.0
IDLE_SECONDS = 30.0
OPEN_TIMEOUT = 10.0
_PING, _CLOSE = b"ping", b"close"


def session_subject(host: str, session: str, part: str) -> str:
    """A session's subjects are under its host's name: a host may use its own sessions only
    (processes/trust.py)."""
    return f"{SUBJECT_PREFIX}.{encode_token(host)}.{session}.{part}"


class Source(Protocol):
    """A guest's console on its host: ``read`` blocks and returns b"" at the end; ``close`` makes a
    blocked ``read`` return."""

    def read(self, size: int) -> bytes: ...

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...


# What opens a guest's console of a kind on the host; raises ``HostRefused`` (NOT_FOUND: no such
# guest or console; UNAVAILABLE: the guest is not running).
Opener = Callable[[str, str], Source]


# -- the host's side ---------------------------------------------------------------------------------
class RelayHost:
    """Serves ``console-open`` for ``host`` on ``bridge``: each session relays one ``Source``."""

    def __init__(self, bridge: NatsBridge, host: str, opener: Opener, idle_seconds: float = IDLE_SECONDS):
        self._bridge = bridge
        self._host = host
        self._open = opener
        self._idle = idle_seconds
        self._sub: Any = None
        self._sessions: dict[str, _HostSession] = {}
        self._lock = threading.Lock()

    def serve(self) -> None:
        async def on_request(msg: Msg) -> None:
            reply = await asyncio.get_running_loop().run_in_executor(None, self._answer, msg.data)
            await msg.respond(orjson.dumps(reply))

        async def subscribe() -> Any:
            return await self._bridge.nc.subscribe(subject(self._host, OPEN), cb=on_request)

        self._sub = self._bridge.run(subscribe, 10.0)

    def _answer(self, data: bytes) -> dict[str, Any]:
        try:
            body = orjson.loads(data)
            server_id = str(UUID(str(body["server_id"])))  # a UUID, never a path
            session = UUID(str(body["session"])).hex
            kind = str(body["kind"])
        except (orjson.JSONDecodeError, KeyError, ValueError, TypeError):
            return {"error": "bad_request", "message": "console-open needs server_id, kind and session"}
        if kind not in KINDS:
            return {"error": "bad_request", "message": f"No console of kind {kind[:20]!r}"}
        try:
            source = self._open(server_id, kind)
        except HostRefused as r:
            return {"error": r.code, "message": r.message}
        relayed = _HostSession(self._bridge, self._host, session, source, self._idle, self._forget)
        with self._lock:
            self._sessions[session] = relayed
        try:
            relayed.start()
        except (nats.errors.Error, TimeoutError) as e:
            relayed.close()
            return {"error": UNAVAILABLE, "message": f"The console could not be relayed: {e}"}
        log.info("console %s of %s open (session %s)", kind, server_id, session)
        return {"session": session}

    def _forget(self, session: str) -> None:
        with self._lock:
            self._sessions.pop(session, None)

    def close(self) -> None:
        with self._lock:
            sessions = list(self._sessions.values())
        for s in sessions:
            s.close()
        sub, self._sub = self._sub, None
        if sub is not None and not self._bridge.closed:
            with contextlib.suppress(nats.errors.Error, TimeoutError):  # the connection is going away
                self._bridge.run(sub.unsubscribe, 5.0)


class _HostSession:
    """One relayed console: a reader thread (guest → ``.out``) and a writer thread (``.in`` → guest)."""

    def __init__(
        self,
        bridge: NatsBridge,
        host: str,
        session: str,
        source: Source,
        idle: float,
        forget: Callable[[str], None],
    ) -> None:
        self._bridge = bridge
        self._host = host
        self._session = session
        self._source = source
        self._idle = idle
        self._forget = forget
        self._inbox: queue.Queue[bytes | None] = queue.Queue()  # None: a ping
        self._subs: list[Any] = []
        self._closed = threading.Event()
        self._closing = threading.Lock()

    def start(self) -> None:
        async def on_in(msg: Msg) -> None:
            if msg.data:
                self._inbox.put(msg.data)

        async def on_ctl(msg: Msg) -> None:
            if msg.data == _CLOSE:
                self._inbox.put(b"")
            else:
                self._inbox.put(None)

        async def subscribe() -> list[Any]:
            nc = self._bridge.nc
            return [
                await nc.subscribe(session_subject(self._host, self._session, "in"), cb=on_in),
                await nc.subscribe(session_subject(self._host, self._session, "ctl"), cb=on_ctl),
            ]

        self._subs = self._bridge.run(subscribe, 10.0)
        name = f"console-{self._session[:8]}"
        threading.Thread(target=self._read, name=f"{name}-out", daemon=True).start()
        threading.Thread(target=self._write, name=f"{name}-in", daemon=True).start()

    def _publish(self, data: bytes) -> None:
        out = session_subject(self._host, self._session, "out")

        async def publish() -> None:
            await self._bridge.nc.publish(out, data)

        self._bridge.run(publish, 10.0)

    def _read(self) -> None:
        try:
            while not self._closed.is_set():
                data = self._source.read(CHUNK)
                if not data:
                    break
                self._publish(data)
        except OSError as e:
            if not self._closed.is_set():
                log.info("console session %s: the guest's console ended: %s", self._session, e)
        except (nats.errors.Error, TimeoutError) as e:
            log.warning("console session %s: cannot relay to the proxy: %s", self._session, e)
        finally:
            self.close()

    def _write(self) -> None:
        try:
            while not self._closed.is_set():
                try:
                    data = self._inbox.get(timeout=self._idle)
                except queue.Empty:
                    log.info("console session %s: no word from the proxy for %ss", self._session, self._idle)
                    break
                if data is None:
                    continue  # a ping
                if data == b"":
                    break  # the proxy closed
                self._source.write(data)
        except OSError as e:
            if not self._closed.is_set():
                log.info("console session %s: cannot write to the guest: %s", self._session, e)
        finally:
            self.close()

    def close(self) -> None:
        with self._closing:  # from the reader, the writer and the host's close: once
            if self._closed.is_set():
                return
            self._closed.set()
        self._forget(self._session)
        self._inbox.put(b"")
        self._source.close()
        if self._bridge.closed:
            return
        try:
            self._publish(b"")  # the end, for the proxy
            for sub in self._subs:
                self._bridge.run(sub.unsubscribe, 5.0)
        except (nats.errors.Error, TimeoutError):
            pass  # the proxy's own timeout ends its side


# -- the proxy's side --------------------------------------------------------------------------------
class Relay:
    """The proxy's end of one session: ``send`` bytes to the guest; ``on_data`` gets the guest's
    bytes, then b"" once at the end (from the bridge's loop: it must not block)."""

    def __init__(self, bridge: NatsBridge, host: str, session: str, sub: Any) -> None:
        self._bridge = bridge
        self._host = host
        self._session = session
        self._sub = sub
        self._closed = False

    def _publish(self, part: str, data: bytes) -> None:
        name = session_subject(self._host, self._session, part)

        async def publish() -> None:
            await self._bridge.nc.publish(name, data)

        self._bridge.run(publish, 10.0)

    def send(self, data: bytes) -> None:
        for i in range(0, len(data), CHUNK):
            self._publish("in", data[i : i + CHUNK])

    def ping(self) -> None:
        self._publish("ctl", _PING)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._bridge.closed:
            return
        try:
            self._publish("ctl", _CLOSE)
            self._bridge.run(self._sub.unsubscribe, 5.0)
        except (nats.errors.Error, TimeoutError):
            pass  # the host closes an idle session by itself


def open_relay(
    bridge: NatsBridge,
    host: str,
    server_id: str,
    kind: str,
    on_data: Callable[[bytes], None],
    timeout: float = OPEN_TIMEOUT,
) -> Relay:
    """A session to ``server_id``'s console of ``kind`` on ``host``; ``HostUnavailable`` when the host
    does not answer, ``HostRefused`` for its refusals."""
    session = uuid4().hex

    async def on_out(msg: Msg) -> None:
        on_data(msg.data)

    async def subscribe() -> Any:
        return await bridge.nc.subscribe(session_subject(host, session, "out"), cb=on_out)

    try:
        sub = bridge.run(subscribe, timeout)
    except (nats.errors.Error, TimeoutError) as e:
        raise HostUnavailable(f"Cannot reach the log's NATS: {e}") from e
    relay = Relay(bridge, host, session, sub)
    try:
        ask(bridge, host, OPEN, {"server_id": server_id, "kind": kind, "session": session}, timeout)
    except BaseException:
        relay.close()
        raise
    return relay


__all__ = [
    "KINDS",
    "NOT_FOUND",
    "UNAVAILABLE",
    "HostRefused",
    "HostUnavailable",
    "Opener",
    "Relay",
    "RelayHost",
    "Source",
    "open_relay",
]
