"""The password a guest posts once (api/metadata/passwords.py): whole or not at all, first post wins."""

from __future__ import annotations

import stat
import uuid
from pathlib import Path

import pytest

from api.metadata.passwords import AlreadySet, PasswordStore


def test_the_first_post_wins_whole_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    store = PasswordStore(tmp_path / "passwords")
    server = str(uuid.uuid4())
    store.set_once(server, b"first")
    with pytest.raises(AlreadySet):
        store.set_once(server, b"second")
    assert store.get(server) == b"first"
    [kept] = list((tmp_path / "passwords").iterdir())  # no staged copy left, even after the refusal
    assert kept.name == server and stat.S_IMODE(kept.stat().st_mode) == 0o600
    store.clear(server)
    store.set_once(server, b"again")  # cleared: the guest may post again
    assert store.get(server) == b"again"
