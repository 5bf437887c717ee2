"""Every bench module imports: pytest does not collect ``tests/bench`` (benches take minutes and
report ratios), so a name one bench takes from another and that other drops (``bench_growth`` lost
``bench_servers_detail.get`` that way) would otherwise surface only when someone runs the bench."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
MODULES = sorted(p.stem for p in BENCH.glob("*.py") if p.stem not in ("__init__", "conftest"))


def test_the_benches_are_found() -> None:
    assert {"bench_lists", "bench_rebuild", "bench_servers_detail", "harness"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_a_bench_module_imports(name: str) -> None:
    importlib.import_module(f"tests.bench.{name}")
