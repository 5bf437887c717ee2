"""Progress of long CLI work (``stratus rebuild``, ``stratus audit verify|export|import``).

On a terminal, one line redrawn in place: a bar (when the total is known), the count, the rate.
Elsewhere (a pipe, a log file, systemd), a plain line now and then, so that a log shows the work
moving without a line per event. Written to standard error: standard output is the work's own
(an export's events, a report). Small enough not to need a dependency.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TypeVar

T = TypeVar("T")
_WIDTH = 30


class Progress:
    """``update(done, total)`` as the work goes, ``finish()`` at its end."""

    def __init__(
        self,
        label: str,
        unit: str = "events",
        *,
        out: IO[str] | None = None,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        every: float | None = None,
    ) -> None:
        self._label = label
        self._unit = unit
        self._out = out if out is not None else sys.stderr
        self._tty = self._out.isatty() if tty is None else tty
        self._clock = clock
        # a terminal is redrawn often; a log gets a line every few seconds
        self._every = every if every is not None else (0.1 if self._tty else 5.0)
        self._started = clock()
        self._shown_at: float | None = None
        self._done = 0
        self._total: int | None = None
        self._drawn = False

    def update(self, done: int, total: int | None = None) -> None:
        self._done = done
        if total is not None:
            self._total = total
        now = self._clock()
        if self._shown_at is None or now - self._shown_at >= self._every:
            self._shown_at = now
            self._show(now)

    def finish(self) -> None:
        """Show where the work ended (and end the terminal's line)."""
        self._show(self._clock())
        if self._tty and self._drawn:
            self._out.write("\n")
            self._out.flush()

    def counted(self, items: Iterable[T], total: int | None = None) -> Iterator[T]:
        """``items``, counting each as one done."""
        n = 0
        try:
            for item in items:
                yield item
                n += 1
                self.update(n, total)
        finally:
            self.finish()

    def _show(self, now: float) -> None:
        elapsed = max(now - self._started, 1e-9)
        rate = f"{self._done / elapsed:,.0f} {self._unit}/s"
        total = self._total
        if total:
            share = min(1.0, self._done / total)
            count = f"{self._done:,}/{total:,} {self._unit} ({share:.0%})"
        else:
            share, count = 0.0, f"{self._done:,} {self._unit}"
        if self._tty:
            bar = f"[{'#' * int(share * _WIDTH):<{_WIDTH}}] " if total else ""
            self._out.write(f"\r{self._label}: {bar}{count}, {rate}\x1b[K")
            self._drawn = True
        else:
            self._out.write(f"{self._label}: {count}, {rate}\n")
        self._out.flush()
