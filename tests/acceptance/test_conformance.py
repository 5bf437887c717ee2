"""The conformance runner (``stratus conformance``): its pure parts here, and in CI the real thing:
tempest 47.0.0, unmodified, the whole compute, identity v3 and image v2 API sets against a stack of
its own; every test of tests/conformance/passing.txt must pass (docs/conformance.md)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from stratus import conformance

ROOT = Path(__file__).resolve().parents[2]


def test_the_list_selects_exactly_its_tests_whatever_their_attributes() -> None:
    listed = {"tempest.api.compute.servers.test_x.T.test_a", "tempest.api.image.v2.test_y.I.test_b"}
    regex = conformance.listed_regex(listed)
    assert re.match(regex, "tempest.api.compute.servers.test_x.T.test_a[id-9f,smoke]")
    assert re.match(regex, "tempest.api.image.v2.test_y.I.test_b")
    assert not re.match(regex, "tempest.api.compute.servers.test_x.T.test_ab")
    assert not re.match(regex, "tempest.api.compute.servers.test_x.T")


def test_regressions_are_the_listed_tests_that_did_not_pass(tmp_path: Path) -> None:
    path = tmp_path / "passing.txt"
    conformance.write_list(path, {"a", "b", "c"})
    assert conformance.read_list(path) == {"a", "b", "c"}
    regressions, new = conformance.compare({"a": "success", "b": "fail", "d": "success"}, {"a", "b", "c"})
    assert regressions == ["b", "c"] and new == ["d"]


def test_the_checked_in_list_is_tempests_ids() -> None:
    listed = conformance.read_list(conformance.PASSING_LIST)
    assert listed and all(t.startswith("tempest.api.") and "[" not in t for t in listed)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_every_listed_tempest_test_passes() -> None:
    """Installs tempest into .stratus/conformance/venv (once), starts a stack, makes the accounts,
    image and flavors, runs the whole set (about 80 s); fails on any listed test not passing."""
    done = subprocess.run(
        [sys.executable, "-m", "stratus.cli", "conformance", "--concurrency", "2"],
        cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, check=False,
    )  # fmt: skip
    summary = [line for line in done.stdout.splitlines() if line.startswith(("conformance:", "  tempest."))]
    assert done.returncode == 0, "\n".join(summary[-60:]) + done.stderr[-2000:]
