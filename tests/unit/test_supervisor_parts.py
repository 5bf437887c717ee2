"""The supervisor's parts: unique names, and a part that cannot start."""

from __future__ import annotations

import io

import pytest

from processes.supervisor import ChildProcess, PartFailed, Supervisor


def test_part_names_are_unique() -> None:
    with pytest.raises(ValueError):
        Supervisor([ChildProcess("api", ["true"]), ChildProcess("api", ["true"])])


def test_a_missing_executable_is_a_start_failure() -> None:
    log = io.StringIO()
    assert Supervisor([ChildProcess("api", ["/nonexistent/gunicorn"])], log=log).run() == 1
    assert "api could not be started" in log.getvalue()
    assert isinstance(PartFailed("x", "y"), Exception)
