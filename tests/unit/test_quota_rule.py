"""The quota rule of the domain, and the usage's copy."""

from __future__ import annotations

import copy

import pytest

from commands.errors import QuotaExceeded
from commands.quota import DEFAULT_LIMITS
from commands.usage import ProjectUsage


def test_the_domain_rule() -> None:
    usage = ProjectUsage.open("p1")
    usage.charge(["a", "b"], 2, 100, {"instances": 3, "cores": 4, "ram": -1})
    with pytest.raises(QuotaExceeded) as over:
        usage.charge(["c", "d"], 1, 1, {"instances": 3, "cores": 4, "ram": -1})
    assert (
        over.value.message
        == "Quota exceeded for cores, instances: Requested 2, but already used 2 of 3 instances"
    )
    usage.charge(["a"], 2, 100, {"instances": 0, "cores": 0, "ram": 0})  # charged already: nothing to check
    assert usage.release_resources("a") and not usage.release_resources("a")
    assert usage.used() == {"instances": 2, "cores": 2, "ram": 100}
    assert usage.release("a") and not usage.release("a") and not usage.release_resources("zzz")
    usage.charge([str(i) for i in range(100)], 10**6, 10**6, {"instances": -1, "cores": -1, "ram": -1})


def test_a_copy_of_the_usage_shares_nothing_it_changes() -> None:
    """Commands decide on copies of the cached usage; copying shares the holdings (every change
    replaces them), so a decision on the copy leaves the original as it was, and vice versa."""
    usage = ProjectUsage.open("p1")
    usage.charge(["a", "b"], 1, 512, DEFAULT_LIMITS)
    usage.collect_events()
    copied = copy.deepcopy(usage)
    assert copied.holdings is usage.holdings  # shared until one of them changes

    copied.charge(["c"], 2, 1024, DEFAULT_LIMITS)
    copied.release("a")
    assert usage.used() == {"instances": 2, "cores": 2, "ram": 1024} and not usage.pending_events
    assert copied.used() == {"instances": 2, "cores": 3, "ram": 1536}
    assert [type(e).__name__ for e in copied.collect_events()] == ["InstanceCharged", "InstanceReleased"]
    usage.charge(["d"], 1, 512, DEFAULT_LIMITS)
    assert "d" not in copied.holdings and copied.version == usage.version + 1
    # once a copy owns its holdings, further changes go in place (a charge of k servers is not k copies)
    owned = copied.holdings
    copied.charge(["e", "f"], 1, 512, DEFAULT_LIMITS)
    copied.release_resources("b")
    assert copied.holdings is owned and "e" not in usage.holdings
    assert (
        copied.used()
        == {
            "instances": len(owned),
            "cores": sum(h["cores"] for h in owned.values()),
            "ram": sum(h["ram"] for h in owned.values()),
        }
        == {"instances": 4, "cores": 4, "ram": 2048}
    )
