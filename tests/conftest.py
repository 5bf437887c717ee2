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
        """Units in the order collected (the whole-stack modules first, the longest of them first),
        and a worker is given its next unit only when its last test is running: xdist's own rule
        (up to two tests left) queued a unit behind tempest's three-minute run while the other
        workers ran out of work."""

        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

        def schedule(self) -> None:
            self.config.option.loadscopereorder = False  # not by tests per unit: by collection
            super().schedule()

        def _reschedule(self, node: Any) -> None:
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            # a worker runs a test once it knows the next (for fixtures' teardown): one left means
            # it is running that one's predecessor's report, or waiting, so it needs work now
            if self._pending_of(self.assigned_work[node]) <= 1:
                self._assign_work_unit(node)

    return ByScope(config, log)
