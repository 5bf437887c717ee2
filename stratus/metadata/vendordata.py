"""Nova's vendordata providers: StaticJSON (a JSON file the operator writes) and DynamicJSON (HTTP
services called with the guest's context), under Nova's names and with Nova's answers.

A dynamic target is ``name@url``: it is POSTed the instance's context as JSON (Nova's body and
headers) under a connect and a read timeout, and its JSON answer is served under ``name`` in
``vendor_data2.json``. A target that fails, answers an error, answers no JSON or is slow gives
``{}`` under its name, as Nova's does with ``vendordata_dynamic_failure_fatal`` off: one bad
target never breaks a guest's metadata.
"""

from __future__ import annotations

import base64
import http.client
import logging
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from stratus.config import Settings

log = logging.getLogger("stratus.metadata")

STATIC, DYNAMIC = "StaticJSON", "DynamicJSON"
# A target's answer larger than this is refused (a guest's metadata is not a download).
MAX_ANSWER_BYTES = 1 << 20


class VendordataError(Exception):
    """The static vendordata file cannot be read or is not a JSON object."""


def load_static(path: Path | None) -> dict[str, Any]:
    """StaticJSON's data: the file's object, ``{}`` without a file (Nova's JsonFileVendorData).
    Read once, at composition: a bad file stops the service from starting, as it stops Nova's."""
    if path is None:
        return {}
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as e:
        raise VendordataError(f"vendordata file {path}: {e}") from e
    if not isinstance(data, dict):
        raise VendordataError(f"vendordata file {path}: not a JSON object")
    return data


@dataclass(frozen=True)
class Target:
    """One DynamicJSON target: the name its answer is served under, and its URL."""

    name: str
    url: str


def parse_targets(specs: tuple[str, ...]) -> list[Target]:
    """``name@url`` targets; one without a name, or naming a name twice, is skipped (as Nova)."""
    targets: list[Target] = []
    for spec in specs:
        name, at, url = spec.partition("@")
        if not at or not name:
            log.warning("vendordata target %r lacks a name; skipping", spec)
        elif any(t.name == name for t in targets):
            log.warning("vendordata already has a target named %r; skipping %r", name, spec)
        else:
            targets.append(Target(name, url))
    return targets


@dataclass(frozen=True)
class Providers:
    """The configured providers, in order, and what each needs."""

    names: tuple[str, ...]
    static: dict[str, Any]
    targets: tuple[Target, ...]
    connect_timeout: float
    read_timeout: float

    @classmethod
    def configured(cls, settings: Settings) -> Providers:
        """The providers ``settings`` name (the static file read now: a bad one stops the process)."""
        return cls(
            names=settings.vendordata_providers,
            static=load_static(settings.vendordata_jsonfile_path),
            targets=tuple(parse_targets(settings.vendordata_dynamic_targets)),
            connect_timeout=settings.vendordata_dynamic_connect_timeout,
            read_timeout=settings.vendordata_dynamic_read_timeout,
        )

    def vendor_data(self) -> dict[str, Any] | None:
        """``vendor_data.json``: StaticJSON's data (None: StaticJSON not configured, a 404)."""
        return self.static if STATIC in self.names else None

    def vendor_data2(self, context: Mapping[str, Any]) -> dict[str, Any]:
        """``vendor_data2.json``: ``static`` from StaticJSON, then each dynamic target's answer."""
        answer: dict[str, Any] = {}
        for provider in self.names:
            if provider == STATIC:
                answer["static"] = self.static
            elif provider == DYNAMIC:
                for target in self.targets:
                    if target.name in answer:
                        log.warning("removing duplicate vendordata key %s", target.name)
                        continue
                    answer[target.name] = self.call(target, context)
        return answer

    def call(self, target: Target, context: Mapping[str, Any]) -> Any:
        """The target's JSON answer to ``context``; ``{}`` when it fails or is slow."""
        try:
            return _post_json(target.url, context, self.connect_timeout, self.read_timeout)
        except (OSError, http.client.HTTPException, ValueError, _Refused) as e:
            log.warning("error from dynamic vendordata service %s at %s: %s", target.name, target.url, e)
            return {}


def instance_context(row: Mapping[str, Any], user_data: bytes | None, hostname: str) -> dict[str, Any]:
    """Nova's body for a dynamic target (``vendordata_dynamic.py``)."""
    return {
        "project-id": str(row["project_id"]),
        "instance-id": str(row["id"]),
        "image-id": str(row.get("image_ref") or ""),
        "user-data": base64.b64encode(user_data).decode() if user_data is not None else None,
        "hostname": hostname,
        "metadata": dict(row.get("metadata") or {}),
        "boot-roles": "",  # Stratus does not keep the creator's roles with the server
    }


class _Refused(Exception):
    """The target answered, but not with a usable answer."""


def _post_json(url: str, body: Mapping[str, Any], connect_timeout: float, read_timeout: float) -> Any:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _Refused(f"not an http(s) URL: {url!r}")
    connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = connection_class(parts.hostname, parts.port, timeout=connect_timeout)
    try:
        conn.connect()
        if conn.sock is not None:
            conn.sock.settimeout(read_timeout)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "openstack-nova-vendordata",
        }
        conn.request("POST", path, body=orjson.dumps(dict(body)), headers=headers)
        response = conn.getresponse()
        data = response.read(MAX_ANSWER_BYTES + 1)
    except TimeoutError as e:
        raise _Refused("timed out") from e
    finally:
        conn.close()
    if response.status >= 400:
        raise _Refused(f"answered {response.status}")
    if len(data) > MAX_ANSWER_BYTES:
        raise _Refused("answer too large")
    return orjson.loads(data) if data.strip() else {}
