"""``stratus.recent.Recent``: bounded by its size, the least recently used key out first, merged
values, and consistent under threads."""

from __future__ import annotations

import threading

from stratus.recent import Recent


def test_the_least_recently_used_key_falls_out_first() -> None:
    kept: Recent[str, int] = Recent(2)
    kept.put("a", 1)
    kept.put("b", 2)
    assert kept.get("a") == 1  # a is now the most recent
    kept.put("c", 3)
    assert "b" not in kept and kept.get("a") == 1 and kept.get("c") == 3 and len(kept) == 2


def test_a_merged_value_and_a_dropped_key() -> None:
    kept: Recent[str, int] = Recent(10)
    assert kept.put("u", 5, max) == 5
    assert kept.put("u", 3, max) == 5 and kept.get("u") == 5
    assert kept.put("u", 3) == 3
    kept.drop("u")
    kept.drop("never")
    assert kept.get("u") is None and len(kept) == 0


def test_threads_never_overfill_it_nor_lose_a_merge() -> None:
    kept: Recent[int, int] = Recent(50)

    def work(n: int) -> None:
        for i in range(2000):
            kept.put(i % 100, n * 10_000 + i, max)
            kept.get((i * 7) % 100)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(kept) == 50
    # every thread's last write is to key 99, merged by max with what is kept: one of those last writes
    assert kept.get(99) in {n * 10_000 + 1999 for n in range(4)}


def test_the_values_of_several_keys_at_once_keep_them_recent() -> None:
    kept: Recent[str, int] = Recent(3)
    kept.put("a", 1)
    kept.put("b", 2)
    kept.put("c", 3)
    assert kept.get_each(("a", "missing", "b")) == [1, 2]
    kept.put("d", 4)  # c, read least recently, falls out
    assert "c" not in kept and kept.get_each(("a", "b", "d")) == [1, 2, 4]
