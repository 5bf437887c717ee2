"""The batch scheduler's ranking of hosts, and its shards."""

from __future__ import annotations

import pytest

from commands.host import Resources
from workers.scheduling import Shard
from workers.weighers import Multipliers, Ranking, weigh


def test_ranking_takes_the_heaviest_host_with_room_and_moves_it_down() -> None:
    free = {
        "a": Resources(8, 8192, 100),
        "b": Resources(8, 4096, 100),
        "c": Resources(8, 1024, 100),
    }
    need = Resources(1, 2048, 1)
    ranking = Ranking(free, Multipliers(ram=1.0, cpu=0.0, disk=0.0))
    assert ranking.take(need) == weigh(free, Multipliers(ram=1.0, cpu=0.0, disk=0.0))[0] == "a"
    # a: 6144 free, still heaviest; then 4096 ties with b and the name breaks the tie
    assert [ranking.take(need) for _ in range(5)] == ["a", "a", "b", "a", "b"]
    assert ranking.take(need) is None  # c never had room; a and b are full

    same = {name: Resources(8, 8192, 100) for name in ("x", "y", "z")}  # identical hosts spread too
    spreading = Ranking(same)
    assert [spreading.take(need) for _ in range(4)] == ["x", "y", "z", "x"]

    packing = Ranking(free, Multipliers(ram=-1.0, cpu=0.0, disk=0.0))
    assert [packing.take(Resources(1, 1024, 1)) for _ in range(3)] == ["c", "b", "b"]
    packing.drop("b")
    assert packing.take(Resources(1, 1024, 1)) == "a"


def test_a_shard_is_i_of_n() -> None:
    assert Shard.parse("") == Shard(0, 1) and Shard.parse("1/2") == Shard(1, 2)
    for bad in ("2/2", "x", "1", "-1/2"):
        with pytest.raises(ValueError, match="STRATUS_SCHEDULER_SHARD"):
            Shard.parse(bad)
