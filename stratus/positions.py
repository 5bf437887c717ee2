"""Log positions and counts as clients write them: ASCII digits that fit a 64-bit integer.

Python's ``int()`` also takes other scripts' digits (``"١٢"``), underscores, signs and spaces, and
any magnitude; JetStream sequences and PostgreSQL's ``bigint`` take none of those. Every place that
reads a position, a marker or a limit from a request parses it here, so none of them can pass an
unstorable number on.
"""

from __future__ import annotations

import re

MAX = 2**63 - 1
_DIGITS = re.compile(r"[0-9]{1,19}")


def parse_natural(text: str) -> int:
    """``text`` (surrounding spaces allowed) as a non-negative integer of at most 63 bits; else ValueError."""
    text = text.strip()
    if not _DIGITS.fullmatch(text):
        raise ValueError(f"not a non-negative integer: {text[:32]!r}")
    value = int(text)
    if value > MAX:
        raise ValueError(f"{text} is beyond the largest position ({MAX})")
    return value
