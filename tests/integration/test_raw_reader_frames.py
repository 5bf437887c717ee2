"""The raw reader's frames (header block and body alone, what a replay reads) are its messages' blocks
and bodies, batch after batch, from any start up to any stop; a read left early keeps the protocol in
step for the next one."""

from __future__ import annotations

from commands.app import Stratus
from stratus.audit.rawreader import RawReader, position_of
from stratus.config import Settings
from tests.fixtures.projections import head, populate


def test_frames_are_the_messages_blocks_and_bodies_from_any_start_to_any_stop(
    app: Stratus, settings: Settings
) -> None:
    populate(app, instances=6, hosts=2, chunk=6)
    total = head(app)
    subjects = f"{settings.subject_prefix}.>"
    with RawReader(settings.nats_urls, settings.stream) as reader:
        messages = list(reader.messages(subjects, batch=7))  # batches short of the log: asked again
        frames = list(reader.frames(subjects, batch=7))
        assert [m.position for m in messages] == list(range(1, total + 1))
        # (each reply's own headers, Nats-Num-Pending and the like, depend on the request: same here)
        assert [(m.header_block, m.body) for m in messages] == frames
        assert all(m.subject.startswith(f"{settings.subject_prefix}.") for m in messages)
        for start, stop in ((5, 12), (5, 14), (1, 7), (total - 2, total + 5), (9, 8)):
            some = list(reader.frames(subjects, start, stop, batch=7))
            assert [position_of(block) for block, _ in some] == list(range(start, min(stop, total) + 1))
            assert [m.position for m in reader.messages(subjects, start, stop, batch=7)] == [
                position_of(block) for block, _ in some
            ]
        early = reader.frames(subjects, batch=7)
        assert position_of(next(early)[0]) == 1
        early.close()  # the next batch was already asked for: read, so the next read starts clean
        rest = [(position_of(block), body) for block, body in reader.frames(subjects, 3, batch=500)]
        assert rest == [(position_of(block), body) for block, body in frames[2:]]
        assert reader.last_position(subjects) == total


def test_two_readers_of_one_identity_read_their_own_replies(app: Stratus, settings: Settings) -> None:
    """Replies go to a subject of the reader's connection: every subscriber of a subject receives
    what is sent to it, and two readers with the same credentials (here none) read at once."""
    populate(app, instances=3, hosts=1, chunk=3)
    total = head(app)
    subjects = f"{settings.subject_prefix}.>"
    with (
        RawReader(settings.nats_urls, settings.stream) as one,
        RawReader(settings.nats_urls, settings.stream) as two,
    ):
        first = one.frames(subjects, batch=2)
        second = two.frames(subjects, 3, batch=2)
        got = [(position_of(next(first)[0]), position_of(next(second)[0])) for _ in range(3)]
        assert got == [(1, 3), (2, 4), (3, 5)]
        assert [position_of(b) for b, _ in first] == list(range(4, total + 1))
        assert [position_of(b) for b, _ in second] == list(range(6, total + 1))
