"""Each part's aggregate cache is a setting that its composition root passes to the application, and
it bounds what the process keeps in memory (the scheduler grew by ~60 MiB with 10,000 servers when
every process kept up to 20,000 aggregates: docs/performance.md, "Memory")."""

from __future__ import annotations

from uuid import UUID

import pytest

from commands.app import Stratus
from commands.instance import Instance
from commands.usage import EPOCH_EVENTS, usage_aggregate_id
from stratus.config import Settings
from stratus.eventstore.memory import InMemoryFactory
from tests.fixtures.commands import requested
from tests.fixtures.facades.handlers import CreateFlavor, CreateServer, Handlers
from tests.fixtures.facades.operations import Operations
from tests.fixtures.roots import APPLICATIONS, Application


def servers(app: Stratus, n: int) -> list[UUID]:
    """``n`` requested servers on the app's log."""
    flavor = {"id": "1", "name": "m1.tiny", "vcpus": 1, "ram": 512, "disk": 1, "ephemeral": 0, "swap": 0}
    made = [requested(f"vm-{i}", "p", flavor) for i in range(n)]
    app.save(*made)
    return [inst.id for inst in made]


def kept(app: Stratus) -> set[UUID]:
    """The ids in the app's aggregate cache."""
    cache = app.repository.cache
    return set() if cache is None else set(cache.cache)


@pytest.mark.parametrize(("part", "application", "variable"), APPLICATIONS, ids=[r[0] for r in APPLICATIONS])
def test_a_part_keeps_at_most_its_setting(
    part: str, application: Application, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # eventsourcing's own variable in the process environment does not size it: the setting does
    monkeypatch.setenv("AGGREGATE_CACHE_MAXSIZE", "20000")
    app = application(InMemoryFactory(), Settings.from_env({variable: "3"}))
    ids = servers(app, 10)
    for server_id in ids:
        app.repository.get(server_id)
    assert kept(app) == set(ids[-3:]), part  # the three used last
    assert isinstance(app.repository.get(ids[0]), Instance)  # one no longer kept is loaded again


@pytest.mark.parametrize(("part", "application", "variable"), APPLICATIONS, ids=[r[0] for r in APPLICATIONS])
def test_zero_keeps_nothing(part: str, application: Application, variable: str) -> None:
    app = application(InMemoryFactory(), Settings.from_env({variable: "0"}))
    ids = servers(app, 3)
    assert [app.repository.get(i).id for i in ids] == ids, part
    assert app.repository.cache is None


def test_each_part_has_its_own_default() -> None:
    s = Settings()
    defaults = (s.api_aggregate_cache, s.scheduler_aggregate_cache, s.hypervisor_aggregate_cache)
    assert defaults == (1000, 1000, 500)
    one = Settings.from_env({"STRATUS_SCHEDULER_AGGREGATE_CACHE": "7"})
    assert (one.api_aggregate_cache, one.scheduler_aggregate_cache, one.hypervisor_aggregate_cache) == (
        1000,
        7,
        500,
    )
    assert Settings.from_env(one.to_env()) == one


def test_a_bad_value_names_its_variable() -> None:
    with pytest.raises(ValueError, match="STRATUS_API_AGGREGATE_CACHE must not be negative"):
        Settings.from_env({"STRATUS_API_AGGREGATE_CACHE": "-1"})
    with pytest.raises(ValueError, match="STRATUS_HYPERVISOR_AGGREGATE_CACHE must be a whole number"):
        Settings.from_env({"STRATUS_HYPERVISOR_AGGREGATE_CACHE": "lots"})
    with pytest.raises(ValueError, match="aggregate cache"):
        Stratus(InMemoryFactory(), cache_size=-1)


def test_a_closed_usage_epoch_leaves_the_cache() -> None:
    # Every epoch of a project's usage holds each of its servers' holdings: the closed ones stayed
    # cached (a project's whole usage once per 64 creates: ~90 MiB in the API after 8,000 creates).
    app = Stratus(InMemoryFactory(), cache_size=1000)
    handlers = Handlers(app)
    handlers.create_flavor(CreateFlavor(flavorid="small", name="small", vcpus=1, ram=512, disk=1))
    Operations(app).set_quota("p", {"instances": -1, "cores": -1, "ram": -1}, {})
    for i in range(3 * EPOCH_EVENTS + 1):
        handlers.create_server(CreateServer(f"vm-{i}", "p", "u", "small"))
    epochs = {usage_aggregate_id("p", e): e for e in range(5)}
    assert [epochs[i] for i in kept(app) if i in epochs] == [3]  # the current one alone
