"""Every first-party import is a static one, so that import-linter sees it (.importlinter).

A module imported by name at run time (``importlib.import_module("api.app")``, ``__import__``) is an
edge of the import graph that no contract checks: the kernel once reached up to the CLI's parts that
way. This walks the syntax tree of every first-party module and fails on such a call whose argument
names a first-party module (or is not a literal at all, which could name one).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = sorted(p.parent.name for p in ROOT.glob("*/__init__.py") if p.parent.name != "tests")


def first_party_modules() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def dynamic_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) of each ``importlib.import_module(...)`` / ``import_module(...)`` / ``__import__(...)``
    call naming a first-party module or a name computed at run time."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name not in ("import_module", "__import__"):
            continue
        target = node.args[0]
        if isinstance(target, ast.Constant) and isinstance(target.value, str):
            if target.value.split(".")[0] not in PACKAGES:
                continue  # a third-party module by name: no edge of our graph
            found.append((node.lineno, target.value))
        else:
            found.append((node.lineno, ast.unparse(target)))
    return found


def test_the_packages_are_found() -> None:
    assert {"processes", "api", "projections", "workers", "commands", "stratus", "schemas"} <= set(PACKAGES)


def test_no_first_party_module_is_imported_by_name() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {what}"
        for path in first_party_modules()
        for line, what in dynamic_imports(ast.parse(path.read_text(), str(path)))
    ]
    assert offenders == [], "import these statically (import-linter cannot see them):\n" + "\n".join(
        offenders
    )


def test_the_check_finds_what_it_forbids() -> None:
    source = (
        "import importlib\n"
        "importlib.import_module('api.app')\n"
        "__import__('commands.app')\n"
        "importlib.import_module(name)\n"
        "importlib.import_module('json')\n"
    )
    assert dynamic_imports(ast.parse(source)) == [(2, "api.app"), (3, "commands.app"), (4, "name")]
