"""A minimal NATS protocol reader (a blocking socket, no nats-py) for the JetStream read floor.

It reads a whole stream with batch direct gets, or on an ordered push consumer, and only counts
messages, so its rate is what the server and the loopback deliver, before any client library parses
a header or schedules a callback. Benchmarks only: no reconnects, no TLS, no auth.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Callable
from urllib.parse import urlsplit

# What a rung of the replay's ladder does with each delivered message: (the message's header block
# and body as delivered, its ack reply), called as it is read.
Handler = Callable[[bytes, bytes, bytes], object]


class RawNats:
    def __init__(self, url: str, timeout: float = 30.0) -> None:
        parts = urlsplit(url)
        self.sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 4222), timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self._line()  # INFO
        connect = {"verbose": False, "pedantic": False, "headers": True, "no_responders": True, "lang": "raw"}
        self.sock.sendall(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        while self._line() != b"PONG":
            pass
        self.sock.sendall(b"SUB _RAW.inbox 1\r\n")

    def close(self) -> None:
        self.sock.close()

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("nats-server closed the connection")
        self.buf += chunk

    def _line(self) -> bytes:
        while (end := self.buf.find(b"\r\n")) < 0:
            self._fill()
        line = bytes(self.buf[:end])
        del self.buf[: end + 2]
        return line

    def _take(self, n: int) -> bytes:
        while len(self.buf) < n + 2:
            self._fill()
        data = bytes(self.buf[:n])
        del self.buf[: n + 2]
        return data

    def _message(self) -> list[bytes]:
        """The next message's control line, split (``MSG`` or ``HMSG``; its payload still to take):
        PINGs answered, other lines (+OK, PONG, INFO updates) skipped, an -ERR raised."""
        while True:
            line = self._line()
            if line == b"PING":
                self.sock.sendall(b"PONG\r\n")
            elif line.startswith(b"-ERR"):
                raise ConnectionError(line.decode())
            elif line.startswith((b"HMSG", b"MSG")):
                return line.split()

    def direct_batch(self, stream: str, seq: int, subject: str, batch: int) -> int:
        """One batch direct get from ``seq``; the number of messages it returned (0 at the end)."""
        request = json.dumps({"seq": seq, "next_by_subj": subject, "batch": batch}).encode()
        self.sock.sendall(
            b"PUB $JS.API.DIRECT.GET.%s _RAW.inbox %d\r\n%s\r\n" % (stream.encode(), len(request), request)
        )
        count = 0
        while True:
            fields = self._message()
            total = int(fields[-1])  # header length in fields[-2]
            data = self._take(total)
            status = data[9:12]  # "NATS/1.0 204 ..." on the status messages, "NATS/1.0\r\n" otherwise
            if status.isdigit():
                return count  # 204 end of batch, 404 nothing (more) to read
            count += 1

    def read_stream(self, stream: str, subject: str, batch: int = 1000) -> int:
        """Read every message on ``subject`` (dense sequences from 1, no deletes); the count."""
        seq, total = 1, 0
        while n := self.direct_batch(stream, seq, subject, batch):
            total += n
            seq += n
        return total

    def push_stream(self, stream: str, subject: str, handle: Handler | None = None) -> int:
        """Read every message on ``subject`` from an ephemeral ordered push consumer (flow control
        answered, heartbeats skipped) up to the head (the delivery that leaves nothing pending); the
        count. The consumer is the one ``stratus.audit.rawreader.RawReader.pushed`` makes.
        ``handle``: called with each message's header block, body and ack reply (None: count only)."""
        name = f"bench{uuid.uuid4().hex[:12]}"
        deliver = f"_RAW.push.{name}"
        config = {
            "name": name,
            "deliver_subject": deliver,
            "deliver_policy": "all",
            "filter_subject": subject,
            "ack_policy": "none",
            "max_deliver": 1,
            "flow_control": True,
            "idle_heartbeat": 5_000_000_000,
            "mem_storage": True,
            "replay_policy": "instant",
            "inactive_threshold": 30_000_000_000,
        }
        request = json.dumps({"stream_name": stream, "config": config, "action": "create"}).encode()
        self.sock.sendall(
            b"SUB %s 2\r\nPUB $JS.API.CONSUMER.CREATE.%s.%s _RAW.inbox %d\r\n%s\r\n"
            % (deliver.encode(), stream.encode(), name.encode(), len(request), request)
        )
        count, answered = 0, False
        while True:
            fields = self._message()
            data = self._take(int(fields[-1]))
            if fields[2] == b"1":  # the consumer's creation answered
                answered = True
                continue
            reply = fields[3] if len(fields) == (6 if fields[0] == b"HMSG" else 5) else b""
            if reply.startswith(b"$JS.FC."):
                self.sock.sendall(b"PUB %s 0\r\n\r\n" % reply)
            elif reply.startswith(b"$JS.ACK."):
                count += 1
                if handle is not None:
                    split = int(fields[-2]) if fields[0] == b"HMSG" else 0  # its header block's length
                    handle(data[:split], data[split:], reply)
                if reply.endswith(b".0"):  # nothing pending after it: the head
                    break
        self.sock.sendall(
            b"UNSUB 2\r\nPUB $JS.API.CONSUMER.DELETE.%s.%s _RAW.inbox 0\r\n\r\n"
            % (stream.encode(), name.encode())
        )
        waiting = 1 if answered else 2  # the deletion's answer, and the creation's if still due
        while waiting:
            line = self._line()
            if line == b"PING":
                self.sock.sendall(b"PONG\r\n")
            elif line.startswith((b"HMSG", b"MSG")):
                fields = line.split()
                self._take(int(fields[-1]))
                waiting -= fields[2] == b"1"  # (deliveries sent before the UNSUB are skipped)
        return count
