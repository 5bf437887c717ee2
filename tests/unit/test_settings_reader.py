"""``stratus/config.py`` is the one reader of settings: no other module reads ``os.environ``.

A setting read anywhere else is one that ``Settings`` does not document (docs/operations.md), that
``Settings.to_env`` does not pass on to a child process, and that a test cannot set without patching
the environment. The entry points that start other programs copy the environment into theirs
(``processes/spawn.py``, and the conformance runner's stack); nothing else touches it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from stratus.config import Settings

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = sorted(p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name != "tests")
# The reader, and the entry points that pass the environment on to the programs they start.
ALLOWED = {"stratus/config.py", "processes/spawn.py", "processes/conformance.py"}


def environment_reads(tree: ast.AST) -> list[int]:
    """Lines that name ``os.environ``, ``os.getenv``, ``os.environb`` (or import them from ``os``)."""
    lines = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in ("environ", "environb", "getenv", "getenvb")
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ) or (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(a.name in ("environ", "environb", "getenv", "getenvb") for a in node.names)
        ):
            lines.append(node.lineno)
    return lines


def test_only_the_settings_read_the_environment() -> None:
    offenders = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = str(path.relative_to(ROOT))
            if name not in ALLOWED:
                lines = environment_reads(ast.parse(path.read_text(), name))
                offenders += [f"{name}:{line}" for line in lines]
    assert offenders == [], "read these through stratus.config.Settings:\n" + "\n".join(offenders)


def test_the_check_finds_what_it_forbids() -> None:
    source = "import os\nfrom os import getenv\nos.environ.get('X')\nos.getenv('Y')\n"
    assert sorted(environment_reads(ast.parse(source))) == [2, 3, 4]


def test_the_settings_the_processes_read_round_trip() -> None:
    env = {
        "STRATUS_SCHEDULER_SHARD": "1/3",
        "STRATUS_SCHEDULER_BATCH": "50",
        "STRATUS_SCHEDULER_ACK_WAIT": "5",
        "STRATUS_RAM_WEIGHT_MULTIPLIER": "-1.5",
        "STRATUS_WATCH_BIND": "127.0.0.1:9999",
        "STRATUS_WATCH_THREADS": "8",
        "STRATUS_SIMULATED_HOSTS": "3",
        "STRATUS_ADMIN_PASSWORD": "secret",
    }
    s = Settings.from_env(env)
    assert (s.scheduler_shard, s.scheduler_batch, s.scheduler_ack_wait_seconds) == ("1/3", 50, 5.0)
    assert (s.ram_weight_multiplier, s.cpu_weight_multiplier) == (-1.5, 1.0)
    assert (s.watch_bind, s.watch_threads, s.simulated_hosts) == ("127.0.0.1:9999", 8, 3)
    assert s.admin_password == "secret" and not s.nats_urls_given
    child = s.to_env()
    assert "STRATUS_ADMIN_PASSWORD" not in child  # a secret for the seeding, not for the parts
    assert "secret" not in repr(s)
    assert Settings.from_env(child) == s and Settings.from_env(child).nats_urls_given


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("STRATUS_SCHEDULER_BATCH", "401", "STRATUS_SCHEDULER_BATCH must be between 1 and 400"),
        ("STRATUS_SCHEDULER_ACK_WAIT", "soon", "STRATUS_SCHEDULER_ACK_WAIT must be a number"),
        ("STRATUS_WATCH_THREADS", "0", "STRATUS_WATCH_THREADS must be at least 1"),
    ],
)
def test_a_bad_setting_is_named(name: str, value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Settings.from_env({name: value})
