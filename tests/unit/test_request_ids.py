"""The API's request ids (``api.app._new_request_id``): ``req-`` and a random UUID, version 4, as
Nova's (oslo.context's ``req-`` + ``uuid.uuid4()``) are written."""

from __future__ import annotations

import uuid

from api.app import _new_request_id


def test_a_request_id_is_req_and_a_random_version_4_uuid() -> None:
    ids = [_new_request_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for request_id in ids:
        assert request_id.startswith("req-")
        written = request_id.removeprefix("req-")
        parsed = uuid.UUID(written)
        assert (parsed.version, parsed.variant, str(parsed)) == (4, uuid.RFC_4122, written)
