"""``stratus test --unit|--integration|--acceptance``: which folders pytest gets (processes/cli.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from processes.cli import tier_selection


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A repository whose tests have a unit and an integration tier, and no acceptance tier yet."""
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    (tmp_path / "tests" / "integration").mkdir()
    return tmp_path


def test_no_tier_runs_everything_as_given(root: Path) -> None:
    assert tier_selection(["-k", "flavor", "-x"], root) == ([], ["-k", "flavor", "-x"])


def test_tiers_become_their_folders(root: Path) -> None:
    tiers, args = tier_selection(["--integration", "-x", "--unit"], root)
    assert tiers == ["unit", "integration"]
    assert args == ["tests/unit", "tests/integration", "-x"]


def test_a_tier_without_its_folder_has_no_tests(root: Path) -> None:
    assert tier_selection(["--acceptance"], root) == (["acceptance"], None)
    assert tier_selection(["--acceptance", "--unit"], root) == (["unit", "acceptance"], ["tests/unit"])
