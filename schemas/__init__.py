"""schemas/ is the contract: JSON Schemas (draft 2020-12) for event payloads, the event envelope,
and API request bodies. Loaded from the installed package, validated with ``jsonschema``.

Layout:
  events/<kind>.<type>.v<N>.json   the ``data`` of one event type at schema version N
  envelope.v1.json                 the CloudEvents 1.0 structured envelope with Stratus's extensions
  api/*.json                       request bodies of the REST API
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import orjson
from jsonschema import Draft202012Validator


@functools.cache
def load(name: str) -> dict[str, Any]:
    """The schema at ``name`` (a path relative to this package, e.g. ``events/instance.spawned.v1.json``)."""
    data = resources.files(__name__).joinpath(name).read_bytes()
    schema: dict[str, Any] = orjson.loads(data)
    Draft202012Validator.check_schema(schema)
    return schema


@functools.cache
def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(load(name), format_checker=Draft202012Validator.FORMAT_CHECKER)


def event_schema_name(kind: str, type_: str, version: int = 1) -> str:
    return f"events/{kind}.{type_}.v{version}.json"


def event_schema_names() -> list[str]:
    folder = resources.files(__name__).joinpath("events")
    return sorted(f"events/{p.name}" for p in folder.iterdir() if p.name.endswith(".json"))
