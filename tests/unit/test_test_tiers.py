"""``stratus test --unit|--integration|--acceptance``: which folders pytest gets (processes/cli.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from processes.cli import PARALLEL, tier_selection


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A repository whose tests have a unit and an integration tier, and no acceptance tier yet."""
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    (tmp_path / "tests" / "integration").mkdir()
    return tmp_path


def test_no_tier_runs_everything_on_two_workers(root: Path) -> None:
    assert tier_selection(["-k", "flavor", "-x"], root) == ([], [*PARALLEL, "-k", "flavor", "-x"])
    assert tier_selection([], root) == ([], PARALLEL)


def test_tiers_become_their_folders(root: Path) -> None:
    tiers, args = tier_selection(["--integration", "-x", "--unit"], root)
    assert tiers == ["unit", "integration"]
    assert args == ["tests/unit", "tests/integration", *PARALLEL, "-x"]
    assert tier_selection(["--unit"], root) == (["unit"], ["tests/unit"])  # one tier: one worker


def test_named_tests_or_a_chosen_worker_count_run_as_asked(root: Path) -> None:
    assert tier_selection(["tests/unit/test_x.py"], root) == ([], ["tests/unit/test_x.py"])
    assert tier_selection(["-k", "t", "tests/integration/test_y.py::test_z"], root)[1] == [
        "-k",
        "t",
        "tests/integration/test_y.py::test_z",
    ]
    assert tier_selection(["-n", "0"], root) == ([], ["-n", "0"])
    assert tier_selection(["--numprocesses=4"], root) == ([], ["--numprocesses=4"])


def test_a_tier_without_its_folder_has_no_tests(root: Path) -> None:
    assert tier_selection(["--acceptance"], root) == (["acceptance"], None)
    assert tier_selection(["--acceptance", "--unit"], root) == (["unit", "acceptance"], ["tests/unit"])
