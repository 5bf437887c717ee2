"""The identities of a deployment: who may connect to NATS, with which key, and what each may append.

A ``Registry`` is a JSON file (``<data_dir>/trust/registry.json`` under ``stratus run``;
``Settings.trust_registry``) that the nats-server configuration is generated from and that the
projector and ``stratus audit verify`` check every event's signer against. It holds public keys
only; each part's seed (its secret) is a file of its own beside it, readable by that part alone.

``appends``: the subjects (relative to the subject prefix, NATS wildcards allowed) on which an
identity may append events, e.g. ``host.<this host's id>.>``; ``refuses``: subjects among those it
may not append all the same (a host's ``instance.*.scheduled``: placing is the scheduler's). The
same patterns are its NATS publish permission on the log and the rule its signed events are held
to. ``signed_from``: the first log position from which every event must be signed (None: not cut
over yet; events are then checked when they are signed and reported as unsigned when not).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from stratus.trust.nkeys import KeyPair

FORMAT = 1


@dataclass(frozen=True)
class Identity:
    """One part of the deployment as NATS and the log know it."""

    name: str  # "api", "scheduler", "host:compute-1", "auditor", ...
    role: str  # api | projector | scheduler | host | notifier | auditor | integrator | admin
    public_key: str  # the NATS user NKey, also the key id of the events it signs
    appends: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()  # the compute hosts a host identity speaks for
    retired: bool = False  # a rotated-out key: verifies what it signed, may no longer connect
    refuses: tuple[str, ...] = ()  # subjects among ``appends`` it may not append all the same
    # the first log position a retired key may no longer sign (the log's head + 1 when it was
    # retired); None: not retired, or retired by a release that did not record it
    retired_at: int | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "role": self.role,
            "public_key": self.public_key,
            "appends": list(self.appends),
            "hosts": list(self.hosts),
            "retired": self.retired,
            "refuses": list(self.refuses),
            "retired_at": self.retired_at,
        }

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> Identity:
        return cls(
            name=str(d["name"]),
            role=str(d["role"]),
            public_key=str(d["public_key"]),
            appends=tuple(str(p) for p in d.get("appends", []) or []),  # type: ignore[attr-defined]
            hosts=tuple(str(h) for h in d.get("hosts", []) or []),  # type: ignore[attr-defined]
            retired=bool(d.get("retired", False)),
            refuses=tuple(str(p) for p in d.get("refuses", []) or []),  # type: ignore[attr-defined]
            retired_at=int(str(d["retired_at"])) if d.get("retired_at") is not None else None,
        )


@dataclass(frozen=True)
class Registry:
    """Every identity, current and retired, and the signing cut-over position."""

    identities: tuple[Identity, ...] = ()
    signed_from: int | None = None
    _by_key: dict[str, Identity] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_key.update({i.public_key: i for i in self.identities})

    def by_key(self, public_key: str) -> Identity | None:
        return self._by_key.get(public_key)

    def current(self, name: str) -> Identity | None:
        """The identity ``name`` connects as now (its newest key not retired)."""
        found = [i for i in self.identities if i.name == name and not i.retired]
        return found[-1] if found else None

    @property
    def active(self) -> list[Identity]:
        return [i for i in self.identities if not i.retired]

    def with_identities(self, identities: Iterable[Identity]) -> Registry:
        return replace(self, identities=(*self.identities, *identities), _by_key={})

    def without(self, identity: Identity) -> Registry:
        return replace(self, identities=tuple(i for i in self.identities if i != identity), _by_key={})

    def retiring(self, name: str, at: int) -> Registry:
        """Every key of ``name`` retired from log position ``at`` on (``rotate`` then adds a new one):
        its signature verifies events before ``at`` only. A key retired earlier keeps its position."""
        kept = tuple(
            replace(i, retired=True, retired_at=i.retired_at if i.retired else at) if i.name == name else i
            for i in self.identities
        )
        return replace(self, identities=kept, _by_key={})

    def cut_over(self, position: int) -> Registry:
        return replace(self, signed_from=position, _by_key={})

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT,
                "signed_from": self.signed_from,
                "identities": [i.to_dict() for i in self.identities],
            },
            indent=2,
        )

    @classmethod
    def from_json(cls, text: str) -> Registry:
        d = json.loads(text)
        if d.get("format") != FORMAT:
            raise ValueError(f"trust registry format {d.get('format')!r} is not {FORMAT}")
        signed_from = d.get("signed_from")
        return cls(
            identities=tuple(Identity.from_dict(i) for i in d.get("identities", [])),
            signed_from=int(signed_from) if signed_from is not None else None,
        )

    @classmethod
    def load(cls, path: Path) -> Registry:
        return cls.from_json(path.read_text())

    def save(self, path: Path) -> None:
        """Write atomically (a reader never sees half a registry)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(self.to_json() + "\n")
        os.replace(tmp, path)


def inbox_prefix(public_key: str) -> str:
    """The reply subjects of the identity whose key is ``public_key``: ``_INBOX_<key>`` (nats-py's
    ``inbox_prefix``; its inboxes are ``<prefix>.<id>``). Each identity may subscribe under its own
    prefix only, so that no part reads the replies another asked for (docs/trust.md)."""
    return f"_INBOX_{public_key}"


def seed_path(directory: Path, name: str) -> Path:
    """Where the seed of identity ``name`` is kept (``host:compute-1`` → ``host-compute-1.seed``)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)
    return directory / f"{safe}.seed"


def new_key(directory: Path, name: str) -> KeyPair:
    """A fresh key for ``name``, its seed written to ``seed_path`` readable by its owner only."""
    key = KeyPair.generate()
    path = seed_path(directory, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key.seed + "\n")
    os.replace(tmp, path)
    return key
