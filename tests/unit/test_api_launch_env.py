"""The API's gunicorn starts with glibc's malloc arenas bounded (two, not eight per core): its 16
threads each grew an arena of their own, and their freed memory stayed there (docs/performance.md,
"Memory"); with several workers its master preloads the app's modules for them to share."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from processes.api import MULTIPROC_DIR_ENV, _preload, gunicorn_env
from stratus.config import Settings


def test_gunicorn_starts_with_two_malloc_arenas(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    env = gunicorn_env(Settings(), tmp_path)
    assert env["MALLOC_ARENA_MAX"] == "2"
    assert env[MULTIPROC_DIR_ENV] == str(tmp_path)


def test_an_operators_own_arena_bound_is_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert gunicorn_env(Settings(), tmp_path)["MALLOC_ARENA_MAX"] == "4"


def test_several_workers_are_forked_from_a_master_that_imported_the_app() -> None:
    assert _preload(dataclasses.replace(Settings(), api_workers=2)) == ["--preload"]
    assert _preload(dataclasses.replace(Settings(), api_workers=1)) == []
