"""The nats-server ``authorization`` block of a deployment: one NKey user per identity, each with
its subject permissions.

NATS's configuration format accepts JSON, so the block is written as JSON and included by the
server's configuration (``stratus run`` passes it with ``-c``; deploy/nats-cluster includes it).
A user's permissions list what it may publish and subscribe to; what is not allowed is refused by
the server (the client sees a permissions violation, the server logs it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Permissions:
    """What one NATS user may do: subjects it may publish and subscribe to, and whether it may
    answer requests sent to it (``allow_responses``: publish to the reply subject of a request it
    received, and only once)."""

    publish: tuple[str, ...] = ()
    publish_deny: tuple[str, ...] = ()
    subscribe: tuple[str, ...] = ()
    subscribe_deny: tuple[str, ...] = ()
    allow_responses: bool = False

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {
            "publish": _rule(self.publish, self.publish_deny),
            "subscribe": _rule(self.subscribe, self.subscribe_deny),
        }
        if self.allow_responses:
            d["allow_responses"] = True
        return d


def _rule(allow: tuple[str, ...], deny: tuple[str, ...]) -> dict[str, list[str]]:
    rule = {"allow": list(allow) or ["_STRATUS_NOTHING"]}  # an empty allow list would allow all
    if deny:
        rule["deny"] = list(deny)
    return rule


@dataclass(frozen=True)
class User:
    """One NKey user of the server."""

    public_key: str
    permissions: Permissions = field(default_factory=Permissions)


def authorization(users: Iterable[User]) -> dict[str, object]:
    """The ``authorization`` block: only these users may connect."""
    return {
        "authorization": {
            "users": [{"nkey": u.public_key, "permissions": u.permissions.to_dict()} for u in users],
            "timeout": 5,
        }
    }


def write(path: Path, users: Iterable[User], *, extra: dict[str, object] | None = None) -> Path:
    """Write a server configuration holding the ``authorization`` block (and ``extra`` settings)."""
    conf = {**(extra or {}), **authorization(users)}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(conf, indent=2) + "\n")
    tmp.replace(path)
    return path
