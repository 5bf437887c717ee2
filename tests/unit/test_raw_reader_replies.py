"""The raw reader's batch loop reads the protocol as its one-message step does: data messages whole
or split across reads, a PING answered between them, sizes spaced as the server never spaces them,
the batch ended by its status message. The server's side is a socket pair's other end."""

from __future__ import annotations

import socket

from stratus.audit.rawreader import RawReader


def _hmsg(block: bytes, body: bytes, gap: bytes = b" ") -> bytes:
    sizes = gap.join([b"%d" % len(block), b"%d" % (len(block) + len(body))])
    return b"HMSG _INBOX.raw 1 $JS.ACK.x" + gap + sizes + b"\r\n" + block + body + b"\r\n"


def _reader(sock: socket.socket, received: bytes) -> RawReader:
    """A reader on ``sock``, ``received`` already in its buffer (what ``_fill`` would have put there)."""
    reader = RawReader.__new__(RawReader)
    reader._sock, reader._buf, reader._pos = sock, received, 0
    return reader


def test_a_batch_is_read_as_the_one_message_step_reads_it() -> None:
    blocks = [b"NATS/1.0\r\nNats-Sequence: %d\r\nce-topic: t\r\n\r\n" % n for n in (1, 2, 3, 4)]
    status = _hmsg(b"NATS/1.0 204 EOB\r\nNats-Pending-Messages: 0\r\n\r\n", b"")
    wire = (
        _hmsg(blocks[0], b'{"a": 1}')
        + _hmsg(blocks[1], b"", gap=b"  ")  # two spaces: read by the step, which splits on any
        + b"PING\r\n"
        + _hmsg(blocks[2], b"\x00\r\n binary")
        + _hmsg(blocks[3], b"{}")
        + status
        + b"PONG\r\n"
    )
    ours, server = socket.socketpair()
    with ours, server:
        split = wire.index(blocks[2]) + 5  # the third message arrives in two reads
        server.sendall(wire[split:])
        reader = _reader(ours, wire[:split])
        got = reader._replies()
        assert got == [
            (blocks[0], b'{"a": 1}'),
            (blocks[1], b""),
            (blocks[2], b"\x00\r\n binary"),
            (blocks[3], b"{}"),
        ]
        assert reader._line() == b"PONG"  # the status message read, nothing past it
        assert server.recv(100) == b"PONG\r\n"  # the PING answered
