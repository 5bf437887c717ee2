"""Test configuration: the shared fixtures, registered once for every tier.

Fixtures live only in ``tests/fixtures/`` (docs/testing.md); a test module imports helpers from
there and asks for fixtures by name, never importing another test module.
"""

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
    "tests.fixtures.browser",
]
