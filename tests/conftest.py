"""Test configuration: the shared fixtures, registered once for every tier.

Fixtures live only in ``tests/fixtures/`` (docs/testing.md); a test module imports helpers from
there and asks for fixtures by name, never importing another test module.
"""

from typing import Any

import pytest

pytest_plugins = [
    "tests.fixtures.nats",
    "tests.fixtures.postgres",
    "tests.fixtures.commands",
    "tests.fixtures.projections",
    "tests.fixtures.scheduler",
    "tests.fixtures.hypervisor",
    "tests.fixtures.api",
    "tests.fixtures.deployed",
    "tests.fixtures.trust",
    "tests.fixtures.rolling",
    "tests.fixtures.cluster",
    "tests.fixtures.telemetry",
    "tests.fixtures.guests",
    "tests.fixtures.browser",
]


# The tests that start whole stacks (real guests, tempest's venv, the package installs, the fault
# campaign) share what they install on the machine and are the most sensitive to timing.
WHOLE_STACK = ("tests/acceptance/", "tests/fuzz/")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``bin/stratus test``'s two workers (pytest-xdist, ``--dist loadgroup``), the whole-stack
    tests run one after the other on one worker, as they would alone, and the unit and integration
    tests beside them on the other (docs/testing.md). (xdist's own ``xdist_group`` marks do not
    group under pytest 9: the node id suffix they rely on is no longer kept, so the grouping is
    made here, by path.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class WholeStackTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "whole-stack" if nodeid.startswith(WHOLE_STACK) else nodeid

    return WholeStackTogether(config, log)
