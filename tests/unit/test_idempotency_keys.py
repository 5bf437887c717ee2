"""Idempotency keys on the in-memory log: the claim travels in the command's own atomic append, a
second request with the key cannot act, and a replay returns the claimed result without acting."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent

from api.identity.tokens import TokenSigner
from commands import idempotency
from commands.app import Stratus
from commands.bus import MessageBus, bootstrap
from commands.flavor import Flavor, flavor_aggregate_id
from commands.flavors.create import CreateFlavor
from commands.idempotency import IdempotencyKey, Keyed, KeyInUse, key_id
from commands.images.create import CreateImage
from commands.keystone.projects import CreateProject
from commands.unit_of_work import Result
from stratus.eventstore.memory import InMemoryFactory, InMemoryRecorder

FINGERPRINT = "f" * 64


class Appends(InMemoryRecorder):
    """The log, remembering the topics of each atomic append."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        self.batches.append([e.topic for e in stored_events])
        return super().insert_events(stored_events, **kwargs)


@pytest.fixture
def log() -> Appends:
    return Appends()


def process(log: InMemoryRecorder) -> MessageBus:
    """One process's bus on ``log`` (its own application and aggregate cache)."""
    return bootstrap(Stratus(InMemoryFactory(recorder=log)))


def flavor(flavorid: str) -> CreateFlavor:
    return CreateFlavor(flavorid, f"m1.{flavorid}", vcpus=1, ram=512, disk=1)


def record(bus: MessageBus, key: str = "k1") -> IdempotencyKey:
    agg: object = bus.app.repository.get(key_id("p1", key))
    assert isinstance(agg, IdempotencyKey)
    return agg


def test_the_claim_is_appended_with_the_first_effect_atomically(log: Appends) -> None:
    bus = process(log)
    with idempotency.keyed(Keyed("p1", "k1", FINGERPRINT)) as request:
        result = bus.handle(flavor("small"))
    assert request is not None and request.claimed
    (batch,) = log.batches
    assert batch[0].endswith("IdempotencyKey.Claimed")  # first: the position returned is the flavor's
    assert any(t.endswith("Flavor.Created") for t in batch[1:])
    claimed = record(bus)
    assert (claimed.fingerprint, claimed.command, claimed.target) == (FINGERPRINT, "CreateFlavor", "small")
    assert claimed.answer is None
    assert result.id == "small"


def test_a_second_request_with_the_key_cannot_act_even_in_another_process(log: Appends) -> None:
    with idempotency.keyed(Keyed("p1", "k1", FINGERPRINT)):
        process(log).handle(flavor("small"))
    other = process(log)
    with idempotency.keyed(Keyed("p1", "k1", FINGERPRINT)), pytest.raises(KeyInUse):
        other.handle(flavor("large"))
    assert other.app.repository.get(flavor_aggregate_id("small"))
    assert flavor_aggregate_id("large") not in other.app.repository  # refused with the claim, atomically


def test_keys_of_two_scopes_do_not_meet(log: Appends) -> None:
    bus = process(log)
    with idempotency.keyed(Keyed("p1", "k1", FINGERPRINT)):
        bus.handle(flavor("small"))
    with idempotency.keyed(Keyed("p2", "k1", FINGERPRINT)):
        bus.handle(flavor("large"))
    assert isinstance(bus.app.repository.get(flavor_aggregate_id("large")), Flavor)


def test_a_replay_returns_the_claimed_result_without_acting(log: Appends) -> None:
    bus = process(log)
    with idempotency.keyed(Keyed("p1", "k1", FINGERPRINT, replay=Result("small", 7))):
        assert bus.handle(flavor("other")) == Result("small", 7)
    assert log.batches == []


def test_the_claim_of_a_create_names_the_id_drawn_for_it(log: Appends) -> None:
    bus = process(log)
    with idempotency.keyed(Keyed("p1", "k1", FINGERPRINT)):
        result = bus.handle(CreateProject("demo"))
    assert record(bus).target == result.id


def test_without_a_key_nothing_is_claimed(log: Appends) -> None:
    process(log).handle(flavor("small"))
    assert not any(t.endswith("IdempotencyKey.Claimed") for batch in log.batches for t in batch)


def test_the_claim_names_a_chosen_id_rather_than_the_first_field(log: Appends) -> None:
    bus = process(log)
    chosen = "0d6f4d2c-7c3b-4f7e-9b3a-2f7d1c7a9e10"
    with idempotency.keyed(Keyed("p1", "k1", FINGERPRINT)):
        result = bus.handle(CreateImage("p1", "cirros", image_id=chosen))
    assert record(bus).target == result.id == chosen


def test_fingerprints_are_keyed_agree_across_nodes_and_survive_a_key_rotation() -> None:
    old, new = b"o" * 32, b"n" * 32
    body = b'{"user": {"name": "u", "password": "hunter2"}}'
    (digest,) = TokenSigner(old).digests("idempotency-fingerprint", body)
    assert TokenSigner(old).digests("idempotency-fingerprint", body) == [digest]  # another API node
    assert digest != hashlib.sha256(body).hexdigest()  # no plain digest to confirm a guess with
    assert TokenSigner(old).digests("other-purpose", body) != [digest]
    rotated = TokenSigner([new, old]).digests("idempotency-fingerprint", body)
    assert rotated[0] != digest and digest in rotated
