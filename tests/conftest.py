"""Test configuration: every fixture talks to a real service (JetStream, PostgreSQL, libvirt)."""

pytest_plugins = [
    "tests.fixtures.nats",
    "tests.fixtures.postgres",
]
