"""Read models whose rows never need reading before they are written: each event becomes SQL.

Identity, images, key pairs, metadata definitions and the operator-facing tables are kept this way:
a creation inserts a row, every later event overwrites the fields it carries or merges a JSON value.
Each of those modules declares a table ``APPLY`` from event class to a pure function of the event
and its log position that returns the statements (no I/O, no raising); the batch's view runs them in
order after the batch's row writes (``projections.readmodels``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from psycopg.types.json import Jsonb

from stratus.serialization import dumps

Statement = tuple[str, tuple[Any, ...]]  # SQL with ``{s}`` for the schema, and its parameters
# (event, log position) -> the statements it makes; the event's class is the key it is filed under.
Statements = Callable[[Any, int], list[Statement]]


def jsonb(value: Any) -> Jsonb:
    """``value`` as a jsonb parameter, serialised as the log serialises it (orjson)."""
    return Jsonb(value, dumps=lambda obj: dumps(obj).decode())
