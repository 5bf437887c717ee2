"""The scheduler's weighers and the traits a flavor's extra specs ask for, without a log."""

from __future__ import annotations

from commands.host import Host, Resources
from workers.filters import Request, run_filters, traits_of
from workers.weighers import Multipliers, weigh

FREE = {
    "a": Resources(vcpus=8, memory_mb=1024, disk_gb=100),
    "b": Resources(vcpus=2, memory_mb=4096, disk_gb=10),
    "c": Resources(vcpus=4, memory_mb=2048, disk_gb=50),
}


def test_weighers_spread_pack_and_ignore() -> None:
    assert weigh(FREE, Multipliers(ram=1, cpu=0, disk=0)) == ["b", "c", "a"]  # most free RAM first
    assert weigh(FREE, Multipliers(ram=-1, cpu=0, disk=0)) == ["a", "c", "b"]  # pack by RAM
    assert weigh(FREE, Multipliers(ram=0, cpu=1, disk=0)) == ["a", "c", "b"]
    assert weigh(FREE, Multipliers(ram=1, cpu=3, disk=0)) == ["a", "c", "b"]  # CPU weighs three times as much
    assert weigh(FREE, Multipliers(ram=0, cpu=0, disk=0)) == ["a", "b", "c"]  # all equal: by name
    assert weigh({}) == []
    env = {"STRATUS_RAM_WEIGHT_MULTIPLIER": "-2.5", "STRATUS_DISK_WEIGHT_MULTIPLIER": "0"}
    assert Multipliers.from_env(env) == Multipliers(ram=-2.5, cpu=1.0, disk=0.0)


def test_traits_from_extra_specs_and_filter_results() -> None:
    specs = {"trait:CUSTOM_SSD": "required", "trait:CUSTOM_SLOW": "forbidden", "hw:cpu_policy": "x"}
    assert traits_of(specs) == (frozenset({"CUSTOM_SSD"}), frozenset({"CUSTOM_SLOW"}))
    hosts = []
    for name, traits in (("h1", ["CUSTOM_SSD"]), ("h2", ["CUSTOM_SSD", "CUSTOM_SLOW"]), ("h3", [])):
        host = Host.register(name, 4, 4096, 40)
        host.set_traits(None, traits)
        hosts.append(host)
    need = Resources(1, 512, 1)
    out = run_filters(hosts, Request("i", need, required_traits=frozenset({"CUSTOM_SSD"}),
                                     forbidden_traits=frozenset({"CUSTOM_SLOW"})))  # fmt: skip
    assert [h.hostname for h in out.hosts] == ["h1"] and out.removed_by is None
    big = run_filters(hosts, Request("i", Resources(1, 8192, 1)))
    assert big.hosts == [] and big.removed_by == "ResourcesFilter"
    assert big.summary() == (
        "Filter results: ['ComputeFilter: (start: 3, end: 3)', 'AvailabilityZoneFilter: (start: 3, end: 3)', "
        "'ServerGroupFilter: (start: 3, end: 3)', 'TraitsFilter: (start: 3, end: 3)', "
        "'ResourcesFilter: (start: 3, end: 0)']"
    )
