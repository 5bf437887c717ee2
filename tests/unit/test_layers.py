"""The layout is the architecture: import-linter holds the layers to the contracts in .importlinter."""

from __future__ import annotations

import ast
import configparser
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / ".importlinter"


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    proc = subprocess.run(
        [str(lint), "--config", str(CONFIG), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 6 kept, 0 broken" in proc.stdout


def test_every_first_party_package_is_a_layer() -> None:
    """What import-linter's ``exhaustive`` checks only inside a container package: no top-level
    package of the repository is left out of the contracts (one left out could import anything)."""
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests"}
    config = configparser.ConfigParser()
    config.read(CONFIG)
    roots = set(config["importlinter"]["root_packages"].split())
    layers = {
        name.strip()
        for line in config["importlinter:contract:layers"]["layers"].split("\n")
        for name in line.split("|")
        if name.strip()
    }
    assert packages == roots == layers


def test_no_production_module_imports_the_tests() -> None:
    """The facades over the bus (tests/fixtures/facades) and every other test helper stay the tests':
    the API and the workers hold the bus their composition root built (docs/architecture.md)."""
    offenders = []
    for path in ROOT.glob("*/**/*.py"):
        top = path.relative_to(ROOT).parts[0]
        if top in {"tests", ".venv", ".stratus"} or not (ROOT / top / "__init__.py").exists():
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] == "tests"]
    assert not offenders, offenders
