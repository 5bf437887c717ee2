"""Read a stream's messages straight from a nats-server file store, for verifying a copy of the log
with no server in the path (a backup, a stopped server's store, or a snapshot of a running one).

A stream's messages live in ``<store>/jetstream/<account>/streams/<stream>/msgs/<n>.blk``, blocks
numbered in sequence order. Each block is a run of records (nats-server's ``filestore.go``,
``writeMsgRecord``; checked against v2.15.1 here), little-endian:

    rl: u32        record length; bit 31 set when the message has headers
    seq: u64       the stream sequence (our position); bit 63 marks an erased message, bit 62 a
                   tombstone: neither is a message
    ts: i64        nanoseconds since the epoch
    slen: u16, subject
    [hlen: u32, header block]          only when bit 31 of rl is set
    msg, hash: 8 bytes (the server's own record checksum, not used here: the chain is the proof)

A compressed or encrypted store (stream options Stratus does not set) is not readable this way;
the reader says so instead of guessing.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_HEAD = struct.Struct("<IQqH")  # rl, seq, ts, slen
_HDR_LEN = struct.Struct("<I")
_HAS_HEADERS = 1 << 31
_ERASED = 1 << 63
_TOMBSTONE = 1 << 62
_SEQ_MASK = _TOMBSTONE - 1
_CHECKSUM = 8


class FileStoreError(Exception):
    """The store cannot be read as a plain nats-server file store."""


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One message as nats-server's store files hold it: position, subject, raw headers, body."""

    position: int
    subject: bytes
    header_block: bytes  # "NATS/1.0\r\nName: value\r\n...\r\n\r\n" (empty without headers)
    body: bytes


def stream_dir(store: Path, stream: str, account: str = "$G") -> Path:
    """Where a stream's files are: ``store`` may be the server's ``-sd`` directory or its ``jetstream``."""
    for base in (store / "jetstream", store):
        candidate = base / account / "streams" / stream
        if candidate.is_dir():
            return candidate
    raise FileStoreError(
        f"no stream {stream} under {store} (looked for jetstream/{account}/streams/{stream})"
    )


def blocks(stream: Path) -> list[Path]:
    """The stream's message blocks, in sequence order."""
    found = [p for p in (stream / "msgs").glob("*.blk") if p.stem.isdigit()]
    if not found:
        raise FileStoreError(f"no message blocks in {stream / 'msgs'}")
    return sorted(found, key=lambda p: int(p.stem))


def records(path: Path) -> Iterator[tuple[int, bytes, bytes, bytes]]:
    """(position, subject, header block, body) of every message of one block, in order (erased
    messages and tombstones skipped): the verifier's inner loop, so plain tuples."""
    data = path.read_bytes()
    unpack, hdr_len = _HEAD.unpack_from, _HDR_LEN.unpack_from
    head, end, at = _HEAD.size, len(data), 0
    while at < end:
        if end - at < head + _CHECKSUM:
            break  # a record the server had not finished writing: the end of what is stored
        rl, seq, _ts, slen = unpack(data, at)
        length = rl & ~_HAS_HEADERS
        if length < head + slen + _CHECKSUM:
            raise FileStoreError(f"{path}: no record at offset {at} (a compressed or encrypted store?)")
        if at + length > end:
            break  # torn tail
        pos = at + head
        subject = data[pos : pos + slen]
        pos += slen
        header = b""
        if rl & _HAS_HEADERS:
            (hlen,) = hdr_len(data, pos)
            pos += 4
            header = data[pos : pos + hlen]
            pos += hlen
        body = data[pos : at + length - _CHECKSUM]
        at += length
        if not seq & (_ERASED | _TOMBSTONE):
            yield seq & _SEQ_MASK, subject, header, body


def read_block(path: Path) -> Iterator[StoredMessage]:
    """The messages of one block, in order."""
    for position, subject, header, body in records(path):
        yield StoredMessage(position, subject, header, body)


def messages(stream: Path) -> Iterator[StoredMessage]:
    for block in blocks(stream):
        yield from read_block(block)
