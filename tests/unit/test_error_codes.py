"""The table of error codes (``api/error_codes.py``) holds every code the API answers with, each
declared once, used by reference, with the status the API really answers, and documented in docs/api.md."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path
from typing import TypeVar

import pytest

import api
import commands
from api import error_codes
from api.errors import DOMAIN_STATUS, ApiError
from api.placement.common import _status_of as placement_status
from commands.errors import DomainError

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
# A string that looks like one of our error codes: ``api.not_found``, ``placement.inventory.inuse``.
CODE_LIKE = re.compile(r"^(api|compute|stratus|network|placement)(\.[a-z_]+)+$")


def _import_all(package: object) -> None:
    for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):  # type: ignore[attr-defined]
        if module.name.endswith("__main__"):
            continue
        importlib.import_module(module.name)


def _subclasses(cls: type[T]) -> set[type[T]]:
    found: set[type[T]] = set()
    for sub in cls.__subclasses__():
        found |= {sub, *_subclasses(sub)}
    return found


@pytest.fixture(scope="module")
def loaded() -> None:
    _import_all(api)
    _import_all(commands)


def test_every_api_error_has_a_declared_code_and_its_status(loaded: None) -> None:
    api_errors: set[type[ApiError]] = {ApiError, *_subclasses(ApiError)}
    for cls in api_errors:
        declared = error_codes.CODES.get(cls.code)
        assert declared is not None, f"{cls.__qualname__}: code {cls.code} is not in api/error_codes.py"
        assert cls.status == declared.status, (
            f"{cls.__qualname__} answers {cls.status}, the table says {declared}"
        )


def test_every_domain_error_has_a_declared_code_answered_with_its_status(loaded: None) -> None:
    domain_errors: set[type[DomainError]] = {DomainError, *_subclasses(DomainError)}
    for cls in domain_errors:
        if cls.__module__.startswith("tests."):
            continue
        declared = error_codes.CODES.get(cls.code)
        assert declared is not None, f"{cls.__qualname__}: code {cls.code} is not in api/error_codes.py"
        if declared.status == error_codes.ANY_STATUS:
            continue
        if cls.code.startswith("placement."):
            answered = placement_status(cls("x"))
        else:
            answered = next((s for c, s in DOMAIN_STATUS.items() if issubclass(cls, c)), 400)
        assert answered == declared.status, (
            f"{cls.__qualname__} is answered {answered}, the table says {declared}"
        )


def _code_literals(path: Path) -> list[tuple[int, str]]:
    """String constants in ``path`` that look like error codes (logger names left out)."""
    tree = ast.parse(path.read_text(), str(path))
    loggers = {
        id(arg)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", "")) == "getLogger"
        for arg in node.args
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in loggers
        and CODE_LIKE.match(node.value)
    ]


def test_codes_are_written_only_in_the_table() -> None:
    table = ROOT / "api" / "error_codes.py"
    literals = [
        f"{path.relative_to(ROOT)}:{line}: {value}"
        for path in sorted((ROOT / "api").rglob("*.py"))
        if path != table
        for line, value in _code_literals(path)
    ]
    assert literals == [], (
        "declare these codes in api/error_codes.py and name them from there:\n" + "\n".join(literals)
    )


def test_the_table_declares_only_code_like_names() -> None:
    assert all(CODE_LIKE.match(code) for code in error_codes.CODES), sorted(error_codes.CODES)


def test_every_code_is_documented_with_its_status() -> None:
    doc = (ROOT / "docs" / "api.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z_.]+)` \| (\d+|any) \|", doc, re.M))
    for code, declared in error_codes.CODES.items():
        assert code in rows, f"docs/api.md's table of error codes has no row for {code}"
        status = "any" if declared.status == error_codes.ANY_STATUS else str(declared.status)
        assert rows[code] == status, f"docs/api.md says {code} is {rows[code]}, the table says {status}"
    assert set(rows) == set(error_codes.CODES), set(rows) ^ set(error_codes.CODES)
