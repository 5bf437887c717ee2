"""Test configuration: the shared fixtures, registered once for every tier.

Fixtures live only in ``tests/fixtures/`` (docs/testing.md); a test module imports helpers from
there and asks for fixtures by name, never importing another test module.
"""

from pathlib import Path

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
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``bin/stratus test``'s two workers (pytest-xdist, ``--dist loadgroup``), the tests that
    start whole stacks (the acceptance and fuzz tiers: real guests, tempest's venv, the package
    installs, the fault campaign) run one after the other on one worker, as they would alone; the
    unit and integration tests run beside them on the other (docs/testing.md)."""
    whole_stack = pytest.mark.xdist_group("whole-stack")
    for item in items:
        parts = Path(str(item.path)).parts
        if "acceptance" in parts or "fuzz" in parts:
            item.add_marker(whole_stack)
