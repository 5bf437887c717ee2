"""A minimal NATS protocol reader for reading the whole log fast (verification, export).

nats-py spends 20-100 µs per message parsing headers and scheduling callbacks; verifying a log at
100,000 events/s leaves 10 µs per event for reading and hashing together. This reader speaks the
client protocol on a blocking socket, sends batch direct gets (``$JS.API.DIRECT.GET.<stream>``) and
hands back each message's raw header block and body, pipelining the next batch request while the
caller processes the current one. No reconnects (a verification is simply run again).
``user:password@`` and ``?token=`` in the URL work, and so does an NKey seed (``seed_file``: the
part's, docs/trust.md).

TLS as the bridge's nats-py connects (the closed cluster of deploy/nats-cluster/): the server's
INFO first, then the handshake when it requires TLS, verified against the same trust store (Python's
default context: the system's CAs, or the deployment's CA through ``SSL_CERT_FILE``) and the URL's
host name. Stricter than nats-py in one case: a ``tls://`` URL whose server offers no TLS is refused,
never read in plain text.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import SplitResult, parse_qs, unquote, urlsplit

from stratus.eventstore.errors import EventStoreUnavailable
from stratus.trust.nkeys import KeyPair
from stratus.trust.registry import inbox_prefix


class RawReaderError(EventStoreUnavailable):
    """The server could not be read (connection refused or lost, TLS refused, protocol error)."""


@dataclass(frozen=True)
class RawMessage:
    """One message read from the stream without decoding: position, subject, raw headers, body."""

    position: int
    subject: str
    header_block: bytes  # "NATS/1.0\r\nName: value\r\n...\r\n\r\n"
    body: bytes


def position_of(block: bytes) -> int:
    """The stream sequence a direct get's reply names (its first ``Nats-Sequence`` line), 0 if none."""
    start = block.find(b"\r\nNats-Sequence:")
    if start < 0:
        return 0
    return int(block[start + 16 : block.index(b"\r\n", start + 2)])


def subject_of(block: bytes) -> str:
    """The subject a direct get's reply names (its first ``Nats-Subject`` line), "" if none."""
    start = block.find(b"\r\nNats-Subject:")
    if start < 0:
        return ""
    return block[start + 15 : block.index(b"\r\n", start + 2)].strip().decode()


class RawReader:
    """Reads one stream's messages in position order; ``with RawReader(urls, stream) as r: ...``."""

    def __init__(
        self,
        urls: tuple[str, ...] | list[str],
        stream: str,
        *,
        timeout: float = 30.0,
        seed_file: Path | None = None,
    ) -> None:
        self.stream = stream
        self._key = KeyPair.from_seed(seed_file.read_text().strip()) if seed_file is not None else None
        self._subject = f"$JS.API.DIRECT.GET.{stream}".encode()
        # The replies' subject: under the identity's own inbox prefix (the only one it may
        # subscribe to, docs/trust.md); without credentials, nats-py's default prefix.
        inbox = inbox_prefix(self._key.public_key) if self._key is not None else "_INBOX"
        self._inbox = f"{inbox}.raw".encode()
        # what was received and not yet read, from ``_pos`` on (bytes: a slice is one copy, not two)
        self._buf = b""
        self._pos = 0
        errors = []
        for url in urls:
            try:
                self._sock = self._connect(url, timeout)
                return
            except (OSError, RawReaderError) as e:
                errors.append(f"{url}: {e}")
        raise RawReaderError("cannot read the log from NATS: " + "; ".join(errors))

    def __enter__(self) -> RawReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def _connect(self, url: str, timeout: float) -> socket.socket:
        parts = urlsplit(url if "://" in url else f"nats://{url}")
        if parts.scheme not in ("nats", "tls"):
            raise RawReaderError(f"scheme {parts.scheme}:// is not supported by the raw reader")
        host = parts.hostname or "127.0.0.1"
        self._buf, self._pos = b"", 0
        self._sock = socket.create_connection((host, parts.port or 4222), timeout)
        try:
            return self._handshake(parts, host)
        except BaseException:
            self._sock.close()
            raise

    def _handshake(self, parts: SplitResult, host: str) -> socket.socket:
        """INFO, TLS when asked, CONNECT with the credentials, and the replies' subscription."""
        sock = self._sock
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        info = self._line()
        if not info.startswith(b"INFO"):
            raise RawReaderError(f"not a NATS server: {info[:40]!r}")
        try:
            server: dict[str, Any] = json.loads(info[5:])
        except ValueError as e:
            raise RawReaderError(f"not a NATS server's INFO: {info[:40]!r}") from e
        if server.get("tls_required") or parts.scheme == "tls":
            self._sock = sock = self._secured(sock, host, server)
        connect: dict[str, object] = {
            "verbose": False,
            "pedantic": False,
            "headers": True,
            "no_responders": True,
            "lang": "python-stratus-raw",
            "version": "1",
        }
        if parts.username:
            connect["user"] = unquote(parts.username)
            connect["pass"] = unquote(parts.password or "")
        token = parse_qs(parts.query).get("token")
        if token:
            connect["auth_token"] = token[0]
        nonce = server.get("nonce") if self._key is not None else None
        if self._key is not None and nonce:
            connect["nkey"] = self._key.public_key
            connect["sig"] = base64.urlsafe_b64encode(self._key.sign(nonce.encode())).decode().rstrip("=")
        sock.sendall(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        while True:
            line = self._line()
            if line == b"PONG":
                break
            if line.startswith(b"-ERR"):
                raise RawReaderError(line.decode(errors="replace"))
        sock.sendall(b"SUB %s 1\r\n" % self._inbox)
        return sock

    def _secured(self, sock: socket.socket, host: str, server: dict[str, Any]) -> socket.socket:
        """``sock`` after the TLS handshake that follows the server's INFO, the server's certificate
        verified as nats-py's default context verifies it; a server offering no TLS is refused."""
        if not (server.get("tls_required") or server.get("tls_available")):
            raise RawReaderError("the URL asks for TLS (tls://) and the server offers none")
        if self._pos != len(self._buf):  # the server waits for the handshake: nothing may follow INFO
            raise RawReaderError("the server sent more than INFO before the TLS handshake")
        return ssl.create_default_context().wrap_socket(sock, server_hostname=host)

    # -- buffered protocol reading ------------------------------------------------------------------

    def _fill(self) -> None:
        try:
            chunk = self._sock.recv(1 << 20)
        except OSError as e:
            raise RawReaderError(f"reading from NATS: {e}") from e
        if not chunk:
            raise RawReaderError("nats-server closed the connection")
        self._buf = self._buf[self._pos :] + chunk if self._pos < len(self._buf) else chunk
        self._pos = 0

    def _line(self) -> bytes:
        while (end := self._buf.find(b"\r\n", self._pos)) < 0:
            self._fill()
        line = self._buf[self._pos : end]
        self._pos = end + 2
        return line

    def _take(self, n: int) -> bytes:
        while len(self._buf) - self._pos < n + 2:
            self._fill()
        data = self._buf[self._pos : self._pos + n]
        self._pos += n + 2
        return data

    def _request(self, body: dict[str, object]) -> None:
        payload = json.dumps(body).encode()
        self._sock.sendall(b"PUB %s %s %d\r\n%s\r\n" % (self._subject, self._inbox, len(payload), payload))

    def _next(self) -> tuple[bytes, bytes] | None:
        """The next reply message as (header block, body); None for a status message (end of batch)."""
        while True:
            line = self._line()
            if line.startswith(b"HMSG"):
                fields = line.split()
                hdr_len, total = int(fields[-2]), int(fields[-1])
                data = self._take(total)
                block = data[:hdr_len]
                if block[9:12].isdigit():  # "NATS/1.0 204 EOB", "NATS/1.0 404 ...": a status
                    return None
                return block, data[hdr_len:]
            if line == b"PING":
                self._sock.sendall(b"PONG\r\n")
            elif line.startswith(b"-ERR"):
                raise RawReaderError(line.decode(errors="replace"))
            elif line.startswith(b"MSG"):
                self._take(int(line.split()[-1]))

    def _replies(self) -> list[tuple[bytes, bytes]]:
        """The data messages answering one batch request, up to the status that ends the batch, each
        as (header block, body): ``_next``'s work, done in this one loop for each message that is all
        in the buffer (no call and no copy of its protocol line per message)."""
        got: list[tuple[bytes, bytes]] = []
        append = got.append
        buf, pos = self._buf, self._pos
        while True:
            end = buf.find(b"\r\n", pos)
            if end >= 0 and buf.startswith(b"HMSG ", pos):  # "HMSG subject sid [reply] hdr_len total"
                space = buf.rfind(b" ", pos, end)
                try:
                    start = end + 2
                    stop = start + int(buf[space + 1 : end])
                    body = start + int(buf[buf.rfind(b" ", pos, space) + 1 : space])
                except ValueError:  # not one space apart, as the server writes them: ``_next`` reads it
                    stop = len(buf)
                if stop + 2 <= len(buf):
                    block, pos = buf[start:body], stop + 2
                    if block[9:12].isdigit():  # "NATS/1.0 204 EOB", "NATS/1.0 404 ...": a status
                        self._pos = pos
                        return got
                    append((block, buf[body:stop]))
                    continue
            # a message not all received yet, or another line (PING, an error): one step at a time
            self._pos = pos
            item = self._next()
            if item is None:
                return got
            append(item)
            buf, pos = self._buf, self._pos

    # -- reading the stream -------------------------------------------------------------------------

    def last_position(self, subject_filter: str) -> int:
        """The position of the last message on ``subject_filter`` (0 if none)."""
        self._request({"last_by_subj": subject_filter})
        got = self._next()
        if got is None:
            return 0
        return position_of(got[0])

    def messages(
        self, subject_filter: str, start: int = 1, stop: int | None = None, batch: int = 1000
    ) -> Iterator[RawMessage]:
        """Messages on ``subject_filter`` from position ``start`` to ``stop`` (inclusive), in order."""
        frames = self.frames(subject_filter, start, stop, batch)
        try:
            for block, body in frames:
                yield RawMessage(position_of(block), subject_of(block), block, body)
        finally:
            frames.close()

    def frames(
        self, subject_filter: str, start: int = 1, stop: int | None = None, batch: int = 1000
    ) -> Generator[tuple[bytes, bytes], None, None]:
        """The messages ``messages`` reads, as (header block, body) alone: a tuple per message and no
        header looked up (``position_of(block)`` gives a message's position when it is needed), for a
        reader that finds what it needs in the blocks itself (``projections.rawlog``)."""
        seq = max(start, 1)
        if stop is not None and stop < seq:
            return
        self._request({"seq": seq, "next_by_subj": subject_filter, "batch": batch})
        in_flight = True  # a batch was asked for and its replies are not all read yet
        try:
            while True:
                got = self._replies()
                in_flight = False
                last = position_of(got[-1][0]) if got else 0
                # a batch may stop short of `batch` (the server caps its bytes): ask again until empty
                more = bool(got) and (stop is None or last < stop)
                if more:  # ask for the next batch before handing this one over
                    self._request({"seq": last + 1, "next_by_subj": subject_filter, "batch": batch})
                    in_flight = True
                if stop is not None and last > stop:
                    for frame in got:
                        if position_of(frame[0]) > stop:
                            return
                        yield frame
                    return
                yield from got
                if not more:
                    return
        finally:
            if in_flight:  # the caller stopped early: read the batch asked for, to keep the protocol in step
                while self._next() is not None:
                    pass
