"""Quotas that cannot race: concurrent creates against the real JetStream never pass a project's limit,
and the usage the read model shows equals the usage recomputed from the log.
"""

from __future__ import annotations

from typing import Any

import pytest

from commands.errors import QuotaExceeded
from commands.hosts.register import RegisterHost
from commands.keypairs.keys import generate_ssh_key
from commands.keypairs.manage import CreateKeyPair, DeleteKeyPair
from commands.quota import DEFAULT_LIMITS
from commands.servers.create import CreateServer
from commands.servers.delete import DeleteServer, FinishDeletion
from commands.servers.fields import SetServerMetadata
from commands.servers.groups import CreateServerGroup
from commands.servers.scheduling import PlaceInstance
from commands.servers.spawn import FailInstance
from commands.usage import EPOCH_EVENTS, usage_aggregate_id
from stratus.config import Settings
from tests.fixtures.commands import M1_BIG, M1_THREE, M1_TINY
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.operations import Operations
from tests.fixtures.facades.server_fields import ServerFieldHandlers
from tests.fixtures.quotas import assert_usage_consistent, race

pytestmark = pytest.mark.flavors(M1_TINY, M1_THREE, M1_BIG)


@pytest.mark.parametrize(
    ("flavor", "expected"), [("1", 10), ("3", 6), ("big", 2)], ids=["instances", "cores", "ram"]
)
def test_concurrent_creates_never_exceed_the_quota(
    handlers: Handlers, settings: Settings, database_url: str, flavor: str, expected: int
) -> None:
    """Defaults: 10 instances, 20 cores, 51200 MiB. 24 clients race; exactly the quota's worth succeeds."""
    results = race(settings, 24, lambda h, i: h.create_server(CreateServer(f"vm-{i}", "p1", "u1", flavor)))
    created = [r for r in results if not isinstance(r, Exception)]
    refused = [r for r in results if isinstance(r, QuotaExceeded)]
    assert len(created) + len(refused) == len(results), results
    assert len(created) == expected
    used = assert_usage_consistent(handlers, database_url, "p1")
    assert used["instances"] == expected
    resource = {"1": "instances", "3": "cores", "big": "ram"}[flavor]
    assert f"Quota exceeded for {resource}: Requested" in refused[0].message
    assert f"but already used {used[resource]} of {DEFAULT_LIMITS[resource]} {resource}" in refused[0].message


def test_racing_multi_creates_are_all_or_nothing(
    handlers: Handlers, settings: Settings, database_url: str
) -> None:
    """Requests for 4 servers each at a quota of 10 instances: two whole requests fit, never a part of one."""
    results = race(
        settings, 8, lambda h, i: h.create_server(CreateServer(f"vm-{i}", "p1", "u1", "1", count=4))
    )
    created = [r for r in results if not isinstance(r, Exception)]
    assert len(created) == 2 and all(len(r.ids) == 4 for r in created)
    assert all(isinstance(r, QuotaExceeded) for r in results if isinstance(r, Exception))
    assert assert_usage_consistent(handlers, database_url, "p1") == {"instances": 8, "cores": 8, "ram": 4096}


def test_deletes_and_faults_give_usage_back_while_creates_race(
    handlers: Handlers, settings: Settings, database_url: str
) -> None:
    handlers.register_host(RegisterHost("c1", vcpus=64, memory_mb=65536, disk_gb=100))
    first = [handlers.create_server(CreateServer(f"old-{i}", "p1", "u1", "3")).id for i in range(6)]
    assert handlers.usage("p1").used() == {"instances": 6, "cores": 18, "ram": 6144}
    with pytest.raises(QuotaExceeded, match="Requested 3, but already used 18 of 20 cores"):
        handlers.create_server(CreateServer("one-too-many", "p1", "u1", "3"))

    # A fault gives the cores and RAM back but the server still counts as an instance (Nova).
    handlers.place_instance(PlaceInstance(first[0], "c1"))
    handlers.fail_instance(FailInstance(first[0], "compute.spawn_failed", "no"))
    handlers.fail_instance(FailInstance(first[0], "compute.spawn_failed", "no"))  # a redelivery
    assert handlers.usage("p1").used() == {"instances": 6, "cores": 15, "ram": 5120}
    assert handlers.host("c1").claims == {}

    # Deletes (local ones, and one torn down on its host) race with creates of other clients.
    handlers.place_instance(PlaceInstance(first[1], "c1"))

    def act(h: Handlers, i: int) -> Any:
        if i in (2, 3):
            return h.delete_server(DeleteServer(first[i], "p1"))  # never placed: deleted at once
        if i == 1:
            return h.finish_deletion(FinishDeletion(first[1]))  # torn down on its host
        if i == 0:
            return h.delete_server(DeleteServer(first[0], "p1"))  # placed: waits for its host
        return h.create_server(CreateServer(f"new-{i}", "p1", "u1", "1"))

    results = race(settings, 12, act)
    assert all(isinstance(r, QuotaExceeded) for r in results if isinstance(r, Exception)), [
        repr(r) for r in results if isinstance(r, Exception)
    ]
    used = assert_usage_consistent(handlers, database_url, "p1")
    assert used["instances"] <= DEFAULT_LIMITS["instances"] and used["cores"] <= DEFAULT_LIMITS["cores"]
    created = sum(1 for r in results[4:] if not isinstance(r, Exception))
    assert used["instances"] == 6 - 3 + created  # first[1..3] are gone; first[0] awaits its host
    assert 4 <= created <= 7
    assert handlers.usage("p2").used() == {"instances": 0, "cores": 0, "ram": 0}  # other projects untouched


def test_an_idempotent_retry_is_charged_once(handlers: Handlers) -> None:
    cmd = CreateServer("vm", "p1", "u1", "1", idempotency_key="k1")
    assert handlers.create_server(cmd).id == handlers.create_server(cmd).id
    assert handlers.usage("p1").used() == {"instances": 1, "cores": 1, "ram": 512}


def test_usage_rolls_into_new_epochs_without_losing_the_race(
    handlers: Handlers, settings: Settings, database_url: str
) -> None:
    """A project's usage closes its books every EPOCH_EVENTS events; racing creates across the rollover
    still stop at the quota, and what was charged in an old epoch is released in the new one."""
    operations = Operations(handlers.app)
    operations.set_quota("p1", {"instances": 80, "cores": -1, "ram": -1}, {})
    old = handlers.create_server(CreateServer("old", "p1", "u1", "1", count=30)).ids
    for server_id in old[:28]:
        handlers.delete_server(DeleteServer(server_id, "p1"))
    assert handlers.usage("p1").epoch == 0 and handlers.usage("p1").version == 59
    operations.set_quota("p1", {"instances": 12}, {"instances": 2})

    results = race(settings, 20, lambda h, i: h.create_server(CreateServer(f"vm-{i}", "p1", "u1", "1")))
    created = [r for r in results if not isinstance(r, Exception)]
    assert len(created) == 10 and all(isinstance(r, QuotaExceeded) for r in results if r not in created)
    usage = handlers.usage("p1")
    assert usage.epoch == 1 and usage.version < EPOCH_EVENTS
    assert handlers.app.repository.get(usage_aggregate_id("p1", 0)).closed

    handlers.delete_server(DeleteServer(old[29], "p1"))  # charged in epoch 0, released in epoch 1
    assert assert_usage_consistent(handlers, database_url, "p1") == {
        "instances": 11,
        "cores": 11,
        "ram": 5632,
    }


def test_concurrent_key_pairs_never_exceed_the_users_quota(handlers: Handlers, settings: Settings) -> None:
    """A user's key pairs are counted in a ledger appended with each key pair: 8 clients racing for a
    limit of 3 get exactly 3; a deleted one frees its place."""
    Operations(handlers.app).set_quota("p1", {"key_pairs": 3}, {})
    results = race(
        settings,
        8,
        lambda h, i: h.bus.extended(generate_key=_fake_key).handle(CreateKeyPair("u1", f"k{i}", None, "p1")),
    )
    created = [i for i, r in enumerate(results) if not isinstance(r, Exception)]
    refused = [r for r in results if isinstance(r, Exception)]
    assert len(created) == 3, results
    assert all(isinstance(r, QuotaExceeded) and "Quota exceeded for key_pairs" in r.message for r in refused)
    catalog = handlers.bus.extended(generate_key=_fake_key)
    with pytest.raises(QuotaExceeded):
        catalog.handle(CreateKeyPair("u1", "one-more", None, "p1"))
    catalog.handle(DeleteKeyPair("u1", f"k{created[0]}"))
    catalog.handle(CreateKeyPair("u1", "one-more", None, "p1"))
    catalog.handle(CreateKeyPair("u2", "another-user", None, "p1"))  # the count is per user


def test_concurrent_server_groups_never_exceed_the_projects_quota(
    handlers: Handlers, settings: Settings
) -> None:
    """A project's server groups are counted in a ledger appended with each group: 6 clients racing
    for a limit of 2 get exactly 2, and every one reported created exists."""
    Operations(handlers.app).set_quota("p1", {"server_groups": 2}, {})
    results = race(
        settings,
        6,
        lambda h, i: Operations(h.app).create_server_group(CreateServerGroup(f"g{i}", "p1", "u", "affinity")),
    )
    created = [r for r in results if not isinstance(r, Exception)]
    assert len(created) == 2, results
    assert all(isinstance(r, QuotaExceeded) for r in results if isinstance(r, Exception))
    ops = Operations(handlers.app)
    assert all(ops.server_group(r.id, "p1").name.startswith("g") for r in created)
    ops.delete_server_group(created[0].id, "p1")
    ops.create_server_group(CreateServerGroup("again", "p1", "u1", "affinity"))


def test_metadata_items_follow_the_projects_quota(handlers: Handlers) -> None:
    Operations(handlers.app).set_quota("p1", {"metadata_items": 2}, {})
    with pytest.raises(QuotaExceeded, match="metadata_items: Requested 3, but the limit is 2"):
        handlers.create_server(CreateServer("vm", "p1", "u1", "1", metadata={"a": "1", "b": "2", "c": "3"}))
    server = handlers.create_server(CreateServer("vm", "p1", "u1", "1", metadata={"a": "1"})).id
    fields = ServerFieldHandlers(handlers)
    fields.set_metadata(SetServerMetadata(server, "p1", {"b": "2"}))
    with pytest.raises(QuotaExceeded, match="Requested 3, but the limit is 2"):
        fields.set_metadata(SetServerMetadata(server, "p1", {"c": "3"}))
    Operations(handlers.app).set_quota("p1", {"metadata_items": 3}, {})
    fields.set_metadata(SetServerMetadata(server, "p1", {"c": "3"}))


def _fake_key() -> tuple[str, str]:
    return generate_ssh_key()
