"""Tamper evidence against the real JetStream: chained hashes written at append time, the verifier
proving an untouched log and naming the first event of an altered one, and export/import keeping the
chain. Tampering is done the way an attacker with access to NATS would: a copy of the stream
republished through raw JetStream with one message changed, removed or rewritten."""

from __future__ import annotations

from collections.abc import Callable
from uuid import uuid4

import orjson
import pytest

from stratus.audit import export, verify
from stratus.audit.rawreader import RawMessage, RawReader
from stratus.config import Settings
from stratus.eventstore import JetStreamApplicationRecorder, NatsBridge, chain
from tests.fixtures.audit import RENAMED, ev, fill
from tests.fixtures.nats import unique_settings

Make = Callable[..., JetStreamApplicationRecorder]


def raw_messages(s: Settings) -> list[RawMessage]:
    with RawReader(s.nats_urls, s.stream) as r:
        return list(r.messages(f"{s.subject_prefix}.>"))


def copy_stream(
    make_recorder: Make,
    bridge: NatsBridge,
    source: Settings,
    edit: Callable[[int, dict[str, str], bytes], tuple[dict[str, str], bytes] | None],
) -> Settings:
    """Republish ``source``'s messages into a fresh stream with raw JetStream, through ``edit``
    (which may change headers and body, or return None to drop the message)."""
    target = unique_settings(source.nats_urls[0])
    make_recorder(target)
    cut = len(source.subject_prefix) + 1

    async def publish(items: list[tuple[str, dict[str, str], bytes]]) -> None:
        for subject, headers, body in items:
            await bridge.js.publish(subject, body, headers=headers)

    items = []
    for m in raw_messages(source):
        headers = export._headers(m.header_block)
        headers.pop("Nats-Msg-Id", None)
        edited = edit(m.position, headers, m.body)
        if edited is not None:
            items.append((f"{target.subject_prefix}.{m.subject[cut:]}", *edited))
    bridge.run(lambda: publish(items), 10)
    return target


def run_verify(s: Settings, **kw: object) -> verify.Report:
    return verify.verify(s.nats_urls, s.stream, s.subject_prefix, **kw)  # type: ignore[arg-type]


def test_every_event_is_chained_to_its_aggregates_previous_event(
    recorder: JetStreamApplicationRecorder, settings: Settings
) -> None:
    ids = fill(recorder)
    msgs = raw_messages(settings)
    assert [m.position for m in msgs] == list(range(1, 10))
    last: dict[bytes, str] = {}
    for m in msgs:
        pairs = dict(chain.parse_header_block(m.header_block))
        agg = pairs[b"ce-subject"]
        assert pairs[b"stratus-chain-prev"].decode() == last.get(agg, chain.GENESIS)
        # the writer's hash is the hash of what NATS stored (values as stored, body as stored)
        stored = pairs[b"stratus-chain-hash"].decode()
        assert chain.event_hash_of_pairs(list(pairs.items()), m.body) == stored
        last[agg] = stored
    assert {k.decode() for k in last} == {str(i) for i in ids}


def test_a_writer_with_a_stale_head_still_chains_to_the_real_last_event(
    make_recorder: Make, settings: Settings
) -> None:
    first = make_recorder(settings)
    second = make_recorder(settings)  # same stream, its own head cache
    a = uuid4()
    first.append([ev(a, 1)])
    second.select_events(a)  # second's head: version 1
    first.append([ev(a, 2, RENAMED)])  # second's head is now stale
    second.append([ev(a, 3, RENAMED)])  # refused once by the server, retried on the real head
    report = run_verify(settings)
    assert report.ok, report.first_break
    assert report.checked == 3


def test_the_verifier_proves_an_untouched_log(
    recorder: JetStreamApplicationRecorder, settings: Settings
) -> None:
    fill(recorder)
    report = run_verify(settings)
    assert report.ok and report.first_break is None
    assert (report.checked, report.last_position) == (9, 9)
    # the global chain is deterministic: the same log gives the same anchor
    again = run_verify(settings, anchors={9: report.global_hash, 4: run_verify(settings, upto=4).global_hash})
    assert again.ok and again.anchors_checked == [4, 9]


def test_an_untouched_copy_verifies(
    make_recorder: Make, bridge: NatsBridge, recorder: JetStreamApplicationRecorder, settings: Settings
) -> None:
    fill(recorder)
    copy = copy_stream(make_recorder, bridge, settings, lambda p, h, b: (h, b))
    assert run_verify(copy).ok
    assert run_verify(copy).global_hash == run_verify(settings).global_hash


def test_an_altered_body_is_caught_at_that_event(
    make_recorder: Make, bridge: NatsBridge, recorder: JetStreamApplicationRecorder, settings: Settings
) -> None:
    fill(recorder)

    def edit(p: int, h: dict[str, str], b: bytes) -> tuple[dict[str, str], bytes]:
        return (h, b.replace(b'"b3"', b'"bX"')) if p == 6 else (h, b)

    report = run_verify(copy_stream(make_recorder, bridge, settings, edit))
    assert not report.ok and report.first_break is not None
    assert report.first_break.position == 6
    assert "altered" in report.first_break.reason
    assert report.checked == 5


def test_an_altered_actor_header_is_caught(
    make_recorder: Make, bridge: NatsBridge, recorder: JetStreamApplicationRecorder, settings: Settings
) -> None:
    fill(recorder)

    def edit(p: int, h: dict[str, str], b: bytes) -> tuple[dict[str, str], bytes]:
        return ({**h, "ce-actoruser": "mallory"}, b) if p == 2 else (h, b)

    report = run_verify(copy_stream(make_recorder, bridge, settings, edit))
    assert report.first_break is not None and report.first_break.position == 2


def test_a_consistently_rehashed_edit_breaks_the_aggregates_chain_at_its_next_event(
    make_recorder: Make, bridge: NatsBridge, recorder: JetStreamApplicationRecorder, settings: Settings
) -> None:
    fill(recorder)  # a: positions 1, 3, 7, 9

    def edit(p: int, h: dict[str, str], b: bytes) -> tuple[dict[str, str], bytes]:
        if p != 3:
            return h, b
        b = b.replace(b'"a2"', b'"evil"')
        h = {k: v for k, v in h.items() if k != chain.CHAIN_HASH}
        return {**h, chain.CHAIN_HASH: chain.event_hash(h, b)}, b

    report = run_verify(copy_stream(make_recorder, bridge, settings, edit))
    assert report.first_break is not None
    assert report.first_break.position == 7
    assert "chain of its aggregate is broken" in report.first_break.reason


def test_a_removed_event_is_caught(
    make_recorder: Make, bridge: NatsBridge, recorder: JetStreamApplicationRecorder, settings: Settings
) -> None:
    fill(recorder)  # b: positions 2, 5, 6
    copy = copy_stream(make_recorder, bridge, settings, lambda p, h, b: None if p == 5 else (h, b))
    report = run_verify(copy)
    # the copy renumbers, so position 5 is now b's third event, whose predecessor is gone
    assert report.first_break is not None and report.first_break.position == 5


def test_a_rewritten_tail_is_caught_by_an_anchor(
    make_recorder: Make, bridge: NatsBridge, recorder: JetStreamApplicationRecorder, settings: Settings
) -> None:
    fill(recorder)
    anchor = run_verify(settings).global_hash
    # the last event dropped: every chain still holds, but the anchor at 9 names a missing position
    truncated = copy_stream(make_recorder, bridge, settings, lambda p, h, b: None if p == 9 else (h, b))
    assert run_verify(truncated).ok
    report = run_verify(truncated, anchors={9: anchor})
    assert (
        not report.ok
        and report.first_break is not None
        and "removed from the end" in report.first_break.reason
    )

    def rehash_last(p: int, h: dict[str, str], b: bytes) -> tuple[dict[str, str], bytes]:
        if p != 9:
            return h, b
        b = b.replace(b'"a4"', b'"evil"')
        h = {k: v for k, v in h.items() if k != chain.CHAIN_HASH}
        return {**h, chain.CHAIN_HASH: chain.event_hash(h, b)}, b

    rewritten = copy_stream(make_recorder, bridge, settings, rehash_last)
    assert run_verify(rewritten).ok  # consistent on its own ...
    report = run_verify(rewritten, anchors={9: anchor})  # ... but not what the auditor saw
    assert report.first_break is not None and report.first_break.position == 9


def test_export_import_round_trip_keeps_positions_and_the_chain(
    make_recorder: Make, bridge: NatsBridge, recorder: JetStreamApplicationRecorder, settings: Settings
) -> None:
    ids = fill(recorder)
    lines = list(export.export_lines(settings.nats_urls, settings.stream, settings.subject_prefix))
    assert len(lines) == 9
    first = orjson.loads(lines[0])
    assert first["position"] == 1 and chain.CHAIN_HASH in first["headers"]
    target = unique_settings(settings.nats_urls[0])
    make_recorder(target)
    n = export.import_events(bridge, target.stream, target.subject_prefix, export.read_lines(lines))
    assert n == 9
    assert run_verify(target).global_hash == run_verify(settings).global_hash
    again = list(export.export_lines(target.nats_urls, target.stream, target.subject_prefix))
    assert again == lines
    # one aggregate's export holds its events only, with their original positions
    only_b = [
        orjson.loads(x)
        for x in export.export_lines(
            settings.nats_urls, settings.stream, settings.subject_prefix, aggregate_id=str(ids[1])
        )
    ]
    assert [x["position"] for x in only_b] == [2, 5, 6]
    # importing twice is refused: the target is not empty
    with pytest.raises(export.ImportRefused, match="must be empty"):
        export.import_events(bridge, target.stream, target.subject_prefix, export.read_lines(lines))


def test_import_refuses_a_tampered_export(
    make_recorder: Make, bridge: NatsBridge, recorder: JetStreamApplicationRecorder, settings: Settings
) -> None:
    fill(recorder)
    lines = list(export.export_lines(settings.nats_urls, settings.stream, settings.subject_prefix))
    line = orjson.loads(lines[3])
    assert '"name":"c' in line["body"]
    line["body"] = line["body"].replace('"name":"c', '"name":"X')
    lines[3] = orjson.dumps(line) + b"\n"
    target = unique_settings(settings.nats_urls[0])
    make_recorder(target)
    with pytest.raises(export.ImportRefused, match="position 4"):
        export.import_events(bridge, target.stream, target.subject_prefix, export.read_lines(lines))
