"""Every request schema in schemas/api refuses a NUL and a body nested too deep, without a server."""

from __future__ import annotations

from pathlib import Path

import pytest

import schemas
from api.body import MAX_DEPTH, load_validators, read_json
from api.errors import BadRequest

API_SCHEMAS = Path(schemas.__file__).parent / "api"


class _Stream:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self, n: int) -> bytes:
        return self._data[:n]


@pytest.mark.parametrize("name", sorted(p.stem for p in API_SCHEMAS.glob("*.json")))
def test_every_request_schema_refuses_nul_and_deep_nesting(name: str) -> None:
    """Whatever a schema says, a body that reaches it has no NUL anywhere and is at most MAX_DEPTH deep."""
    validator = load_validators((name,))[name]

    class Body:
        content_type = "application/json"

        def __init__(self, doc: str) -> None:
            self.content_length = len(doc)
            self.bounded_stream = _Stream(doc.encode())

    deep = "[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2)
    for doc in ('{"a": {"b": ["x\\u0000"]}}', '{"a\\u0000": 1}', deep):
        with pytest.raises(BadRequest):
            read_json(Body(doc), validator, 1 << 20)  # type: ignore[arg-type]
