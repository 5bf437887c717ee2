"""A minimal NATS protocol reader for reading the whole log fast (verification, export).

nats-py spends 20-100 µs per message parsing headers and scheduling callbacks; verifying a log at
100,000 events/s leaves 10 µs per event for reading and hashing together. This reader speaks the
client protocol on a blocking socket, sends batch direct gets (``$JS.API.DIRECT.GET.<stream>``) and
hands back each message's raw header block and body, pipelining the next batch request while the
caller processes the current one. No reconnects (a verification is simply run again).
``user:password@`` and ``?token=`` in the URL work, and so does an NKey seed (``seed_file``: the
part's, docs/trust.md).

A replay reads the other way (``pushed``): an ephemeral ordered push consumer delivers the log from a
position to its head, and each message is handed back as the batch direct get would have (its
block with the headers direct get adds, Nats-Stream to Nats-Last-Sequence, built from the delivery's
subject and ack reply): serving a direct get costs nats-server ~24 us of CPU per event, delivering
to a push consumer ~5 (docs/performance.md, "Read models: rebuild"). The consumer is flow
controlled (the server waits for an answer every ~13 MB: a caller's pauses hold no more than that),
named by us, deleted when the read ends or is left, and expires by itself (``inactive_threshold``)
if the reader dies first; a gap in its delivery sequence recreates it from the next position, as
nats-py's ordered consumer does. ``ConsumerRefused``: the server would not create it (a part
without the right, JetStream limits): read by direct gets instead.

TLS as the bridge's nats-py connects (the closed cluster of deploy/nats-cluster/): the server's
INFO first, then the handshake when it requires TLS, verified against the same trust store (Python's
default context: the system's CAs, or the deployment's CA through ``SSL_CERT_FILE``) and the URL's
host name. Stricter than nats-py in one case: a ``tls://`` URL whose server offers no TLS is refused,
never read in plain text.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import secrets
import socket
import ssl
import time
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


class ConsumerRefused(RawReaderError):
    """The server would not create the push consumer of a read (no permission, a JetStream limit, no
    JetStream): the same read can be made by direct gets."""


@dataclass(frozen=True)
class RawMessage:
    """One message read from the stream without decoding: position, subject, raw headers, body."""

    position: int
    subject: str
    header_block: bytes  # "NATS/1.0\r\nName: value\r\n...\r\n\r\n"
    body: bytes


def position_of(block: bytes) -> int:
    """The stream sequence a direct get's reply names (its last ``Nats-Sequence`` line: the server
    writes its own after the published headers, where one of the same name would be), 0 if none."""
    start = block.rfind(b"\r\nNats-Sequence:")
    if start < 0:
        return 0
    return int(block[start + 16 : block.index(b"\r\n", start + 2)])


def subject_of(block: bytes) -> str:
    """The subject a direct get's reply names (its last ``Nats-Subject`` line, as ``position_of``), ""
    if none."""
    start = block.rfind(b"\r\nNats-Subject:")
    if start < 0:
        return ""
    return block[start + 15 : block.index(b"\r\n", start + 2)].strip().decode()


def time_stamp(ns: int) -> bytes:
    """``ns`` (Unix nanoseconds) as the server writes a direct get's ``Nats-Time-Stamp``: Go's
    RFC3339Nano in UTC, the fraction's trailing zeros dropped (and the dot, when it is zero)."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    text = _utc_seconds(seconds)
    return text + (b".%09d" % fraction).rstrip(b"0") + b"Z" if fraction else text + b"Z"


@functools.lru_cache(maxsize=16)
def _utc_seconds(seconds: int) -> bytes:
    """A time stamp's date and time to the second (a replay's neighbours mostly share it)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)).encode()


# An ack reply's tokens: ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<dseq>.<ts>.<pending>``
# (9), or with a domain and an account hash before the stream and a random token after (11 or 12):
# where the delivered count starts in each (as nats-py's ``Msg.Metadata`` reads them).
_ACK_V1_TOKENS = 9
_ACK_V1_DELIVERED, _ACK_V2_DELIVERED = 4, 6
# What a batch direct get's reply adds to the stored header block (the server's ``genHeader``: the
# block less its last CRLF, a line per header, the CRLF): stream, subject, position, time stamp,
# the messages left after it and the one before it in the batch (0 for the first).
_DIRECT_GET = (
    b"%sNats-Stream: %s\r\nNats-Subject: %s\r\nNats-Sequence: %s\r\nNats-Time-Stamp: %s\r\n"
    b"Nats-Num-Pending: %s\r\nNats-Last-Sequence: %s\r\n\r\n"
)
_HEARTBEAT = 5.0  # seconds between the consumer's idle heartbeats (nats-py's ordered consumer's)
_INACTIVE = 30.0  # seconds a consumer outlives its reader's subscription (a reader that died)


class _Gap(Exception):
    """A consumer's delivery skipped a sequence: it is recreated from the next position."""


@dataclass
class _Consumer:
    """One push consumer of a ``pushed`` read and what the reader knows of it."""

    name: str
    sid: bytes  # its deliveries' subscription
    created: bool = False  # its create request answered (the answer may follow the first deliveries)
    pending: int = -1  # the messages it had to deliver when created, as its answer says (-1: unknown)
    delivered: int = 0  # its delivery sequence: the last one read


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
        # The replies' subjects: under the identity's own inbox prefix (the only one it may
        # subscribe to, docs/trust.md; without credentials, nats-py's default prefix), and under a
        # token of this connection's: every subscriber of a subject gets what is sent to it, and two
        # readers of one identity (a rebuild and the projector's catch-up, an audit) must not read
        # each other's replies.
        inbox = inbox_prefix(self._key.public_key) if self._key is not None else "_INBOX"
        self._prefix = f"{inbox}.{secrets.token_hex(8)}"
        self._inbox = f"{self._prefix}.raw".encode()
        # a push read's subjects: its deliveries', and its API answers' (``.c``reate, ``.d``elete)
        self._api = f"{self._prefix}.api".encode()
        self._consumers = 0  # the push consumers made so far on this connection (sids 3, 4, ...)
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

    # -- reading the stream on a push consumer ------------------------------------------------------

    def pushed(self, subject_filter: str, start: int = 1) -> Generator[tuple[bytes, bytes], None, None]:
        """The frames one batch direct get from ``start`` reads (``frames``), from ``start`` to the
        log's head, delivered by an ordered push consumer: each block is the one the server delivers
        with the lines a direct get adds (``Nats-Stream``, ``Nats-Subject``, ``Nats-Sequence``,
        ``Nats-Time-Stamp``, ``Nats-Num-Pending``, ``Nats-Last-Sequence``) written as it writes them,
        so that no reader of the blocks can tell (tests/integration/test_pushed_frames.py). The read
        ends with the message the server had nothing after when it delivered it (at once when it had
        nothing from ``start``); its consumer is deleted then, or when the read is left.
        ``ConsumerRefused`` before any frame when the server will not create the consumer."""
        stream = self.stream.encode()
        previous = b"%d" % (max(start, 1) - 1)  # the last position handed over
        if self._consumers == 0:  # the API's answers to this connection's consumers' requests
            self._sock.sendall(b"SUB %s.* 2\r\n" % self._api)
        consumer = self._create(subject_filter, int(previous) + 1)
        last_sequence = b"0"  # a batch's first message names no message before it
        try:
            while True:
                frames, previous, last = self._deliveries(consumer, stream, previous, last_sequence)
                if frames:
                    last_sequence = previous
                    yield from frames
                    if last:
                        return
                    continue
                try:
                    got = self._delivery(consumer, stream, last_sequence)
                except _Gap:  # a delivery lost: a new consumer from the message after the last read
                    self._delete(consumer)
                    consumer = self._create(subject_filter, int(previous) + 1)
                    continue
                if got is None:
                    return
                frame, previous, last = got
                last_sequence = previous
                yield frame
                if last:
                    return
        finally:
            self._delete(consumer)

    def _create(self, subject_filter: str, start: int) -> _Consumer:
        """A push consumer delivering ``subject_filter`` from ``start``, its deliveries subscribed to
        before it is asked for (its first deliveries may come before the answer)."""
        self._consumers += 1
        consumer = _Consumer(f"raw{secrets.token_hex(8)}", b"%d" % (self._consumers + 2))
        deliver = f"{self._prefix}.{self._consumers}"
        config: dict[str, object] = {
            "name": consumer.name,
            "deliver_subject": deliver,
            "deliver_policy": "by_start_sequence",
            "opt_start_seq": start,
            "filter_subject": subject_filter,
            "ack_policy": "none",
            "max_deliver": 1,
            "flow_control": True,
            "idle_heartbeat": int(_HEARTBEAT * 1e9),
            "mem_storage": True,
            "replay_policy": "instant",
            "inactive_threshold": int(_INACTIVE * 1e9),
        }
        request = json.dumps({"stream_name": self.stream, "config": config, "action": "create"}).encode()
        self._sock.sendall(
            b"SUB %s %s\r\nPUB $JS.API.CONSUMER.CREATE.%s.%s %s.c%s %d\r\n%s\r\n"
            % (
                deliver.encode(),
                consumer.sid,
                self.stream.encode(),
                consumer.name.encode(),
                self._api,
                consumer.sid,
                len(request),
                request,
            )
        )
        return consumer

    def _deliveries(
        self, consumer: _Consumer, stream: bytes, previous: bytes, last_sequence: bytes
    ) -> tuple[list[tuple[bytes, bytes]], bytes, bool]:
        """``_delivery``'s work for each of ``consumer``'s data messages all in the buffer, in one loop
        (no call and no copy of a protocol line per message), up to anything else (left to it): the
        frames, the last one's position (``previous`` if none) and whether it is the head's."""
        got: list[tuple[bytes, bytes]] = []
        append = got.append
        buf, pos, sid = self._buf, self._pos, consumer.sid
        delivered = consumer.delivered
        last = False
        try:
            while (end := buf.find(b"\r\n", pos)) >= 0 and buf.startswith(b"HMSG ", pos):
                fields = buf[pos + 5 : end].split(b" ")  # subject sid reply hdr_len total
                if len(fields) != 5 or fields[1] != sid or not fields[2].startswith(b"$JS.ACK."):
                    break
                start = end + 2
                body, stop = start + int(fields[3]), start + int(fields[4])
                if stop + 2 > len(buf):
                    break
                tokens = fields[2].split(b".")
                at = _ACK_V1_DELIVERED if len(tokens) == _ACK_V1_TOKENS else _ACK_V2_DELIVERED
                sequence, delivery, stamp, pending = tokens[at + 1 : at + 5]
                if int(delivery) != delivered + 1:
                    break
                delivered += 1
                block = _DIRECT_GET % (
                    buf[start : body - 2],
                    stream,
                    fields[0],
                    sequence,
                    time_stamp(int(stamp)),
                    pending,
                    last_sequence,
                )
                append((block, buf[body:stop]))
                previous = last_sequence = sequence
                pos = stop + 2
                if pending == b"0":
                    last = True
                    break
        except ValueError:  # not as the server writes them: ``_delivery`` reads it (and says what)
            pass
        self._pos, consumer.delivered = pos, delivered
        return got, previous, last

    def _delivery(
        self, consumer: _Consumer, stream: bytes, last_sequence: bytes
    ) -> tuple[tuple[bytes, bytes], bytes, bool] | None:
        """The next message ``consumer`` delivers as a direct get's frame, its position and whether
        the server had nothing after it; None when it had nothing to deliver. What else comes is
        answered here: flow control, heartbeats, PINGs, the API's answers."""
        while True:
            if consumer.created and consumer.pending == 0 and consumer.delivered == 0:
                return None
            line = self._line()
            if line.startswith((b"HMSG ", b"MSG ")):
                fields = line.split()
                data = self._take(int(fields[-1]))
                headers = fields[0] == b"HMSG"
                hdr_len = int(fields[-2]) if headers else 0
                if fields[2] != consumer.sid:  # the API's answer, or an earlier consumer's delivery
                    if fields[2] == b"2":
                        self._answered(consumer, fields[1], data[:hdr_len], data[hdr_len:])
                    continue
                reply = fields[3] if len(fields) == (6 if headers else 5) else b""
                if not reply.startswith(b"$JS.ACK."):
                    self._status(consumer, data[:hdr_len], reply)
                    continue
                tokens = reply.split(b".")
                at = _ACK_V1_DELIVERED if len(tokens) == _ACK_V1_TOKENS else _ACK_V2_DELIVERED
                sequence, delivery, stamp, pending = tokens[at + 1 : at + 5]
                if int(delivery) != consumer.delivered + 1:
                    raise _Gap
                consumer.delivered += 1
                stored = data[:hdr_len] if headers else b"NATS/1.0\r\n\r\n"
                subject, stamp = fields[1], time_stamp(int(stamp))
                block = _DIRECT_GET % (stored[:-2], stream, subject, sequence, stamp, pending, last_sequence)
                return (block, data[hdr_len:]), sequence, pending == b"0"
            if line == b"PING":
                self._sock.sendall(b"PONG\r\n")
            elif line.startswith(b"-ERR"):
                self._error(consumer, line, deleting=False)

    def _status(self, consumer: _Consumer, block: bytes, reply: bytes) -> None:
        """A status message on the deliveries: flow control answered, a heartbeat read for a stall
        (answered) or a lost delivery (``_Gap``), the consumer gone (``_Gap``: made again)."""
        code = block[9:12]
        if code == b"100":
            if reply:  # "FlowControl Request": the server sends no more until it is answered
                self._sock.sendall(b"PUB %s 0\r\n\r\n" % reply)
                return
            headers = self._headers(block)
            stalled = headers.get(b"Nats-Consumer-Stalled")
            if stalled:  # a flow control request the server still waits for
                self._sock.sendall(b"PUB %s 0\r\n\r\n" % stalled)
            last = headers.get(b"Nats-Last-Consumer")
            if last is not None and int(last) != consumer.delivered:
                raise _Gap
        elif code == b"409":  # "Consumer Deleted" and the like
            raise _Gap
        else:
            raise RawReaderError(f"unexpected status on a push consumer: {block[:60]!r}")

    @staticmethod
    def _headers(block: bytes) -> dict[bytes, bytes]:
        lines = (line.partition(b":") for line in block.split(b"\r\n")[1:])
        return {name.strip(): value.strip() for name, colon, value in lines if colon}

    def _answered(self, consumer: _Consumer, subject: bytes, block: bytes, body: bytes) -> bool:
        """``consumer``'s create request answered (its pending count kept; ``ConsumerRefused``) or
        its delete request (True)."""
        if subject.endswith(b".d" + consumer.sid):
            return True
        if not subject.endswith(b".c" + consumer.sid):
            return False
        consumer.created = True
        if block[9:12].isdigit():  # "503": no JetStream answers
            status = block[9:].partition(b"\r\n")[0].decode(errors="replace")
            raise ConsumerRefused(f"cannot create a consumer: {status}")
        try:
            answer = json.loads(body)
        except ValueError as e:
            raise RawReaderError(f"not an answer to a consumer's creation: {body[:60]!r}") from e
        if "error" in answer:
            error = answer["error"]
            raise ConsumerRefused(f"cannot create a consumer: {error.get('description', error)}")
        consumer.pending = int(answer.get("num_pending", 0))
        return False

    def _error(self, consumer: _Consumer, line: bytes, *, deleting: bool) -> bool:
        """An ``-ERR``: a permission refused to a consumer's request (``ConsumerRefused`` for its
        creation or subscription; True for its deletion, left to expire), else ``RawReaderError``."""
        text = line.decode(errors="replace")
        if "Permissions Violation" not in text:
            raise RawReaderError(text)
        if "CONSUMER.DELETE" in text:
            return True
        if "CONSUMER.CREATE" in text:
            consumer.created = True
        if not deleting:
            raise ConsumerRefused(text)
        return False

    def _delete(self, consumer: _Consumer) -> None:
        """Stop ``consumer``'s deliveries and delete it, reading up to the answers to its creation
        and its deletion (what it had sent is skipped), so that the next request starts clean."""
        self._sock.sendall(
            b"UNSUB %s\r\nPUB $JS.API.CONSUMER.DELETE.%s.%s %s.d%s 0\r\n\r\n"
            % (consumer.sid, self.stream.encode(), consumer.name.encode(), self._api, consumer.sid)
        )
        deleted = False
        while not (consumer.created and deleted):
            line = self._line()
            if line.startswith((b"HMSG ", b"MSG ")):
                fields = line.split()
                data = self._take(int(fields[-1]))
                if fields[2] == b"2":
                    hdr_len = int(fields[-2]) if fields[0] == b"HMSG" else 0
                    with contextlib.suppress(ConsumerRefused):  # refused: nothing to delete
                        answer = self._answered(consumer, fields[1], data[:hdr_len], data[hdr_len:])
                        deleted = deleted or answer
            elif line == b"PING":
                self._sock.sendall(b"PONG\r\n")
            elif line.startswith(b"-ERR"):
                deleted = self._error(consumer, line, deleting=True) or deleted
