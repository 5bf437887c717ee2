"""Every resource provider (compute hosts and the providers operators created) as the log has it,
folded in this process.

Before each request ``refresh()`` reads the Host and ResourceProvider events appended since the last
one (batched reads filtered to ``<prefix>.host.>`` and ``<prefix>.resourceprovider.>``) and folds
them into aggregates with the domain's own code, so "capacity" and "used" mean here exactly what they
mean when a claim is decided. A read therefore sees every write acknowledged before it started: no
read-model lag.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any, Protocol
from uuid import UUID

import orjson
from eventsourcing.domain import Aggregate, CanMutateAggregate
from eventsourcing.utils import get_topic

from commands.app import Stratus
from commands.host import Host
from commands.instance import Instance
from commands.provider import ResourceProvider
from commands.resource_provider import Provider
from stratus.audit.history import LogReader
from stratus.eventstore.envelope import decode_message

_BATCH = 1000


class ProviderLog(LogReader, Protocol):
    """What the view reads of the log: pages of messages by subject, its layout, and its head (the
    composition root hands in the process's JetStream recorder)."""

    def max_notification_id(self) -> int | None: ...


def read(log: LogReader, subject_filter: str, after: int, head: int, batch: int) -> Iterator[tuple[Any, Any]]:
    """The (notification, envelope) of every event matching ``subject_filter`` after position
    ``after`` up to ``head``, read in batches."""
    position = after
    while position < head:
        msgs = log.read_messages(position + 1, batch, stop=head, subject_filter=subject_filter)
        for msg in msgs:
            notification, envelope = decode_message(msg)
            position = notification.id
            yield notification, envelope
        if len(msgs) < batch:
            return


class ProviderView:
    """The resource providers (hosts and operators' providers) folded from the log in this process."""

    def __init__(self, app: Stratus, log: ProviderLog, batch: int = _BATCH) -> None:
        """``app``: whose mapper turns the log's messages into events; ``log``: where they are read."""
        self._app = app
        self._log = log
        self._batch = batch
        self._filters = (log.layout.kind_filter("host"), log.layout.kind_filter("resourceprovider"))
        self._lock = threading.Lock()
        self._providers: dict[UUID, Host | ResourceProvider] = {}
        # How many times the claims of each server (or migration) changed: its consumer generation.
        self._generations: dict[str, int] = {}
        self.position = 0  # the log position of the last event read (any kind)

    def refresh(self) -> dict[UUID, Host | ResourceProvider]:
        """Catch up with the log; a snapshot of every provider (do not mutate them)."""
        with self._lock:
            head = self._log.max_notification_id() or 0
            for subject_filter in self._filters:
                for notification, _ in read(self._log, subject_filter, self.position, head, self._batch):
                    self._apply(self._app.mapper.to_domain_event(notification))
            self.position = max(self.position, head)
            return {k: p for k, p in self._providers.items() if not getattr(p, "deleted", False)}

    def _apply(self, event: object) -> None:
        if not isinstance(event, CanMutateAggregate):
            return
        current = self._providers.get(event.originator_id)
        if current is not None and event.originator_version <= current.version:
            return  # read already
        if current is None and not isinstance(event, Aggregate.Created):
            return  # cannot happen when reading from the start: every provider begins created
        provider = event.mutate(current)  # type: ignore[arg-type]
        if isinstance(provider, Host | ResourceProvider):
            self._providers[event.originator_id] = provider
        for consumer in _claim_consumers(event):
            self._generations[consumer] = self._generations.get(consumer, 0) + 1

    def consumer_generation(self, consumer: str) -> int | None:
        """A server's (or migration's) consumer generation: +1 at every change of its claims (its
        placement, a move's hand-over and take-back, its release); None if it never held one."""
        with self._lock:
            return self._generations.get(consumer)

    def get(self, provider_uuid: str) -> Host | ResourceProvider | None:
        try:
            uid = UUID(provider_uuid)
        except ValueError:
            return None
        return self.refresh().get(uid)


def root_of(providers: Mapping[UUID, Provider], provider: Provider) -> str:
    """The uuid of the root of ``provider``'s tree (itself when it has no parent)."""
    while provider.parent_provider_uuid is not None:
        parent = providers.get(UUID(provider.parent_provider_uuid))
        if parent is None:
            break
        provider = parent
    return str(provider.id)


def has_children(providers: Mapping[UUID, Provider], provider_uuid: str) -> bool:
    return any(p.parent_provider_uuid == provider_uuid for p in providers.values())


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

    def __init__(self, log: ProviderLog, batch: int = _BATCH) -> None:
        self._log = log
        self._batch = batch
        self._servers = log.layout.topic_filter(get_topic(Instance.Requested))
        self._consumers = log.layout.kind_filter("consumer")
        self._lock = threading.Lock()
        self._owners: dict[str, tuple[str, str, str]] = {}  # consumer uuid -> (project, user, type)
        self._uuids: dict[str, str] = {}  # Consumer aggregate id -> its consumer uuid
        self._position = 0

    def refresh(self) -> dict[str, tuple[str, str, str]]:
        with self._lock:
            head = self._log.max_notification_id() or 0
            for subject_filter in (self._servers, self._consumers):
                for notification, envelope in read(
                    self._log, subject_filter, self._position, head, self._batch
                ):
                    payload = orjson.loads(notification.state)
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
