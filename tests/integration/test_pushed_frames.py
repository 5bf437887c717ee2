"""A replay's push read (``RawReader.pushed``) hands back, for every message of a real log and from any
start, the frames one batch direct get from that start returns, byte for byte: an upcast event, an
id recorded as a string, a message without headers, odd subjects and headers included. It ends at the
log's head, leaves no consumer behind (read to the end or left early), keeps the connection's protocol
in step for the next read, and is refused cleanly where the server will not create a consumer: then
the replay (``RawLog``) reads by direct gets. As the deployment's parts, it reads with their rights."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from commands.app import Stratus
from processes import trust
from projections.rawlog import RawLog, replay_log
from stratus.audit.rawreader import ConsumerRefused, RawReader, position_of
from stratus.config import Settings
from stratus.eventstore import JetStreamApplicationRecorder, NatsBridge
from stratus.natsserver import NatsServer
from tests.fixtures.nats import unique_settings
from tests.fixtures.odd_events import flavor_with_a_str_id, requested_v4
from tests.fixtures.projections import head, populate
from tests.fixtures.trust import Trusted


def _publish(bridge: NatsBridge, messages: list[tuple[str, bytes, dict[str, str] | None]]) -> None:
    async def publish() -> None:
        for subject, body, headers in messages:
            await bridge.js.publish(subject, body, headers=headers)

    bridge.run(publish, 30)


def _consumers(bridge: NatsBridge, stream: str) -> list[Any]:
    return bridge.run(lambda: bridge.js.consumers_info(stream), 10)  # type: ignore[no-any-return]


def test_pushed_frames_are_one_batch_direct_gets_frames_from_any_start(
    app: Stratus, settings: Settings, bridge: NatsBridge
) -> None:
    populate(app, instances=6, hosts=2, chunk=6)
    app.recorder.insert_events([requested_v4(app), flavor_with_a_str_id(app)])
    prefix = settings.subject_prefix
    _publish(
        bridge,
        [
            (f"{prefix}.odd.no-headers", b"{}", None),
            (f"{prefix}.odd.ünï_cødé-$x", b"", {"ce-id": "x"}),
            (f"{prefix}.odd.padded", b"\x00\r\n", {" ce-topic ": " t ", "Nats-Sequence": "7", "X": ""}),
        ],
    )
    total = head(app)
    subjects = f"{prefix}.>"
    with RawReader(settings.nats_urls, settings.stream) as reader:
        for start in (1, 2, 7, total - 2, total, total + 1, total + 50):
            direct = list(reader.frames(subjects, start, batch=total + 1))  # one batch
            assert list(reader.pushed(subjects, start)) == direct
            assert [position_of(block) for block, _ in direct] == list(range(start, total + 1))
            assert _consumers(bridge, settings.stream) == []
        every = list(reader.pushed(subjects))
    assert len(every) == total
    # a published Nats-Sequence before the server's own (the last, which ``position_of`` reads)
    assert every[-1][0].startswith(b"NATS/1.0\r\nce-topic: t\r\nNats-Sequence: 7\r\nX: \r\nNats-Stream:")
    assert position_of(every[-1][0]) == total
    assert every[-3][0].startswith(b"NATS/1.0\r\nNats-Stream:")  # no headers published: direct get's own


def test_a_push_read_ends_at_the_head_and_a_read_left_early_leaves_no_consumer(
    app: Stratus, settings: Settings, bridge: NatsBridge
) -> None:
    populate(app, instances=4, hosts=1, chunk=4)
    total = head(app)
    subjects = f"{settings.subject_prefix}.>"
    with RawReader(settings.nats_urls, settings.stream) as reader:
        assert [position_of(b) for b, _ in reader.pushed(subjects)] == list(range(1, total + 1))
        _publish(bridge, [(f"{settings.subject_prefix}.a.b", b"{}", {"ce-id": str(n)}) for n in range(3)])
        more = total + 3
        assert [position_of(b) for b, _ in reader.pushed(subjects, total + 1)] == list(
            range(total + 1, more + 1)
        )
        early = reader.pushed(subjects, 3)
        assert position_of(next(early)[0]) == 3
        assert len(_consumers(bridge, settings.stream)) == 1
        early.close()
        assert _consumers(bridge, settings.stream) == []
        # the connection in step: a direct get read and a push read after it read what they should
        assert [position_of(b) for b, _ in reader.frames(subjects, 2, 4)] == [2, 3, 4]
        assert len(list(reader.pushed(subjects, 2))) == more - 1


def test_a_consumer_the_server_refuses_is_refused_cleanly_and_the_replay_reads_by_direct_gets(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conf = tmp_path / "nats.conf"
    conf.write_text(
        'authorization { users = [ { user: "reader", password: "pw", permissions: {'
        ' publish: { allow: [">"], deny: ["$JS.API.CONSUMER.CREATE.>"] }, subscribe: ">" } } ] }\n'
    )
    with NatsServer(store_dir=tmp_path / "nats", extra_args=("-c", str(conf))) as server:
        url = server.url.replace("nats://", "nats://reader:pw@", 1)
        settings = unique_settings(url)
        bridge = NatsBridge((url,), name="test-refused").start()
        try:
            log = JetStreamApplicationRecorder.from_settings(bridge, settings)
            log.ensure_stream()
            _publish(bridge, [(f"{settings.subject_prefix}.a.b", b"{}", {"ce-id": str(n)}) for n in range(5)])
            subjects = f"{settings.subject_prefix}.>"
            with RawReader((url,), settings.stream) as reader:
                with pytest.raises(ConsumerRefused):
                    next(reader.pushed(subjects))
                assert [position_of(b) for b, _ in reader.frames(subjects)] == [1, 2, 3, 4, 5]
            with caplog.at_level(logging.WARNING, "stratus.rebuild"), replay_log(log) as source:
                assert isinstance(source, RawLog)
                assert [int(m.headers["Nats-Sequence"]) for m in source.read_messages(2, 10)] == [2, 3, 4, 5]
            assert "reads by direct gets" in caplog.text and "Permissions Violation" in caplog.text
        finally:
            bridge.close()


@pytest.mark.parametrize("part", ["projector", "auditor", "admin"])
def test_a_part_reads_the_log_on_a_push_consumer_with_its_rights(trusted: Trusted, part: str) -> None:
    """The projector's catch-up and a rebuild read as their part; an auditor may not delete its
    consumer (left to expire when the read ends: ``inactive_threshold``), and reads all the same."""
    admin = trusted.bridge("admin")
    settings = trusted.settings
    JetStreamApplicationRecorder.from_settings(admin, settings).ensure_stream()
    _publish(admin, [(f"{settings.subject_prefix}.a.b", b"{}", {"ce-id": str(n)}) for n in range(7)])
    seed = trust.seed_file(trusted.directory, part)
    subjects = f"{settings.subject_prefix}.>"
    with RawReader(settings.nats_urls, settings.stream, seed_file=seed) as reader:
        assert list(reader.pushed(subjects, 2)) == list(reader.frames(subjects, 2))
        assert len(list(reader.pushed(subjects))) == 7
    left = _consumers(admin, settings.stream)
    assert len(left) == (2 if part == "auditor" else 0)
