"""Every resource provider (compute host) as the log has it, folded in this process.

Before each request ``refresh()`` reads the Host events appended since the last one (one batched
read filtered to ``<prefix>.host.>``) and folds them into ``Host`` aggregates with the domain's own
code, so "capacity" and "used" mean here exactly what they mean when a claim is decided. A read
therefore sees every write acknowledged before it started: no read-model lag.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import orjson
from eventsourcing.domain import Aggregate, CanMutateAggregate
from eventsourcing.utils import get_topic

from commands.app import Stratus
from commands.host import Host
from commands.instance import Instance
from stratus.eventstore.envelope import decode_message

_BATCH = 1000


class ProviderView:
    def __init__(self, app: Stratus, batch: int = _BATCH) -> None:
        self._app = app
        self._batch = batch
        recorder = app.recorder
        self._filter = recorder.layout.kind_filter("host")  # type: ignore[attr-defined]
        self._lock = threading.Lock()
        self._hosts: dict[UUID, Host] = {}
        # How many times the claims of each server (or migration) changed: its consumer generation.
        self._generations: dict[str, int] = {}
        self.position = 0  # the log position of the last event read (any kind)

    def refresh(self) -> dict[UUID, Host]:
        """Catch up with the log; a snapshot of every provider (do not mutate the hosts)."""
        with self._lock:
            head = self._app.recorder.max_notification_id() or 0
            while self.position < head:
                msgs = self._app.recorder.read_messages(  # type: ignore[attr-defined]
                    self.position + 1, self._batch, stop=head, subject_filter=self._filter
                )
                last = self.position
                for msg in msgs:
                    notification, _ = decode_message(msg)
                    self._apply(self._app.mapper.to_domain_event(notification))
                    last = notification.id
                if len(msgs) < self._batch:
                    break
                self.position = last
            self.position = max(self.position, head)
            return dict(self._hosts)

    def _apply(self, event: object) -> None:
        if not isinstance(event, CanMutateAggregate):
            return
        current = self._hosts.get(event.originator_id)
        if current is not None and event.originator_version <= current.version:
            return  # read already
        if current is None and not isinstance(event, Aggregate.Created):
            return  # cannot happen when reading from the start: every host begins with Registered
        host = event.mutate(current)  # type: ignore[arg-type]
        if isinstance(host, Host):
            self._hosts[event.originator_id] = host
        for consumer in _claim_consumers(event):
            self._generations[consumer] = self._generations.get(consumer, 0) + 1

    def consumer_generation(self, consumer: str) -> int | None:
        """A server's (or migration's) consumer generation: +1 at every change of its claims (its
        placement, a move's hand-over and take-back, its release); None if it never held one."""
        with self._lock:
            return self._generations.get(consumer)

    def get(self, provider_uuid: str) -> Host | None:
        try:
            uid = UUID(provider_uuid)
        except ValueError:
            return None
        return self.refresh().get(uid)


# The Host events that change a server's or a migration's claims, and the fields naming them.
_CLAIM_EVENTS = {
    "InstanceClaimed": ("instance_id",),
    "InstanceReleased": ("instance_id",),
    "ClaimHandedToMigration": ("instance_id", "migration_id"),
    "ClaimTakenBack": ("migration_id", "instance_id"),
    "MigrationReleased": ("migration_id",),
}


def _claim_consumers(event: object) -> tuple[str, ...]:
    fields = _CLAIM_EVENTS.get(type(event).__name__, ())
    return tuple(str(getattr(event, f)) for f in fields)


class ConsumerOwners:
    """Which project and user each consumer belongs to: the servers (``Instance.Requested``) and
    Placement's own consumers (``Consumer`` events), folded from the log on demand, for
    ``GET /usages?project_id=``. Reads only when asked, from where it stopped."""

    def __init__(self, app: Stratus, batch: int = _BATCH) -> None:
        self._app = app
        self._batch = batch
        layout = app.recorder.layout  # type: ignore[attr-defined]
        self._servers = layout.topic_filter(get_topic(Instance.Requested))  # type: ignore[attr-defined]
        self._consumers = layout.kind_filter("consumer")
        self._lock = threading.Lock()
        self._owners: dict[str, tuple[str, str, str]] = {}  # consumer uuid -> (project, user, type)
        self._uuids: dict[str, str] = {}  # Consumer aggregate id -> its consumer uuid
        self._position = 0

    def refresh(self) -> dict[str, tuple[str, str, str]]:
        with self._lock:
            head = self._app.recorder.max_notification_id() or 0
            for subject_filter in (self._servers, self._consumers):
                for envelope, payload in self._read(subject_filter, head):
                    aggregate = str(envelope.originator_id)
                    if subject_filter == self._servers:
                        consumer, kind = aggregate, "INSTANCE"  # a server is its own consumer
                    else:
                        consumer = self._uuids.setdefault(aggregate, payload.get("consumer_uuid", ""))
                        kind = payload.get("consumer_type") or self._owners.get(consumer, ("", "", ""))[2]
                    if consumer and "project_id" in payload:
                        self._owners[consumer] = (payload["project_id"], payload["user_id"], kind)
            self._position = max(self._position, head)
            return dict(self._owners)

    def _read(self, subject_filter: str, head: int) -> Iterator[tuple[Any, dict[str, Any]]]:
        position = self._position
        while position < head:
            msgs = self._app.recorder.read_messages(  # type: ignore[attr-defined]
                position + 1, self._batch, stop=head, subject_filter=subject_filter
            )
            for msg in msgs:
                notification, envelope = decode_message(msg)
                position = notification.id
                yield envelope, orjson.loads(notification.state)
            if len(msgs) < self._batch:
                return
