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


# The tests that start whole stacks (tempest's run, real guests, the package installs, the fault
# campaign): each module runs whole on one worker, in the order collected (the longest first), and
# the modules that boot real QEMU guests run one after the other, since each guest takes a core
# while it boots and they share the machine's libvirtd.
WHOLE_STACK = ("tests/acceptance/", "tests/fuzz/")
REAL_GUESTS = ("test_real_guest.py", "test_console_guest.py", "test_metadata_guest.py")


def scope_of(nodeid: str) -> str:
    """The unit of work a worker takes whole: a real-guest module's tests together, another
    whole-stack module's tests together, any other test alone."""
    if not nodeid.startswith(WHOLE_STACK):
        return nodeid
    module = nodeid.split("::", 1)[0]
    return "real guests" if module.endswith(REAL_GUESTS) else module


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``bin/stratus test``'s workers (pytest-xdist, ``--dist loadgroup``), each work unit of
    ``scope_of`` goes to one worker (docs/testing.md). (xdist's own ``xdist_group`` marks do not
    group under pytest 9: the node id suffix they rely on is no longer kept, so the grouping is
    made here, by path.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByScope(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return ByScope(config, log)
