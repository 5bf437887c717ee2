"""The one place where Stratus's synchronous code meets asyncio.

nats-py is asyncio-only; everything else in Stratus (eventsourcing recorders, gunicorn workers, the
workers' control loops) is synchronous. A ``NatsBridge`` owns one event loop in a daemon thread and
one NATS connection on it; synchronous callers hand it coroutines with ``run``. A hop costs about
0.1 ms. The connection reconnects forever across all configured URLs, so a NATS restart shows up
to callers as a delay, not as a broken connection; callers decide what to retry.

Create the bridge after forking (in each gunicorn worker's composition root), never at import time.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import logging
import re
import threading
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import nats
import nats.errors
from nats.aio.client import _HEADER_KEY_RE as _HEADER_NAME
from nats.aio.client import _HEADER_VALUE_NEWLINES as _NEWLINES
from nats.aio.client import Client as _NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.protocol import command as prot_command

from stratus.eventstore.errors import EventStoreUnavailable
from stratus.trust.nkeys import KeyPair
from stratus.trust.registry import inbox_prefix

_CRLF = b"\r\n"
_WHITESPACE = re.compile(r"\s")


class Client(_NatsClient):
    """nats-py's client (pinned in pyproject.toml), with its header parser and encoder doing the same
    work faster.

    ``Client._parse_header_lines`` checks every header name for whitespace one character at a time
    in a generator; with the ~29 headers a stored event carries that check alone was most of the
    parse, and the parse most of every read path (docs/performance.md, "Read models: rebuild"). The
    override keeps the library's rules exactly (CRLF lines, split at the first ``:``, names ASCII
    without whitespace, values stripped and decoded as UTF-8 with replacement) and tests compare the
    two on the same inputs (tests/unit/test_header_parsing.py).

    ``_send_publish`` encodes a message's headers the same way (names stripped, empty ones skipped,
    invalid ones refused; values stripped, CR and LF as spaces) in one string instead of four
    bytearray extensions and a translation per header: ~10 µs instead of ~28 µs for an event's
    headers, on the loop thread of every append (tests/unit/test_header_encoding.py compares the
    bytes sent).

    ``publish_with_next_write`` and ``flush_soon`` let a hint (a commit's wake-up) share the
    connection's next write instead of costing one of its own.

    A request whose caller waits on the reply saves two passes of the loop (docs/performance.md,
    "one append's Python"): ``publish_now`` writes the message (with whatever else is pending) to
    the socket before returning, which is the flusher's next pass done at once, and
    ``subscribe_direct`` hands each message of a subscription to a plain function as the read loop
    parses it, instead of queueing it for a task of the subscription to call a coroutine with.
    """

    def __init__(self) -> None:
        super().__init__()
        self._direct: dict[int, Callable[[Msg], None]] = {}  # sid -> handler (``subscribe_direct``)
        self._write_through = False  # set during ``publish_now``

    @staticmethod
    def _parse_header_lines(raw: bytes) -> dict[str, str]:
        out: dict[str, str] = {}
        for line in raw.split(_CRLF):
            name, sep, value = line.partition(b":")
            if not sep:
                continue
            try:
                key = name.strip().decode("ascii")
            except UnicodeDecodeError:
                continue
            if _WHITESPACE.search(key) is None:
                out[key] = value.strip().decode("utf-8", "replace")
        return out

    async def _process_info(self, info: dict[str, Any], initial_connection: bool = False) -> None:
        # nats-py upgrades to TLS only when the server's INFO asks for it: a ``tls://`` URL answered by
        # a server (or whatever sits in between) that does not would be sent CONNECT, and the signed
        # nonce with it, in plain text. Refused before anything is sent, as the raw reader refuses it.
        server = self._current_server
        if (
            initial_connection
            and server is not None
            and server.uri.scheme == "tls"
            and not info.get("tls_required")
        ):
            raise nats.errors.Error(
                f"nats: {redacted(server.uri.geturl())} asks for TLS (tls://) and the server offers none"
            )
        await super()._process_info(info, initial_connection)

    def _setup_nkeys_connect(self) -> None:
        # An NKey seed given as ``nkeys_seed_str`` signs the server's nonce with Stratus's own NKey
        # code (stratus.trust.nkeys, on ``cryptography``), so nats-py's optional ``nkeys`` is not needed.
        assert self._nkeys_seed_str is not None, "Stratus connects with nkeys_seed_str only"
        key = KeyPair.from_seed(self._nkeys_seed_str)
        self._public_nkey = key.public_key
        self._signature_cb = lambda nonce: base64.b64encode(key.sign(nonce.encode()))

    async def _send_publish(
        self, subject: str, reply: str, payload: bytes, payload_size: int, headers: dict[str, Any] | None
    ) -> None:
        if headers is None or subject == "":
            return await super()._send_publish(subject, reply, payload, payload_size, headers)
        command = prot_command.hpub_cmd(subject, reply, _header_block(headers), payload)
        self.stats["out_msgs"] += 1
        self.stats["out_bytes"] += payload_size
        await self._send_command(command)
        if self._write_through and self.is_connected and self._flusher_task and not self._flusher_task.done():
            await self._write_pending()
        elif self._flush_queue is not None and self._flush_queue.empty():
            await self._flush_pending()

    async def publish_now(self, subject: str, payload: bytes, *, reply: str, headers: dict[str, str]) -> None:
        """``publish``, written to the socket before returning, with whatever else is pending (when
        connected; otherwise buffered as ``publish`` buffers)."""
        self._write_through = True
        try:
            await self.publish(subject, payload, reply=reply, headers=headers)
        finally:
            self._write_through = False

    async def _write_pending(self) -> None:
        # One pass of nats-py's ``_flusher``, made by the publishing task: the same write, the same
        # back-pressure (drain) and the same handling of a broken connection.
        transport = self._transport
        assert transport is not None, "connected"
        try:
            transport.writelines(self._pending[:])
            self._pending = []
            self._pending_data_size = 0
            await transport.drain()
        except OSError as e:
            await self._error_cb(e)
            await self._process_op_err(e)

    async def subscribe_direct(self, subject: str, handler: Callable[[Msg], None]) -> Subscription:
        """A subscription whose messages are given to ``handler`` on the read loop as they arrive
        (no queue, no task): for a handler that only resolves a future. It must not raise."""
        sub = await self.subscribe(subject)
        self._direct[sub._id] = handler
        return sub

    def _remove_sub(self, sid: int, max_msgs: int = 0) -> None:
        self._direct.pop(sid, None)
        super()._remove_sub(sid, max_msgs)

    async def _process_msg(self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes) -> None:
        handler = self._direct.get(sid)
        sub = self._subs.get(sid)
        if handler is None or sub is None:
            return await super()._process_msg(sid, subject, reply, data, headers)
        # As nats-py's ``_process_msg`` does for a subscription without limits nor JetStream, up to
        # where it would queue the message for the subscription's task.
        self.stats["in_msgs"] += 1
        self.stats["in_bytes"] += len(data)
        sub._received += 1
        msg = self._build_message(sid, subject, reply, data, await self._process_headers(headers))
        if msg:
            handler(msg)

    def publish_with_next_write(self, subject: str, payload: bytes) -> None:
        """A core publish (no reply, no headers) queued to go out with the connection's next write,
        without a write of its own; ``flush_soon`` asks for one. Dropped when not connected: for
        hints that may be lost (a commit's wake-up), not for messages that must arrive."""
        if not self.is_connected:
            return
        command = prot_command.pub_cmd(subject, "", payload)
        self._pending.append(command)
        self._pending_data_size += len(command)
        self.stats["out_msgs"] += 1
        self.stats["out_bytes"] += len(payload)

    def flush_soon(self) -> None:
        """Ask the flusher to write whatever is pending (from the loop; nothing if nothing is)."""
        if self._pending_data_size and self._flush_queue is not None and self._flush_queue.empty():
            self._flush_queue.put_nowait(asyncio.get_running_loop().create_future())


def _header_block(headers: dict[str, Any]) -> bytes:
    """A NATS header block as nats-py's ``_send_publish`` builds it. The names are stripped and
    checked once per shape of headers (their names in order: the recorder sends a few); when no
    value holds a CR or LF (Stratus's never do), the lines are formatted in one pass."""
    shape = tuple(headers)
    keys = _SHAPES.get(shape)
    if keys is None:
        keys = _shape_keys(shape)
        if keys is None:
            return _header_block_checked(headers)
    lines = "".join([f"{k}: {v.strip()}\r\n" for k, v in zip(keys, headers.values(), strict=True) if k])
    n = len(keys) - keys.count("")
    if lines.count("\n") != n or lines.count("\r") != n:
        return _header_block_checked(headers)
    return f"NATS/1.0\r\n{lines}\r\n".encode()


# The names of a shape of headers (as given, in order) -> the names sent ("": skipped, blank).
_SHAPES: dict[tuple[str, ...], tuple[str, ...]] = {}
_SHAPES_MAX = 256  # Stratus sends a few shapes; others' are not remembered past this


def _shape_keys(shape: tuple[str, ...]) -> tuple[str, ...] | None:
    """The names of ``shape`` as sent, or None if one is refused (``_header_block_checked`` says which)."""
    keys = tuple(name.strip() for name in shape)
    if any(k and _HEADER_NAME.fullmatch(k) is None for k in keys):
        return None
    if len(_SHAPES) < _SHAPES_MAX:
        _SHAPES[shape] = keys
    return keys


def _header_block_checked(headers: dict[str, Any]) -> bytes:
    """``_header_block`` for any headers, one at a time as nats-py goes (its refusals, in its order)."""
    parts = ["NATS/1.0\r\n"]
    for name, value in headers.items():
        key = name.strip()
        if not key:
            continue
        if _HEADER_NAME.fullmatch(key) is None:
            raise nats.errors.BadHeaderError(key)
        value = value.strip()
        if "\r" in value or "\n" in value:
            value = value.translate(_NEWLINES)
        parts.append(f"{key}: {value}\r\n")
    parts.append("\r\n")
    return "".join(parts).encode()


log = logging.getLogger(__name__)


def redacted(url: str) -> str:
    """``url`` without its password (``tls://stratus:***@nats-1:4222``): URLs may carry NATS credentials."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


T = TypeVar("T")


class NatsBridge:
    """One event loop thread, one NATS connection, and ``run()`` for synchronous callers.

    ``urls``: every server of the cluster (``Settings.nats_urls``). ``start(wait)`` connects and
    waits at most ``wait`` seconds for the first connection (``wait=0``: keep trying in the
    background; calls then wait for it within their own timeouts). ``seed_file``: the part's NKey
    seed (``Settings.nats_seed_file``), read here; None connects without credentials.
    """

    def __init__(
        self,
        urls: Sequence[str],
        *,
        name: str = "stratus",
        reconnect_time_wait: float = 0.1,
        connect_timeout: float = 2.0,
        ping_interval: int = 10,
        seed_file: Path | None = None,
    ) -> None:
        if not urls:
            raise ValueError("NatsBridge needs at least one NATS URL")
        self.urls = list(urls)
        self.name = name
        self._reconnect_time_wait = reconnect_time_wait
        self._connect_timeout = connect_timeout
        self._ping_interval = ping_interval
        self.seed_file = seed_file  # where the seed was read from: for readers below nats-py (rebuilds)
        self._seed = seed_file.read_text().strip() if seed_file is not None else None
        # With a seed, replies come under the identity's own inbox prefix: the only inboxes its
        # NATS permissions let it subscribe to (docs/trust.md).
        self.inbox_prefix = (
            inbox_prefix(KeyPair.from_seed(self._seed).public_key) if self._seed is not None else "_INBOX"
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name=f"nats-bridge-{name}", daemon=True)
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._connected: asyncio.Event | None = None
        self._connector: concurrent.futures.Future[None] | None = None
        self._closed = False
        self._started = False
        self._lock = threading.Lock()
        # Callers' tasks in flight, cancelled by close() so that no calling thread hangs.
        self._tasks: set[asyncio.Task[Any]] = set()
        self.hops = 0  # calls handed to the loop by ``run`` (tests and benches count them)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, wait: float = 10.0) -> NatsBridge:
        with self._lock:
            if self._closed:
                raise EventStoreUnavailable("the NATS bridge is closed")
            if not self._started:
                self._started = True
                self._thread.start()
                self._connector = asyncio.run_coroutine_threadsafe(self._connect_forever(), self._loop)
        if wait > 0:
            self.run(self._wait_connected, timeout=wait)
        return self

    def close(self, timeout: float = 5.0) -> None:
        """Cancel every in-flight call, close the connection and stop the loop thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            started = self._started
        if not started:
            self._loop.close()
            return
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError, RuntimeError):
            log.warning("NATS bridge %s did not shut down cleanly within %ss", self.name, timeout)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)

    def __enter__(self) -> NatsBridge:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def is_connected(self) -> bool:
        return self._nc is not None and self._nc.is_connected

    # -- for coroutines running on the bridge's loop ---------------------------------------------

    @property
    def nc(self) -> Client:
        """The connection; only for coroutines passed to ``run`` (they run after it connected)."""
        if self._nc is None:
            raise EventStoreUnavailable("NATS is not connected yet")
        return self._nc

    @property
    def js(self) -> JetStreamContext:
        if self._js is None:
            raise EventStoreUnavailable("NATS is not connected yet")
        return self._js

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    # -- for synchronous callers ---------------------------------------------------------------

    def run(self, coro_factory: Callable[[], Coroutine[Any, Any, T]], timeout: float) -> T:
        """Run ``coro_factory()`` on the loop once connected; wait at most ``timeout`` seconds.

        Raises ``TimeoutError`` (the coroutine is cancelled) or whatever the coroutine raised.
        Must not be called from the bridge's own thread.
        """
        if threading.current_thread() is self._thread:
            raise RuntimeError("NatsBridge.run() called from the bridge's own loop: await instead")
        if self._closed:
            raise EventStoreUnavailable("the NATS bridge is closed")
        if not self._started:
            self.start(wait=0)
        self.hops += 1

        # One task per call, its deadline a timer on it (``asyncio.timeout``), not a second task under
        # ``wait_for``; the caller waits on a bare lock the task's completion releases, not on a
        # ``concurrent.futures.Future`` (a condition, an RLock and a waiter lock per call). Each layer
        # between the coroutine and the caller costs a pass of the loop or a few microseconds, and a
        # one-event append is mostly such overhead (see docs/performance.md, "Event store: appends").
        # The coroutine hands its outcome to the caller as it ends, not the task's done callback, which
        # runs a pass of the loop later; the callback does for a task cancelled before it began.
        async def bounded() -> T:
            try:
                async with asyncio.timeout(timeout):
                    if self._connected is None or not self._connected.is_set():
                        await self._wait_connected()
                    result = await coro_factory()
            except (Exception, asyncio.CancelledError) as e:
                ended(False, e)
                raise
            ended(True, result)
            return result

        done = threading.Lock()
        done.acquire()
        tasks: list[asyncio.Task[T]] = []  # the call's task, once the loop created it
        outcome: list[tuple[bool, Any]] = []  # (returned, the value or the exception), once ended

        def begin() -> None:
            task = self._loop.create_task(bounded())
            tasks.append(task)
            self._tasks.add(task)
            task.add_done_callback(end)

        def ended(returned: bool, what: Any) -> None:
            outcome.append((returned, what))
            done.release()

        def end(task: asyncio.Task[T]) -> None:
            self._tasks.discard(task)
            if task.cancelled():
                if not outcome:
                    ended(False, asyncio.CancelledError())
            elif outcome:
                task.exception()  # retrieved (the caller raises it)
            else:
                ended(False, task.exception())

        self._loop.call_soon_threadsafe(begin)
        # The loop enforces the timeout; the margin only guards against a stuck loop.
        if not done.acquire(timeout=timeout + 5.0):
            if tasks:
                self._loop.call_soon_threadsafe(tasks[0].cancel)
            raise TimeoutError(f"NATS call did not finish within {timeout}s")
        returned, what = outcome[0]
        if returned:
            return what  # type: ignore[no-any-return]
        if isinstance(what, asyncio.CancelledError):
            raise EventStoreUnavailable("the NATS bridge was closed during the call")
        raise what

    def spawn(self, coro_factory: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        """Run a background coroutine on the loop until it returns or ``close()`` cancels it."""
        if self._closed:
            raise EventStoreUnavailable("the NATS bridge is closed")
        if not self._started:
            self.start(wait=0)

        self._loop.call_soon_threadsafe(self._create_task, coro_factory)

    def call_soon(self, fn: Callable[[], object]) -> None:
        """Schedule a plain callback on the loop (fire and forget)."""
        if not self._closed:
            self._loop.call_soon_threadsafe(fn)

    # -- internals ------------------------------------------------------------------------------

    def _create_task(self, coro_factory: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        if self._closed:  # close() has begun: its shutdown would not see (nor cancel) a new task
            return
        task = self._loop.create_task(coro_factory())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    async def _wait_connected(self) -> None:
        if self._connected is None:
            self._connected = asyncio.Event()
        await self._connected.wait()

    async def _connect_forever(self) -> None:
        if self._connected is None:
            self._connected = asyncio.Event()
        delay = self._reconnect_time_wait
        while not self._closed:
            nc = Client()
            credentials = {"nkeys_seed_str": self._seed} if self._seed is not None else {}
            try:
                await nc.connect(
                    servers=self.urls,
                    name=self.name,
                    allow_reconnect=True,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=self._reconnect_time_wait,  # type: ignore[arg-type]
                    connect_timeout=self._connect_timeout,  # type: ignore[arg-type]
                    ping_interval=self._ping_interval,
                    inbox_prefix=self.inbox_prefix,
                    error_cb=self._on_error,
                    disconnected_cb=self._on_disconnected,
                    reconnected_cb=self._on_reconnected,
                    **credentials,  # type: ignore[arg-type]
                )
            except (TimeoutError, nats.errors.NoServersError, OSError, nats.errors.Error) as e:
                log.info("NATS not reachable at %s (%s); retrying", ", ".join(map(redacted, self.urls)), e)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            self._nc = nc
            self._js = nc.jetstream()
            self._connected.set()
            return

    async def _shutdown(self) -> None:
        tasks = list(self._tasks)
        if self._connector is not None:
            self._connector.cancel()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._nc is not None and not self._nc.is_closed:
            try:
                await asyncio.wait_for(self._nc.close(), 2.0)
            except (TimeoutError, nats.errors.Error, OSError) as e:
                log.info("closing the NATS connection: %s", e)

    async def _on_error(self, e: Exception) -> None:
        if "permissions violation" in str(e).lower():
            # The server refused a publish or subscription this part's identity may not make
            # (docs/trust.md): a misconfigured seed or host name, or a bug; the call itself only
            # times out, so say why here.
            log.warning("NATS refused %s: %s", self.name, e)
            return
        log.debug("NATS connection error: %r", e)

    async def _on_disconnected(self) -> None:
        log.info("NATS disconnected; reconnecting")

    async def _on_reconnected(self) -> None:
        url = self._nc.connected_url if self._nc else None
        log.info("NATS reconnected to %s", redacted(url.geturl()) if url else "?")
