"""Progress of long CLI work: a bar redrawn in place on a terminal, plain lines now and then
elsewhere (processes/progress.py)."""

from __future__ import annotations

import io

from processes.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_on_a_terminal_one_line_is_redrawn_with_a_bar() -> None:
    out, clock = io.StringIO(), Clock()
    p = Progress("rebuild", out=out, tty=True, clock=clock)
    for done in range(0, 1001, 100):
        clock.now += 0.5
        p.update(done, 1000)
    p.finish()
    text = out.getvalue()
    assert text.startswith("\rrebuild: [") and text.endswith("\n") and text.count("\n") == 1
    last = text.rsplit("\r", 1)[1]
    assert "[" + "#" * 30 + "] 1,000/1,000 events (100%)" in last and "events/s" in last


def test_elsewhere_plain_lines_every_few_seconds_and_one_at_the_end() -> None:
    out, clock = io.StringIO(), Clock()
    p = Progress("stratus audit verify", out=out, tty=False, clock=clock)
    for done in range(1, 101):
        clock.now += 0.1  # 10 s in all: a line at the start, at 5 s, at 10 s
        p.update(done * 10, 1000)
    p.finish()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and 3 <= len(lines) <= 4
    assert lines[-1].startswith("stratus audit verify: 1,000/1,000 events (100%), ")


def test_counted_passes_the_items_through_and_counts_them_without_a_total() -> None:
    out = io.StringIO()
    p = Progress("stratus audit export", out=out, tty=False, clock=Clock())
    assert list(p.counted(iter("abc"))) == ["a", "b", "c"]
    assert out.getvalue().splitlines()[-1].startswith("stratus audit export: 3 events, ")
