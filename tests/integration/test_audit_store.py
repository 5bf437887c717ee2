"""Verifying a copy of the store with no server in the path (``stratus audit verify --store``):
the same verdicts and the same anchor as the online verifier on an untouched log, and the first
altered event named when the store's files were edited behind Stratus's back."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from stratus.audit import verify
from stratus.audit.filestore import FileStoreError, blocks, read_block, stream_dir
from stratus.config import Settings
from stratus.eventstore import JetStreamApplicationRecorder, NatsBridge, chain
from stratus.natsserver import NatsServer
from tests.fixtures.audit import fill
from tests.fixtures.nats import unique_settings
from tests.fixtures.processes import ROOT


@pytest.fixture
def stored(own_nats_server: NatsServer, tmp_path: Path) -> Iterator[tuple[Settings, Path, verify.Report]]:
    """A chained log of 9 events, the online verifier's report, and a copy of the stopped store."""
    s = unique_settings(own_nats_server.url)
    with NatsBridge(s.nats_urls, name="store-test").start() as bridge:
        recorder = JetStreamApplicationRecorder.from_settings(bridge, s)
        recorder.ensure_stream()
        fill(recorder)
    online = verify.verify(s.nats_urls, s.stream, s.subject_prefix)
    own_nats_server.stop()  # a store as a backup holds it: nothing in flight
    copy = tmp_path / "copy"
    shutil.copytree(own_nats_server.store_dir, copy)
    yield s, copy, online


def _edit(store: Path, s: Settings, old: bytes, new: bytes) -> None:
    """Change bytes inside a block file (same length: the records' framing stays valid)."""
    assert len(old) == len(new)
    for block in blocks(stream_dir(store, s.stream)):
        data = block.read_bytes()
        if old in data:
            block.write_bytes(data.replace(old, new, 1))
            return
    raise AssertionError(f"{old!r} is not in the store")


def test_an_untouched_store_verifies_with_the_online_anchor(
    stored: tuple[Settings, Path, verify.Report],
) -> None:
    s, copy, online = stored
    assert online.ok and online.checked == 9
    for processes in (1, 2):
        report = verify.verify_store(copy, s.stream, s.subject_prefix, processes=processes)
        assert report.ok, report.first_break
        assert (report.checked, report.last_position, report.global_hash) == (9, 9, online.global_hash)
    anchored = verify.verify_store(copy, s.stream, s.subject_prefix, anchors={9: online.global_hash})
    assert anchored.ok and anchored.anchors_checked == [9]
    positions = [m.position for b in blocks(stream_dir(copy, s.stream)) for m in read_block(b)]
    assert positions == list(range(1, 10))


def test_an_edited_body_in_the_files_is_named(stored: tuple[Settings, Path, verify.Report]) -> None:
    s, copy, _ = stored
    _edit(copy, s, b'"name":"b2"', b'"name":"XX"')  # the 5th event (b's second)
    report = verify.verify_store(copy, s.stream, s.subject_prefix)
    assert not report.ok and report.first_break is not None
    assert report.first_break.position == 5 and "does not match its hash" in report.first_break.reason
    assert report.last_position == 4


def test_an_edited_header_in_the_files_is_named(stored: tuple[Settings, Path, verify.Report]) -> None:
    s, copy, _ = stored
    block = blocks(stream_dir(copy, s.stream))[0]
    data = block.read_bytes()
    # event 4's actor (its headers come before its body in the record)
    at = data.rindex(b"ce-actoruser: ", 0, data.index(b'"name":"c')) + len(b"ce-actoruser: ")
    block.write_bytes(data[:at] + b"m" + data[at + 1 :])
    report = verify.verify_store(copy, s.stream, s.subject_prefix)
    assert report.first_break is not None and report.first_break.position == 4


def test_an_anchor_beyond_the_stored_end_says_events_were_removed(
    stored: tuple[Settings, Path, verify.Report],
) -> None:
    s, copy, online = stored
    report = verify.verify_store(copy, s.stream, s.subject_prefix, anchors={12: online.global_hash})
    assert report.first_break is not None and "removed from the end" in report.first_break.reason


def test_what_is_not_a_store_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileStoreError, match="no stream"):
        stream_dir(tmp_path, "NOPE")


def test_the_cli_verifies_a_store_copy(stored: tuple[Settings, Path, verify.Report]) -> None:
    s, copy, online = stored
    env = {k: v for k, v in os.environ.items() if not k.startswith("STRATUS_")}
    env.update(STRATUS_STREAM=s.stream, STRATUS_SUBJECT_PREFIX=s.subject_prefix)
    stratus = [sys.executable, "-m", "processes.cli", "audit", "verify", "--store", str(copy)]
    done = subprocess.run(stratus, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "OK: 9 events" in done.stdout and f"anchor: 9:{online.global_hash}" in done.stdout
    _edit(copy, s, b'"name":"a3"', b'"name":"zz"')
    done = subprocess.run(stratus, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "BROKEN at position 7" in done.stdout, done.stdout + done.stderr


def _record(position: int, subject: bytes, headers: list[str], body: bytes) -> bytes:
    """One message record as nats-server's file store writes it (checksum zeroed: not read)."""
    block = ("NATS/1.0\r\n" + "".join(f"{h}\r\n" for h in headers) + "\r\n").encode()
    length = 22 + len(subject) + 4 + len(block) + len(body) + 8
    head = struct.pack("<IQqH", length | (1 << 31), position, 0, len(subject))
    return head + subject + struct.pack("<I", len(block)) + block + body + b"\0" * 8


def test_the_fast_block_digest_agrees_with_the_exact_one_on_odd_headers(tmp_path: Path) -> None:
    """How a header line is spelled (no space after the colon, trailing blanks, names in capitals)
    never changes a verdict: the fast path hands anything it does not vouch for to the exact one."""
    agg = "0d3c1f5e-1111-4222-8333-944455556666"
    body = b'{"name":"vm"}'

    def headers(**extra: str) -> dict[str, str]:
        return {"ce-id": f"{agg}:1", "ce-subject": agg, "Stratus-Chain-Prev": chain.GENESIS, **extra}

    good = headers()
    good_hash = chain.event_hash(good, body)
    spelled = [
        [f"{k}: {v}" for k, v in good.items()] + [f"Stratus-Chain-Hash: {good_hash}"],  # as NATS writes
        [f"{k}:{v}" for k, v in good.items()] + [f"Stratus-Chain-Hash:{good_hash}"],  # no space
        [f"{k.upper()}: {v}  " for k, v in good.items()] + [f"Stratus-Chain-Hash: {good_hash}"],  # blanks
        [f"{k}: {v}" for k, v in headers(**{"ce-actoruser": "eve"}).items()]
        + [f"Stratus-Chain-Hash: {good_hash}"],  # an added header: altered
    ]
    path = tmp_path / "1.blk"
    path.write_bytes(b"".join(_record(i + 1, b"p.x", h, body) for i, h in enumerate(spelled)))
    fast = verify._digest_block(str(path), b"p.", 1 << 62)
    exact = [verify.digest(m.position, m.header_block, m.body) for m in read_block(path)]
    assert fast == exact
    assert [d[5] for d in fast] == [True, True, True, False]


def _split(store: Path, s: Settings, after: int) -> None:
    """Cut the stream's one block into two files after ``after`` records (as the server rolls blocks)."""
    (block,) = blocks(stream_dir(store, s.stream))
    data = block.read_bytes()
    at = 0
    for _ in range(after):
        at += struct.unpack_from("<I", data, at)[0] & ~(1 << 31)
    block.write_bytes(data[:at])
    (block.parent / "2.blk").write_bytes(data[at:])


def test_links_across_blocks_are_checked(stored: tuple[Settings, Path, verify.Report]) -> None:
    s, copy, online = stored
    _split(copy, s, after=4)  # positions 1-4 | 5-9: a, b and c each have events on both sides
    report = verify.verify_store(copy, s.stream, s.subject_prefix, processes=2)
    assert report.ok and report.global_hash == online.global_hash and report.checked == 9

    # a's second event (position 3, first block) rewritten and rehashed consistently: its own hash
    # holds, so the break is a's next event (position 7), in the other block
    (first, _) = blocks(stream_dir(copy, s.stream))
    data = first.read_bytes()
    at = data.index(b'"name":"a2"')
    start = data.rindex(b"NATS/1.0\r\n", 0, at)
    header = data[start : data.index(b"\r\n\r\n", start) + 4]
    pairs = [p for p in chain.parse_header_block(header) if p[0] != b"stratus-chain-hash"]
    old_hash = dict(chain.parse_header_block(header))[b"stratus-chain-hash"]
    body_end = data.index(b"}", at) + 1
    header_end = start + len(header)
    new_body = data[header_end:body_end].replace(b'"a2"', b'"zz"')
    new_hash = chain.event_hash_of_pairs(pairs, new_body).encode()
    data = data[:header_end] + new_body + data[body_end:]
    first.write_bytes(data.replace(old_hash, new_hash, 1))
    report = verify.verify_store(copy, s.stream, s.subject_prefix, processes=2)
    assert report.first_break is not None and report.first_break.position == 7, report.first_break
    assert "chain of its aggregate is broken" in report.first_break.reason
    assert report.last_position == 6


def test_a_gap_between_blocks_is_named(stored: tuple[Settings, Path, verify.Report]) -> None:
    s, copy, _ = stored
    _split(copy, s, after=4)
    second = blocks(stream_dir(copy, s.stream))[1]
    data = second.read_bytes()
    second.write_bytes(data[struct.unpack_from("<I", data, 0)[0] & ~(1 << 31) :])  # position 5 removed
    report = verify.verify_store(copy, s.stream, s.subject_prefix)
    assert report.first_break is not None and report.first_break.position == 5
    assert "missing" in report.first_break.reason
