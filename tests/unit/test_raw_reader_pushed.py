"""The raw reader's push read speaks the consumer's protocol: flow control answered (a request, and a
heartbeat saying the consumer is stalled on one), heartbeats skipped, ack replies of both forms read,
a lost delivery answered by a new consumer from the next position, the read ended at the delivery
that leaves nothing pending, each consumer deleted; a refused creation is ``ConsumerRefused``. The
server's side is a socket pair's other end, its whole script written before the read (the reader
reads it in order)."""

from __future__ import annotations

import json
import socket

import pytest

from stratus.audit.rawreader import ConsumerRefused, RawReader

STAMP = 1795754407564771164  # 2026-11-27T04:40:07.564771164Z


def _reader(sock: socket.socket) -> RawReader:
    reader = RawReader.__new__(RawReader)
    reader._sock, reader._buf, reader._pos = sock, b"", 0
    reader.stream = "S"
    reader._api, reader._prefix, reader._consumers = b"_INBOX.t.api", "_INBOX.t", 0
    return reader


def _msg(subject: bytes, sid: int, reply: bytes, block: bytes, body: bytes) -> bytes:
    reply = reply + b" " if reply else b""
    if not block:
        return b"MSG %s %d %s%d\r\n%s\r\n" % (subject, sid, reply, len(body), body)
    return b"HMSG %s %d %s%d %d\r\n%s%s\r\n" % (
        subject,
        sid,
        reply,
        len(block),
        len(block) + len(body),
        block,
        body,
    )


def _delivery(sid: int, seq: int, dseq: int, pending: int, *, v2: bool = False) -> bytes:
    if v2:  # with a domain and an account hash, and the random token after
        ack = b"$JS.ACK.hub.ACCHASH.S.c.1.%d.%d.%d.%d.r4nd" % (seq, dseq, STAMP, pending)
    else:
        ack = b"$JS.ACK.S.c.1.%d.%d.%d.%d" % (seq, dseq, STAMP, pending)
    return _msg(b"ev.x.%d" % seq, sid, ack, b"NATS/1.0\r\nce-id: %d\r\n\r\n" % seq, b"body%d" % seq)


def _answer(kind: bytes, sid: int, body: dict[str, object]) -> bytes:
    return _msg(b"_INBOX.t.api.%s%d" % (kind, sid), 2, b"", b"", json.dumps(body).encode())


def _frame(seq: int, pending: int, before: int) -> tuple[bytes, bytes]:
    block = (
        b"NATS/1.0\r\nce-id: %d\r\nNats-Stream: S\r\nNats-Subject: ev.x.%d\r\nNats-Sequence: %d\r\n"
        b"Nats-Time-Stamp: 2026-11-27T04:40:07.564771164Z\r\nNats-Num-Pending: %d\r\n"
        b"Nats-Last-Sequence: %d\r\n\r\n" % (seq, seq, seq, pending, before)
    )
    return block, b"body%d" % seq


def _sent(server: socket.socket) -> bytes:
    server.setblocking(False)
    out = b""
    while True:
        try:
            chunk = server.recv(1 << 16)
        except BlockingIOError:
            return out
        if not chunk:
            return out
        out += chunk


def test_a_push_read_answers_flow_control_skips_heartbeats_and_recreates_its_consumer_after_a_gap() -> None:
    heartbeat = b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: %d\r\nNats-Last-Stream: %d\r\n\r\n"
    script = (
        _delivery(3, 5, 1, 3)  # before the creation's answer, as the server sends them
        + _msg(b"_INBOX.t.1", 3, b"$JS.FC.S.fc1.1", b"NATS/1.0 100 FlowControl Request\r\n\r\n", b"")
        + _answer(b"c", 3, {"name": "c", "num_pending": 4})
        + _msg(b"_INBOX.t.1", 3, b"", heartbeat % (1, 5), b"")
        + b"PING\r\n"
        + _msg(
            b"_INBOX.t.1",
            3,
            b"",
            b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 1\r\n"
            b"Nats-Consumer-Stalled: $JS.FC.S.fc2.2\r\n\r\n",
            b"",
        )
        + _delivery(3, 7, 3, 1)  # delivery 2 (position 6) lost
        + _delivery(3, 8, 4, 0)  # sent before the reader's UNSUB: skipped
        + _answer(b"d", 3, {"success": True})
        # the new consumer, from position 6; ack replies of the other form
        + _delivery(4, 6, 1, 2, v2=True)
        + _answer(b"c", 4, {"name": "c2", "num_pending": 3})
        + _delivery(4, 7, 2, 1)
        + _msg(b"_INBOX.t.2", 4, b"", heartbeat % (2, 7), b"")
        + _delivery(4, 8, 3, 0)
        + _answer(b"d", 4, {"success": True})
    )
    ours, server = socket.socketpair()
    with ours, server:
        server.sendall(script)
        reader = _reader(ours)
        frames = list(reader.pushed("ev.>", 5))
        assert frames == [_frame(5, 3, 0), _frame(6, 2, 5), _frame(7, 1, 6), _frame(8, 0, 7)]
        sent = _sent(server)
        assert reader._pos == len(reader._buf)  # read up to the last deletion's answer, nothing past it
    assert sent.count(b"PUB $JS.FC.S.fc1.1 0\r\n\r\n") == 1  # the request answered
    assert sent.count(b"PUB $JS.FC.S.fc2.2 0\r\n\r\n") == 1  # the stall answered
    assert sent.count(b"PONG\r\n") == 1
    creates = [json.loads(line) for line in sent.split(b"\r\n") if line.startswith(b'{"stream_name"')]
    assert [c["config"]["opt_start_seq"] for c in creates] == [5, 6]
    assert {c["config"]["ack_policy"] for c in creates} == {"none"}
    assert sent.count(b"UNSUB 3\r\n") == sent.count(b"UNSUB 4\r\n") == 1
    assert sent.count(b"PUB $JS.API.CONSUMER.DELETE.S.") == 2


def test_a_read_from_past_the_head_ends_at_the_creations_answer() -> None:
    ours, server = socket.socketpair()
    with ours, server:
        server.sendall(
            _answer(b"c", 3, {"name": "c", "num_pending": 0}) + _answer(b"d", 3, {"success": True})
        )
        assert list(_reader(ours).pushed("ev.>", 99)) == []
        assert b"PUB $JS.API.CONSUMER.DELETE.S." in _sent(server)


def test_a_read_left_early_deletes_its_consumer_and_skips_what_it_had_sent() -> None:
    ours, server = socket.socketpair()
    with ours, server:
        server.sendall(
            _delivery(3, 1, 1, 2) + _delivery(3, 2, 2, 1) + _answer(b"c", 3, {"name": "c", "num_pending": 3})
            + _delivery(3, 3, 3, 0) + _answer(b"d", 3, {"success": True}) + b"PONG\r\n"
        )  # fmt: skip
        reader = _reader(ours)
        read = reader.pushed("ev.>", 1)
        assert next(read) == _frame(1, 2, 0)
        read.close()
        assert b"UNSUB 3\r\nPUB $JS.API.CONSUMER.DELETE.S." in _sent(server)
        assert reader._line() == b"PONG"


@pytest.mark.parametrize(
    "refusal",
    [
        _answer(
            b"c",
            3,
            {"error": {"code": 400, "err_code": 10026, "description": "maximum consumers limit reached"}},
        )
        + _answer(b"d", 3, {"error": {"code": 404, "description": "consumer not found"}}),
        b"-ERR 'Permissions Violation for Publish to \"$JS.API.CONSUMER.CREATE.S.c\"'\r\n"
        b"-ERR 'Permissions Violation for Publish to \"$JS.API.CONSUMER.DELETE.S.c\"'\r\n",
        _msg(b"_INBOX.t.api.c3", 2, b"", b"NATS/1.0 503\r\n\r\n", b"")
        + _answer(b"d", 3, {"error": {"code": 404, "description": "consumer not found"}}),
    ],
    ids=["limit", "permission", "no-jetstream"],
)
def test_a_refused_consumer_is_consumer_refused_with_the_protocol_in_step(refusal: bytes) -> None:
    ours, server = socket.socketpair()
    with ours, server:
        server.sendall(refusal + b"PONG\r\n")
        reader = _reader(ours)
        with pytest.raises(ConsumerRefused):
            next(reader.pushed("ev.>", 1))
        assert reader._line() == b"PONG"
