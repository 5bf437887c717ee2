"""The conformance runner's pure parts: which tempest tests its list selects, and what counts as a
regression."""

from __future__ import annotations

import re
from pathlib import Path

from processes import conformance


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
