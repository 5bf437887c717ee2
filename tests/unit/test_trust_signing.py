"""Signatures on events and the check of who may append what (stratus.eventstore.signing), on
headers built as the recorder builds them; no server needed. The same checks against a real
server, the projector and ``stratus audit verify`` are tests/integration/test_trust_signing.py."""

from __future__ import annotations

import pytest

from commands.host import host_aggregate_id
from processes.trust import appends, refuses
from stratus.eventstore import chain
from stratus.eventstore.envelope import APPEND_ID
from stratus.eventstore.signing import (
    EXCLUSIONS_ID,
    SIGNATURE,
    SIGNER,
    InOrder,
    LoadCheck,
    Signer,
    UntrustedEvent,
    Verdict,
    Verifier,
    exclusions,
    matches,
    snapshot_refusal,
)
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


def event(
    topic: str, originator: str, body: bytes = b'{"user_id":"u","role_id":"admin"}', append: str = ""
) -> dict[str, str]:
    headers = {
        "ce-id": f"{originator}:2",
        "ce-topic": topic,
        "ce-subject": originator,
        "ce-actoruser": "the-real-admin",
        chain.CHAIN_PREV: chain.GENESIS,
    }
    if append:
        headers[APPEND_ID] = append
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


def test_a_retired_key_verifies_what_it_signed_before_its_retirement_only() -> None:
    """Retired from position 6 on (the log's head was 5 when it was rotated): an event it signed at
    5 verifies, one at 6 or later (a stolen key used after the rotation) is refused."""
    r = registry().retiring("api", 6)
    assert r.current("api") is None and r.by_key(API.public_key) is not None
    assert Verifier(r).check(signed(API), BODY, 5).verdict is Verdict.SIGNED
    late = Verifier(r).check(signed(API), BODY, 6)
    assert late.verdict is Verdict.REFUSED and "retired at position 6" in late.reason
    again = Registry.from_json(r.to_json()).retiring("api", 9)  # a second rotation keeps the first's
    assert again.by_key(API.public_key) == r.by_key(API.public_key)
    assert Verifier(again).check(signed(API), BODY, 7).verdict is Verdict.REFUSED


C2 = KeyPair.generate()
SERVER = "0b7c1c57-54d6-4c8e-9a47-2f7e9a3b1c11"
SCHEDULER = KeyPair.generate()


def two_hosts() -> Registry:
    return registry(signed_from=None).with_identities(
        [
            Identity("host:compute-2", "host", C2.public_key, appends("host", ["compute-2"]), ("compute-2",)),
            Identity("scheduler", "scheduler", SCHEDULER.public_key, appends("scheduler")),
        ]
    )


def verdicts(check: InOrder, log: list[tuple[KeyPair, str, str, bytes, str]]) -> list[int]:
    """The positions ``check`` refuses in ``log``: (signer, topic, originator, body, append id)."""
    refused = []
    for position, (key, topic, originator, body, append) in enumerate(log, start=1):
        headers = event(topic, originator, body, append)
        Signer(key).sign(headers)
        if check.check(headers, body, position).verdict is Verdict.REFUSED:
            refused.append(position)
    return refused


def test_a_hosts_usage_network_and_group_events_are_held_to_where_the_server_is() -> None:
    """A project's usage, a network's address, a group's member: each names its server, and a host's
    key may append them only for a server on its host (or moving to or from it); events that name no
    server (a usage epoch opened) are held to their subject only."""
    project, network, group = (str(host_aggregate_id(n)) for n in ("p", "n", "g"))
    charged = b'{"instance_id":"%s","cores":1,"ram":512}' % SERVER.encode()
    log = [
        (SCHEDULER, "commands.instance:Instance.Scheduled", SERVER, b'{"host":"compute-1"}', "a1"),
        (HOST, "commands.usage:ProjectUsage.InstanceCharged", project, charged, "a2"),
        (C2, "commands.usage:ProjectUsage.InstanceCharged", project, charged, "a3"),  # 3: not its server
        (
            C2,
            "commands.network:Network.AddressReleased",
            network,
            b'{"instance_id":"%s"}' % SERVER.encode(),
            "a4",
        ),
        (
            C2,
            "commands.server_group:ServerGroup.MemberRemoved",
            group,
            b'{"instance_id":"%s"}' % SERVER.encode(),
            "a5",
        ),
        (C2, "commands.usage:ProjectUsage.BooksClosed", project, b'{"next_epoch":2}', "a6"),  # names none
        (
            HOST,
            "commands.network:Network.AddressReleased",
            network,
            b'{"instance_id":"%s"}' % SERVER.encode(),
            "a7",
        ),
    ]
    assert verdicts(InOrder(Verifier(two_hosts())), log) == [3, 4, 5]


def test_a_moves_return_on_another_host_is_held_to_the_move() -> None:
    """compute-2 may release a claim on compute-1 (``host.*.instancereleased``, ``migrationreleased``
    by the move's id) only while the server moves between them; compute-1's own host is its own."""
    c1 = str(host_aggregate_id("compute-1"))
    server = b'{"instance_id":"%s"}' % SERVER.encode()
    log = [
        (SCHEDULER, "commands.instance:Instance.Scheduled", SERVER, b'{"host":"compute-1"}', "a1"),
        (C2, "commands.host:Host.InstanceReleased", c1, server, "a2"),  # 2: no move yet
        (
            SCHEDULER,
            "commands.instance:Instance.MigrationScheduled",
            SERVER,
            b'{"migration_id":"m1","source":"compute-1","dest":"compute-2"}',
            "a3",
        ),
        (C2, "commands.host:Host.InstanceReleased", c1, server, "a4"),
        (C2, "commands.host:Host.MigrationReleased", c1, b'{"migration_id":"m1"}', "a5"),
        (C2, "commands.host:Host.MigrationReleased", c1, b'{"migration_id":"m2"}', "a6"),  # 6: no such move
        (
            SCHEDULER,
            "commands.instance:Instance.ResizeConfirmed",
            SERVER,
            b'{"migration_id":"m1","source":"compute-1"}',
            "a7",
        ),
        (C2, "commands.host:Host.InstanceReleased", c1, server, "a8"),  # 8: the move is over
        (HOST, "commands.host:Host.InstanceReleased", c1, server, "a9"),  # its own host: subject only
    ]
    assert verdicts(InOrder(Verifier(two_hosts())), log) == [2, 6, 8]


def test_the_events_appended_with_the_one_that_moves_a_server_are_judged_by_where_it_was() -> None:
    """The shelve's offload and the host's release of the usage are one append: the release is
    compute-1's though ``Offloaded`` took the server off it; a later append of compute-1's is not."""
    project = str(host_aggregate_id("p"))
    release = b'{"instance_id":"%s"}' % SERVER.encode()
    log = [
        (SCHEDULER, "commands.instance:Instance.Scheduled", SERVER, b'{"host":"compute-1"}', "a1"),
        (HOST, "commands.instance:Instance.Offloaded", SERVER, b'{"host":"compute-1"}', "a2"),
        (HOST, "commands.usage:ProjectUsage.ResourcesReleased", project, release, "a2"),
        (HOST, "commands.usage:ProjectUsage.ResourcesReleased", project, release, "a4"),  # 4: off it
    ]
    assert verdicts(InOrder(Verifier(two_hosts())), log) == [4]


def loaded(
    log: list[tuple[KeyPair, str, bytes]], start: int = 1
) -> list[tuple[int, int, dict[str, str], bytes]]:
    """A server's events as a load reads them (version = position here)."""
    out = []
    for version, (key, type_, body) in enumerate(log, start=start):
        headers = event(f"commands.instance:Instance.{type_}", SERVER, body, f"a{version}")
        Signer(key).sign(headers)
        out.append((version, version, headers, body))
    return out


def test_a_load_refuses_a_history_holding_another_hosts_event_and_keeps_each_servers_place() -> None:
    history = loaded([(SCHEDULER, "Scheduled", b'{"host":"compute-1"}'), (HOST, "Spawned", b"{}")])
    check = LoadCheck(Verifier(two_hosts()))
    assert check.check(SERVER, history)
    assert check.check(SERVER, loaded([(HOST, "ActionFinished", b"{}")], start=3))  # the place is kept
    forged = loaded([(C2, "Deleted", b"{}")], start=4)
    with pytest.raises(UntrustedEvent, match=r"refused at position 4: host:compute-2 .* it is on compute-1"):
        check.check(SERVER, forged)
    fresh = LoadCheck(Verifier(two_hosts()))
    assert not fresh.check(SERVER, forged)  # its place is not known here: check its whole history
    with pytest.raises(UntrustedEvent):
        fresh.check(SERVER, [*history, *loaded([(HOST, "ActionFinished", b"{}")], start=3), *forged])


def at(
    log: list[tuple[KeyPair, str, str, bytes, str]], start: int = 1
) -> list[tuple[int, int, dict[str, str], bytes]]:
    """Events as a load reads them: (signer, topic, originator, body, append id), version = position."""
    out = []
    for position, (key, topic, originator, body, append) in enumerate(log, start=start):
        headers = event(topic, originator, body, append)
        Signer(key).sign(headers)
        out.append((position, position, headers, body))
    return out


def test_a_load_holds_a_hosts_usage_events_to_where_the_server_was_from_its_own_history() -> None:
    """A worker's load of a project's usage (one aggregate): a host's event naming a server is held
    to where that server was at the event's position, folded from the server's own history (read
    once per server, again only for a later event); the release appended with the ``Offloaded``
    that took the server off its host is its host's."""
    project = str(host_aggregate_id("p"))
    charged = b'{"instance_id":"%s","cores":1,"ram":512}' % SERVER.encode()
    server = at(
        [
            (SCHEDULER, "commands.instance:Instance.Scheduled", SERVER, b'{"host":"compute-1"}', "a1"),
            (HOST, "commands.instance:Instance.Offloaded", SERVER, b'{"host":"compute-1"}', "a5"),
        ],
        start=1,
    )
    server[1] = (2, 5, *server[1][2:])  # the server's second event is at position 5
    reads: list[str] = []

    def history(server_id: str) -> list[tuple[int, int, dict[str, str], bytes]]:
        reads.append(server_id)
        return server if server_id == SERVER else []

    usage = [
        (API, "commands.usage:ProjectUsage.Opened", project, b"{}", "a0"),
        (SCHEDULER, "commands.usage:ProjectUsage.InstanceCharged", project, charged, "a2"),
        (HOST, "commands.usage:ProjectUsage.InstanceCharged", project, charged, "a3"),
    ]
    check = LoadCheck(Verifier(two_hosts()), history=history)
    assert check.check(project, at(usage[:2]))  # positions 1 and 2: no host's event, no read
    assert check.check(project, at([usage[2]], start=3))
    with pytest.raises(UntrustedEvent, match=r"refused at position 4: host:compute-2 .* it is on compute-1"):
        check.check(project, at([(C2, *usage[2][1:])], start=4))
    release = b'{"instance_id":"%s"}' % SERVER.encode()
    released = (HOST, "commands.usage:ProjectUsage.ResourcesReleased", project, release, "a5")
    assert check.check(project, at([released], start=6))  # the offload's append: compute-1's
    with pytest.raises(UntrustedEvent, match=r"position 7: .* it is on no host"):
        check.check(project, at([(*released[:4], "a7")], start=7))
    assert check.check(project, at([usage[2]], start=3))  # an earlier position: no read
    assert reads == [SERVER] * 4  # for positions 3, 4, 6 and 7: each after the last read's


def test_a_refusal_from_a_servers_history_is_made_only_on_the_leaders_answer() -> None:
    """A replica behind may answer a server's history without its latest events (its
    ``Scheduled``): a host's event for its own server would then look forged. The refusal is made
    only if the history the leader answers refuses it too; the leader is asked only then."""
    project = str(host_aggregate_id("p"))
    charged = b'{"instance_id":"%s","cores":1,"ram":512}' % SERVER.encode()
    scheduled = at(
        [(SCHEDULER, "commands.instance:Instance.Scheduled", SERVER, b'{"host":"compute-1"}', "a1")]
    )
    asked: list[str] = []

    def leader(server_id: str) -> list[tuple[int, int, dict[str, str], bytes]]:
        asked.append(server_id)
        return scheduled

    check = LoadCheck(Verifier(two_hosts()), history=lambda _server: [], confirm=leader)
    charge = (HOST, "commands.usage:ProjectUsage.InstanceCharged", project, charged, "a2")
    assert check.check(project, at([charge], start=2))  # the stale read said: on no host
    assert asked == [SERVER]
    with pytest.raises(UntrustedEvent, match="it is on compute-1"):
        check.check(project, at([(C2, *charge[1:])], start=3))
    assert asked == [SERVER, SERVER]


ADMIN = KeyPair.generate()


def test_the_operators_exclusion_makes_a_load_fold_a_refused_event_as_nothing() -> None:
    """A forged ``Deleted`` the operator excluded (an ``admin``'s ``EventExcluded`` naming its
    position) no longer stops a load: it is reported as excluded and places nothing; an exclusion
    signed by another identity counts for nothing, and an aggregate's first event cannot be excluded."""
    trusted = two_hosts().with_identities([Identity("admin", "admin", ADMIN.public_key, appends("admin"))])
    verifier = Verifier(trusted)
    excluded_at = b'{"position":3,"event_id":"e","aggregate_id":"%s","reason":"r"}' % SERVER.encode()
    record = "commands.exclusions:Exclusions.EventExcluded"
    by_api, by_admin = (
        at([(key, record, str(EXCLUSIONS_ID), excluded_at, "x")], start=9) for key in (API, ADMIN)
    )
    assert exclusions(verifier, [(p, h, b) for _, p, h, b in by_api]) == frozenset()
    positions = exclusions(verifier, [(p, h, b) for _, p, h, b in by_admin])
    assert positions == {3}
    history = loaded(
        [(SCHEDULER, "Scheduled", b'{"host":"compute-1"}'), (HOST, "Spawned", b"{}"), (C2, "Deleted", b"{}")]
    )
    with pytest.raises(UntrustedEvent) as refused:
        LoadCheck(verifier, excluded=frozenset).check(SERVER, history)
    assert refused.value.position == 3
    met: set[int] = set()
    check = LoadCheck(verifier, excluded=lambda: positions)
    assert check.check(SERVER, history, met) and met == {3}
    assert check.check(SERVER, loaded([(HOST, "ActionFinished", b"{}")], start=4))  # still on compute-1
    first = loaded([(C2, "Deleted", b"{}")])
    with pytest.raises(UntrustedEvent):
        LoadCheck(verifier, excluded=lambda: frozenset({1})).check(SERVER, first)


def test_a_snapshot_is_trusted_only_signed_by_who_may_write_it() -> None:
    """The API's snapshot of a server is used; an unsigned one, a retired key's, one whose content is
    not what was signed, and a host's of anything but its own host's aggregates are not."""
    verifier = Verifier(two_hosts())
    digest = "ab" * 32

    def snapshot(key: KeyPair) -> dict[str, str]:
        headers: dict[str, str] = {}
        Signer(key).sign_snapshot(digest, headers)
        return headers

    own_host = str(host_aggregate_id("compute-1"))
    assert snapshot_refusal(verifier, snapshot(API), digest, "instance", SERVER) == ""
    assert snapshot_refusal(verifier, snapshot(HOST), digest, "host", own_host) == ""
    assert "unsigned" in snapshot_refusal(verifier, {}, digest, "instance", SERVER)
    assert "does not verify" in snapshot_refusal(verifier, snapshot(API), "cd" * 32, "instance", SERVER)
    assert "may not write a snapshot of instance" in snapshot_refusal(
        verifier, snapshot(HOST), digest, "instance", SERVER
    )
    assert "may not write" in snapshot_refusal(verifier, snapshot(C2), digest, "host", own_host)
    retired = Verifier(two_hosts().retiring("api", 3))
    assert "retired" in snapshot_refusal(retired, snapshot(API), digest, "instance", SERVER)


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
