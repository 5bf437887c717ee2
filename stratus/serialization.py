"""One JSON policy for the whole system: orjson, for HTTP bodies and event payloads alike.

``OrjsonTranscoder`` is eventsourcing's transcoder for our events. Event attributes are plain JSON
types by design (ids are strings, sizes are ints), so an event's payload on the log is ordinary
JSON any integrator can read without knowing Python. The only non-JSON attribute an eventsourcing
event carries is its ``timestamp``, written as RFC 3339 and read back as an aware datetime.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import orjson
from eventsourcing.persistence import Transcoder

_OPTIONS = orjson.OPT_UTC_Z | orjson.OPT_NON_STR_KEYS


def _default(obj: Any) -> Any:
    if isinstance(obj, UUID):
        return str(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable in an event")


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj, default=_default, option=_OPTIONS)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    return orjson.loads(data)


class OrjsonTranscoder(Transcoder):
    """eventsourcing's transcoder on orjson: events as plain JSON, timestamps as RFC 3339."""

    def encode(self, obj: Any) -> bytes:
        return dumps(obj)

    def decode(self, data: bytes) -> Any:
        state = orjson.loads(data)
        ts = state.get("timestamp") if isinstance(state, dict) else None
        if isinstance(ts, str):
            state["timestamp"] = datetime.fromisoformat(ts.replace("Z", "+00:00"))
        return state
