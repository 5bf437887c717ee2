"""State as it was: any aggregate, or a project's quota usage, at a past position or time.

Reconstructed from the log, never from the read models: the aggregate's events up to the moment are
replayed through the domain model itself (eventsourcing's ``repository.get(id, version=...)``), so
upcasters apply and any aggregate type works, including kinds added later. ``as_of`` is a position
(an integer: the state after the event at that position) or an RFC 3339 time (the state after the
last event recorded at or before it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate

from commands.instance import Instance
from stratus import positions
from stratus.audit import history
from stratus.audit.history import Entry, LogReader

REQUESTED_TOPIC = "commands.instance:Instance.Requested"


class InvalidAsOf(ValueError):
    """``as_of`` is neither a position nor a timestamp."""


@dataclass(frozen=True)
class AsOf:
    """A moment of the log to read a past state at: a log position, or a time (the last event at or
    before it); ``as_of`` of the audit API."""

    position: int | None = None
    time: datetime | None = None

    @classmethod
    def parse(cls, value: str) -> AsOf:
        value = value.strip()
        if value[:1].isdigit() and value.isdigit():  # a position, in whatever script: parsed strictly
            try:
                return cls(position=positions.parse_natural(value))
            except ValueError as e:
                raise InvalidAsOf(f"Invalid as_of {value[:64]!r}: {e}") from None
        try:
            return cls(time=history.parse_time(value))
        except ValueError as e:
            raise InvalidAsOf(
                f"Invalid as_of {value[:64]!r}: a log position (integer) or an RFC 3339 timestamp"
            ) from e

    def includes(self, entry: Entry) -> bool:
        if self.position is not None and entry.position > self.position:
            return False
        return not (self.time is not None and history.event_time(entry) > self.time)

    def describe(self) -> dict[str, Any]:
        if self.position is not None:
            return {"position": self.position}
        assert self.time is not None
        return {"time": self.time.isoformat().replace("+00:00", "Z")}


@dataclass(frozen=True)
class PastState:
    """An aggregate as it was at an ``AsOf``: its state after the last event up to that moment."""

    aggregate_id: str
    version: int
    position: int  # the position of the last event applied
    time: str  # that event's time
    state: dict[str, Any]


def _plain(value: Any) -> Any:
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if hasattr(value, "value") and isinstance(getattr(value, "value", None), (str, int)):
        return value.value  # enums
    return value


def public_state(aggregate: Aggregate) -> dict[str, Any]:
    """An aggregate's attributes, without eventsourcing's private bookkeeping, as plain JSON values."""
    out = {k: _plain(v) for k, v in vars(aggregate).items() if not k.startswith("_")}
    out["id"] = str(aggregate.id)
    out["version"] = aggregate.version
    out["created_on"] = _plain(aggregate.created_on)
    out["modified_on"] = _plain(aggregate.modified_on)
    return out


def _last_entry(reader: LogReader, aggregate_id: UUID | str, as_of: AsOf) -> Entry | None:
    entries = [e for e in history.all_entries(reader, aggregate_id, stop=as_of.position) if as_of.includes(e)]
    return entries[-1] if entries else None


def aggregate_at(
    app: Application[UUID], reader: LogReader, aggregate_id: UUID, as_of: AsOf
) -> tuple[PastState, Aggregate] | None:
    """The aggregate as it was at ``as_of``; None if it did not exist yet."""
    last = _last_entry(reader, aggregate_id, as_of)
    if last is None:
        return None
    version = last.envelope.originator_version
    aggregate: Aggregate = app.repository.get(aggregate_id, version=version)
    past = PastState(str(aggregate_id), version, last.position, last.envelope.time, public_state(aggregate))
    return past, aggregate


def state_at(app: Application[UUID], reader: LogReader, aggregate_id: UUID, as_of: AsOf) -> PastState | None:
    found = aggregate_at(app, reader, aggregate_id, as_of)
    return None if found is None else found[0]


@dataclass(frozen=True)
class Usage:
    """Nova's quota usage of a project (``instances``, ``cores``, ``ram``), as it was."""

    project_id: str
    instances: int
    cores: int
    ram: int
    servers: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "project_id": self.project_id,
            "instances": self.instances,
            "cores": self.cores,
            "ram": self.ram,
            "servers": self.servers,
        }


def project_usage(app: Application[UUID], reader: LogReader, project_id: str, as_of: AsOf) -> Usage:
    """What a project's servers used at ``as_of``: every server requested for it by then, replayed to
    that moment; deleted servers count no more."""
    servers: list[str] = []
    cores = ram = 0
    filt = reader.layout.topic_filter(REQUESTED_TOPIC)
    start = 1
    while True:
        msgs = reader.read_messages(start, history.MAX_PAGE, stop=as_of.position, subject_filter=filt)
        for m in msgs:
            entry = history.entry_of(m)
            if entry.envelope.topic != REQUESTED_TOPIC or not as_of.includes(entry):
                continue
            data = entry.envelope.to_dict().get("data") or {}
            if data.get("project_id") != project_id:
                continue
            found = aggregate_at(app, reader, UUID(str(entry.envelope.originator_id)), as_of)
            if found is None:
                continue
            instance = found[1]
            assert isinstance(instance, Instance)
            if instance.deleted:
                continue
            servers.append(str(instance.id))
            cores += int(instance.flavor.get("vcpus", 0))
            ram += int(instance.flavor.get("ram", 0))
        if len(msgs) < history.MAX_PAGE:
            break
        start = history.entry_of(msgs[-1]).position + 1
    return Usage(project_id, len(servers), cores, ram, servers)
