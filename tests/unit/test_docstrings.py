"""Every public class of the production packages says why it exists (issue 15's rule: a docstring on
every public class, nested event classes included), checked from the syntax trees."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("api", "commands", "projections", "workers", "stratus", "processes", "schemas")


def undocumented(root: Path, packages: tuple[str, ...]) -> list[str]:
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                    continue
                if ast.get_docstring(node) is None:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    return found


def test_every_public_class_has_a_docstring() -> None:
    assert undocumented(ROOT, PACKAGES) == []


def test_a_class_without_one_is_named(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        "class Told:\n    '''Why.'''\n\n    class Bare:\n        pass\n\nclass _Private:\n    pass\n"
    )
    assert undocumented(tmp_path, ("pkg",)) == ["pkg/m.py:4 Bare"]
