"""Tokens expire and their signatures are checked; every declared policy rule exists."""

from __future__ import annotations

import datetime as dt

import pytest

from api import policy
from api.identity.tokens import InvalidToken, TokenSigner


def test_tokens_expire_and_signatures_are_checked() -> None:
    now = [dt.datetime(2026, 1, 1, tzinfo=dt.UTC)]
    signer = TokenSigner(b"k" * 32, ttl_seconds=60, clock=lambda: now[0])
    token, claims = signer.issue("a" * 32, "b" * 32)
    assert signer.verify(token) == claims
    now[0] += dt.timedelta(seconds=59)
    assert signer.verify(token).user_id == "a" * 32
    now[0] += dt.timedelta(seconds=1)
    with pytest.raises(InvalidToken, match="expired"):
        signer.verify(token)
    now[0] -= dt.timedelta(seconds=30)
    other, _ = TokenSigner(b"x" * 32, clock=lambda: now[0]).issue("a" * 32, "b" * 32)
    flipped = token[:-10] + ("A" if token[-10] != "A" else "B") + token[-9:]
    for forged in (other, flipped, token[:-4], "", token + "=", token.replace("-", "+"), " " + token):
        with pytest.raises(InvalidToken):
            signer.verify(forged)


def test_every_declared_rule_exists() -> None:
    with pytest.raises(KeyError):
        policy.require("os_compute_api:servers:frobnicate")
    assert policy.RULES["os_compute_api:os-hypervisors:list"].check is policy.ADMIN


def test_a_token_used_again_is_not_decrypted_again_and_a_forged_one_is_never_kept() -> None:
    now = [dt.datetime(2026, 1, 1, tzinfo=dt.UTC)]
    signer = TokenSigner(b"k" * 32, ttl_seconds=60, clock=lambda: now[0])
    token, claims = signer.issue("a" * 32, "b" * 32)
    decrypted = []
    decrypt = signer._fernet.decrypt
    signer._fernet.decrypt = lambda t: decrypted.append(t) or decrypt(t)  # type: ignore[method-assign]
    assert [signer.verify(token) for _ in range(3)] == [claims] * 3
    assert len(decrypted) == 1
    forged = token[:-10] + ("A" if token[-10] != "A" else "B") + token[-9:]
    for _ in range(2):
        with pytest.raises(InvalidToken):
            signer.verify(forged)
    assert len(decrypted) == 3  # each try at a forged token is checked again
    now[0] += dt.timedelta(seconds=60)
    with pytest.raises(InvalidToken, match="expired"):
        signer.verify(token)  # kept, and still compared with the clock
