"""The subjects the JetStream recorder writes to: their layout, and tokens that round-trip any id."""

from __future__ import annotations

from uuid import UUID

import pytest

from stratus.eventstore import SubjectLayout, decode_token, encode_token


@pytest.mark.parametrize(
    "text",
    ["", "_", "abc-DEF-123", "host.compute-1", "a b*c>d", "é✓", "__5f", "x:y/z", "_2e", "-"],
)
def test_tokens_round_trip_and_are_valid_subject_tokens(text: str) -> None:
    token = encode_token(text)
    assert token and all(c.isascii() and (c.isalnum() or c in "_-") for c in token)
    assert decode_token(token) == text


TOPIC_CREATED = "commands.instance:Instance.Created"


def test_subject_layout() -> None:
    layout = SubjectLayout("stratus.ev")
    oid = UUID("0b5b3f4e-8a57-4a4e-9d6c-27c3b0b9e3a1")
    assert layout.subject(oid, TOPIC_CREATED) == f"stratus.ev.instance.{oid}.created"
    assert layout.subject("compute-1", "commands.host:Host.InstanceClaimed") == (
        "stratus.ev.host.compute-1.instanceclaimed"
    )
    # A topic that is not Outer.Inner keeps its whole (encoded) name under the kind "_".
    assert layout.subject("a.b", "mod:Thing") == "stratus.ev._.a_2eb.mod_3aThing"
    assert layout.aggregate_filter(oid) == f"stratus.ev.*.{oid}.*"
    assert layout.topic_filter(TOPIC_CREATED) == "stratus.ev.instance.*.created"
