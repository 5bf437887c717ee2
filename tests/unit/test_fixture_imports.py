"""Test modules share code only through ``tests/fixtures/``: none imports another test module.

Read from the sources' syntax trees, so that it takes no server and no import of the modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
TIERS = ("unit", "integration", "acceptance", "fuzz", "fixtures")


def _imported(path: Path) -> list[str]:
    modules = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules += [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules.append("." * node.level + (node.module or ""))
    return modules


def test_tests_import_from_tests_fixtures_only() -> None:
    wrong = {
        f"{path.relative_to(TESTS)}: {module}"
        for tier in TIERS
        for path in (TESTS / tier).rglob("*.py")
        for module in _imported(path)
        if module.startswith(".")
        or (module.startswith("tests.") and not module.startswith("tests.fixtures."))
    }
    assert not wrong, sorted(wrong)


def test_no_fixture_is_imported_to_be_redefined() -> None:
    marked = [
        str(path.relative_to(TESTS))
        for tier in TIERS
        for path in (TESTS / tier).rglob("*.py")
        if "noqa: " + "F811" in path.read_text()  # (split, or this file would name itself)
    ]
    assert marked == []
