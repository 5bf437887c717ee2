"""The cost of password hashes is a setting (Keystone's ``password_hash_rounds``), read and bounded
by ``stratus.config`` and applied by ``api.identity.credentials.password_hasher``."""

from __future__ import annotations

import pytest

from api.identity.credentials import password_hasher, verify_password
from stratus.config import Settings


def test_the_default_is_rfc_9106s_low_memory_profile() -> None:
    hashed = password_hasher(Settings.from_env({})).hash("pw")
    assert hashed.startswith("$argon2id$v=19$m=65536,t=3,p=4$") and verify_password("pw", hashed)


def test_the_cost_is_read_from_the_environment_and_passed_to_children() -> None:
    env = {"STRATUS_PASSWORD_HASH_MEMORY_KIB": "1024", "STRATUS_PASSWORD_HASH_ITERATIONS": "2"}
    s = Settings.from_env(env)
    assert (s.password_hash_memory_kib, s.password_hash_iterations) == (1024, 2)
    assert password_hasher(s).hash("pw").startswith("$argon2id$v=19$m=1024,t=2,p=4$")
    assert Settings.from_env(s.to_env()) == s


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("STRATUS_PASSWORD_HASH_MEMORY_KIB", "16"),  # argon2 needs 8 KiB a lane, 4 lanes
        ("STRATUS_PASSWORD_HASH_MEMORY_KIB", "lots"),
        ("STRATUS_PASSWORD_HASH_ITERATIONS", "0"),
    ],
)
def test_a_cost_out_of_bounds_is_refused_by_name(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=name):
        Settings.from_env({name: value})
