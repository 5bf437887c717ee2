"""Nova's response contract as tempest states it: its JSON schemas, per route and microversion.

Tempest 47.0.0 validates every compute answer against a schema chosen by the requested
microversion (``additionalProperties: false``), as strict clients do. Its service clients say which
schema module holds for which range (``schema_versions_info``); this module reads that table from
the clients' source (no hand-copied shapes) and the schemas themselves from tempest's package,
installed once by the conformance runner into a virtualenv of its own
(``processes.conformance.ensure_tempest``). Only ``tempest.lib.api_schema`` is imported: its modules
need nothing but ``copy``.
"""

from __future__ import annotations

import ast
import base64
import binascii
import importlib
import sys
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from processes import conformance

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".stratus" / "conformance" / "venv"
_PACKAGE = "tempest.lib.api_schema.response.compute."


# Tempest's validator: Draft 4 with its format checks, and its two of its own (jsonschema_validator.py).
_FORMATS = jsonschema.FormatChecker()


@_FORMATS.checks("iso8601-date-time", raises=ValueError)
def _iso8601(instance: object) -> bool:
    if isinstance(instance, str):
        datetime.fromisoformat(instance.replace("Z", "+00:00"))
    return True


@_FORMATS.checks("base64", raises=binascii.Error)
def _base64(instance: object) -> bool:
    if isinstance(instance, str):
        base64.b64decode(instance.encode(), validate=True)
    return True


@dataclass(frozen=True)
class Range:
    low: tuple[int, int]
    high: tuple[int, int]
    module: str  # e.g. "v2_57.servers"

    def holds(self, version: tuple[int, int]) -> bool:
        return self.low <= version <= self.high


@cache
def _site_packages() -> Path:
    conformance.ensure_tempest(VENV)
    (site,) = VENV.glob("lib/python3*/site-packages")
    # Import tempest's schema package alone from that virtualenv: a directory holding only a link
    # to it goes on the path, so none of tempest's dependencies can shadow ours.
    shelf = VENV.parent / "schema-path"
    shelf.mkdir(exist_ok=True)
    link = shelf / "tempest"
    if not link.exists():
        link.symlink_to(site / "tempest", target_is_directory=True)
    if str(shelf) not in sys.path:
        sys.path.append(str(shelf))
    return site


def _version(text: str | None, default: tuple[int, int]) -> tuple[int, int]:
    if text is None:
        return default
    major, minor = text.split(".")
    return int(major), int(minor)


@cache
def _aliases(client: str) -> tuple[ast.Module, dict[str, str]]:
    source = _site_packages() / "tempest" / "lib" / "services" / "compute" / f"{client}.py"
    tree = ast.parse(source.read_text())
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        module = node.module if isinstance(node, ast.ImportFrom) else None
        if module and module.startswith(_PACKAGE):
            for name in node.names:  # type: ignore[attr-defined]
                aliases[name.asname or name.name] = f"{module.removeprefix(_PACKAGE)}.{name.name}"
    return tree, aliases


@cache
def table(client: str) -> tuple[Range, ...]:
    """``client``'s microversion table, e.g. ``table("servers_client")``, read from tempest's source."""
    tree, aliases = _aliases(client)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "schema_versions_info" for t in node.targets
        ):
            ranges = []
            assert isinstance(node.value, ast.List)
            for item in node.value.elts:
                assert isinstance(item, ast.Dict)
                entry = {ast.literal_eval(k): v for k, v in zip(item.keys, item.values, strict=True) if k}
                low = _version(ast.literal_eval(entry["min"]), (2, 1))
                high = _version(ast.literal_eval(entry["max"]), (2, 999))
                ranges.append(Range(low, high, aliases[entry["schema"].id]))  # type: ignore[attr-defined]
            return tuple(ranges)
    # A client without a table uses one schema module at every microversion.
    (module,) = {m for a, m in aliases.items() if a == "schema"} or set(aliases.values())
    return (Range((2, 1), (2, 999), module),)


def schema(client: str, name: str, version: str) -> dict[str, Any]:
    """The schema ``name`` (e.g. ``get_server``) of ``client`` at microversion ``version``."""
    wanted = _version(version, (2, 1))
    for entry in table(client):
        if entry.holds(wanted):
            module = importlib.import_module(_PACKAGE + entry.module)
            if hasattr(module, name):
                return dict(getattr(module, name))
            # Routes that did not change (create, delete) are checked with the client's base module.
            base = importlib.import_module(_PACKAGE + _aliases(client)[1]["schema"])
            return dict(getattr(base, name))
    raise LookupError(f"{client} has no schema at {version}")


def boundaries(client: str, upto: tuple[int, int] = (2, 104)) -> list[str]:
    """Every microversion where ``client``'s schemas change (each range's first), up to ``upto``."""
    lows = sorted({r.low for r in table(client) if r.low <= upto} | {upto})
    return [f"{major}.{minor}" for major, minor in lows]


def module(path: str) -> Any:
    """A tempest schema module by its path under ``compute``, e.g. ``module("v2_53.hypervisors")``."""
    _site_packages()
    return importlib.import_module(_PACKAGE + path)


def conforms(expected: dict[str, Any], status: int, body: Any, what: str = "answer") -> None:
    """Fail unless ``status`` and ``body`` are what the tempest schema ``expected`` accepts."""
    codes = expected["status_code"]
    assert status in codes, f"{what}: status {status}, Nova answers {codes}"
    if "response_body" in expected:
        try:
            jsonschema.Draft4Validator(expected["response_body"], format_checker=_FORMATS).validate(body)
        except jsonschema.ValidationError as e:
            raise AssertionError(f"{what}: {e.message} at {list(e.absolute_path)}") from None


def check(client: str, name: str, version: str, status: int, body: Any) -> None:
    """Fail unless ``status`` and ``body`` are what tempest accepts from Nova at ``version``."""
    conforms(schema(client, name, version), status, body, f"{name} at {version}")
