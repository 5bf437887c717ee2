"""Signatures on events and the check of who may append what (stratus.eventstore.signing), on
headers built as the recorder builds them; no server needed. The same checks against a real
server, the projector and ``stratus audit verify`` are tests/integration/test_trust_signing.py."""

from __future__ import annotations

import pytest

from commands.host import host_aggregate_id
from processes.trust import appends, refuses
from stratus.eventstore import chain
from stratus.eventstore.signing import SIGNATURE, SIGNER, InOrder, Signer, Verdict, Verifier, matches
from stratus.trust.nkeys import InvalidKey, KeyPair
from stratus.trust.registry import Identity, Registry

GRANT = "commands.identity:Project.RoleGranted"
CLAIM = "commands.host:Host.InstanceClaimed"
API, HOST, OTHER = KeyPair.generate(), KeyPair.generate(), KeyPair.generate()


def registry(signed_from: int | None = 1) -> Registry:
    return Registry(
        (
            Identity("api", "api", API.public_key, appends("api")),
            Identity(
                "host:compute-1",
                "host",
                HOST.public_key,
                appends("host", ["compute-1"]),
                ("compute-1",),
                refuses=refuses("host"),
            ),
        ),
        signed_from,
    )


def event(topic: str, originator: str, body: bytes = b'{"user_id":"u","role_id":"admin"}') -> dict[str, str]:
    headers = {
        "ce-id": f"{originator}:2",
        "ce-topic": topic,
        "ce-subject": originator,
        "ce-actoruser": "the-real-admin",
        chain.CHAIN_PREV: chain.GENESIS,
    }
    headers[chain.CHAIN_HASH] = chain.event_hash(headers, body)
    return headers


BODY = b'{"user_id":"u","role_id":"admin"}'
PROJECT = "7d0c6f1e-2a5b-4c3d-8e9f-0a1b2c3d4e5f"


def signed(key: KeyPair, topic: str = GRANT, originator: str = PROJECT) -> dict[str, str]:
    headers = event(topic, originator)
    Signer(key).sign(headers)
    return headers


def test_an_event_signed_by_an_identity_that_may_append_it_is_trusted() -> None:
    c = Verifier(registry()).check(signed(API), BODY, 5)
    assert c.verdict is Verdict.SIGNED and c.identity is not None and c.identity.name == "api"


def test_the_signature_headers_are_outside_the_chain_hash() -> None:
    headers = signed(API)
    assert chain.event_hash(headers, BODY) == headers[chain.CHAIN_HASH]


def test_a_forged_role_grant_is_refused_unsigned_or_signed_by_a_host() -> None:
    verifier = Verifier(registry())
    unsigned = verifier.check(event(GRANT, PROJECT), BODY, 5)
    by_host = verifier.check(signed(HOST), BODY, 5)
    assert unsigned.verdict is Verdict.REFUSED and "unsigned" in unsigned.reason
    assert (
        by_host.verdict is Verdict.REFUSED
        and "host:compute-1 (host) may not append project." in by_host.reason
    )


def test_a_host_signs_for_its_own_host_only() -> None:
    verifier = Verifier(registry())
    own = verifier.check(signed(HOST, CLAIM, str(host_aggregate_id("compute-1"))), BODY, 5)
    other = verifier.check(signed(HOST, CLAIM, str(host_aggregate_id("compute-2"))), BODY, 5)
    assert own.verdict is Verdict.SIGNED
    assert other.verdict is Verdict.REFUSED and "may not append host." in other.reason


def test_a_host_key_appends_only_the_events_of_servers_on_its_host_or_moving_to_or_from_it() -> None:
    """``InOrder`` folds where each server is (Scheduled, a move's events) from the log's own events:
    a resize from compute-1 to compute-2, then confirmed."""
    c2 = KeyPair.generate()
    both = registry(signed_from=None).with_identities(
        [Identity("host:compute-2", "host", c2.public_key, appends("host", ["compute-2"]), ("compute-2",))]
    )
    check = InOrder(Verifier(both))
    server = "0b7c1c57-54d6-4c8e-9a47-2f7e9a3b1c11"
    log: list[tuple[KeyPair | None, str, bytes]] = [
        (HOST, "Spawned", b"{}"),  # 1: not placed yet
        (None, "Scheduled", b'{"host":"compute-1"}'),
        (HOST, "Spawned", b"{}"),
        (c2, "ActionFinished", b"{}"),  # 4: not compute-2's
        (None, "MigrationScheduled", b'{"source":"compute-1","dest":"compute-2"}'),
        (HOST, "MigratedFromSource", b'{"dest":"compute-2"}'),
        (c2, "MigrationFinished", b'{"dest":"compute-2"}'),
        (None, "ResizeConfirmed", b'{"source":"compute-1"}'),
        (HOST, "ActionFinished", b"{}"),  # 9: compute-1 let it go
        (c2, "ActionFinished", b"{}"),
    ]
    verdicts = []
    for position, (key, type_, body) in enumerate(log, start=1):
        headers = event(f"commands.instance:Instance.{type_}", server, body)
        if key is not None:
            Signer(key).sign(headers)
        verdicts.append(check.check(headers, body, position).verdict)
    refused = [p for p, v in enumerate(verdicts, start=1) if v is Verdict.REFUSED]
    assert refused == [1, 4, 9]
    again = event("commands.instance:Instance.ActionFinished", server, b"{}")
    Signer(c2).sign(again)
    assert check.check(again, b"{}", 4).verdict is Verdict.REFUSED  # a position read again: as it was


def test_a_host_key_may_not_place_or_request_even_its_own_servers() -> None:
    """Placing is the scheduler's, requests the API's: a host's key on them is refused outright."""
    verifier = Verifier(registry())
    server = "0b7c1c57-54d6-4c8e-9a47-2f7e9a3b1c11"
    scheduled = verifier.check(signed(HOST, "commands.instance:Instance.Scheduled", server), BODY, 5)
    spawned = verifier.check(signed(HOST, "commands.instance:Instance.Spawned", server), BODY, 5)
    assert scheduled.verdict is Verdict.REFUSED and "may not append instance." in scheduled.reason
    assert spawned.verdict is Verdict.SIGNED


def test_altered_content_a_swapped_key_and_an_unknown_key_are_refused() -> None:
    verifier = Verifier(registry())
    altered = verifier.check(signed(API), BODY.replace(b"admin", b"reader"), 5)
    swapped = signed(OTHER)
    swapped[SIGNER] = API.public_key  # another key's signature under the API's key id
    unknown = verifier.check(signed(OTHER), BODY, 5)
    assert altered.verdict is Verdict.REFUSED and "chain hash" in altered.reason
    assert verifier.check(swapped, BODY, 5).verdict is Verdict.REFUSED
    assert unknown.verdict is Verdict.REFUSED and "does not know" in unknown.reason
    garbled = signed(API)
    garbled[SIGNATURE] = "not-base64!"
    assert verifier.check(garbled, BODY, 5).verdict is Verdict.REFUSED


def test_unsigned_events_are_trusted_only_before_the_cut_over() -> None:
    headers = event(GRANT, PROJECT)
    assert Verifier(registry(signed_from=None)).check(headers, BODY, 5).verdict is Verdict.UNSIGNED
    assert Verifier(registry(signed_from=6)).check(headers, BODY, 5).verdict is Verdict.UNSIGNED
    assert Verifier(registry(signed_from=5)).check(headers, BODY, 5).verdict is Verdict.REFUSED


def test_a_retired_key_still_verifies_what_it_signed() -> None:
    r = registry().retiring("api")
    assert r.current("api") is None and r.by_key(API.public_key) is not None
    assert Verifier(r).check(signed(API), BODY, 5).verdict is Verdict.SIGNED


def test_nkeys_round_trip_and_reject_a_bad_checksum() -> None:
    key = KeyPair.generate()
    assert key.seed.startswith("SU") and key.public_key.startswith("U") and len(key.public_key) == 56
    assert KeyPair.from_seed(key.seed).public_key == key.public_key
    # a character in the middle (the last one's low bits are base32 padding, which decoding drops)
    broken = key.seed[:20] + ("A" if key.seed[20] != "A" else "B") + key.seed[21:]
    with pytest.raises(InvalidKey):
        KeyPair.from_seed(broken)


@pytest.mark.parametrize(
    ("pattern", "subject", "expected"),
    [
        (">", "project.p.rolegranted", True),
        ("host.h1.>", "host.h1.instanceclaimed", True),
        ("host.h1.>", "host.h2.instanceclaimed", False),
        ("host.*.instancereleased", "host.h2.instancereleased", True),
        ("host.*.instancereleased", "host.h2.instanceclaimed", False),
        ("instance.>", "instance", False),
        ("a.b", "a.b.c", False),
    ],
)
def test_subject_patterns_match_as_nats_does(pattern: str, subject: str, expected: bool) -> None:
    assert matches(pattern, subject) is expected
