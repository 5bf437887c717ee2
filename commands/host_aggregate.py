"""HostAggregate: a named set of compute hosts with metadata (os-aggregates).

An aggregate whose metadata has ``availability_zone`` defines that availability zone: its hosts
are in it. Each host keeps the zones its aggregates give it (``Host.ZoneAssigned``), appended
atomically with the aggregate's own event, so the scheduler learns a host's zone from the host's
events alone. Aggregates are numbered (Nova's ids are integers) and their names are unique, both
through the ``aggregate-names`` registry.
"""

from __future__ import annotations

from uuid import UUID

from eventsourcing.domain import Aggregate, event

from commands.errors import AlreadyExists, ConflictingState, InvalidInput, NotFound

AZ_KEY = "availability_zone"
# Nova's zone for hosts in no availability zone ([DEFAULT] default_availability_zone).
DEFAULT_ZONE = "nova"
# Nova's zone for services that are not compute hosts (the scheduler).
INTERNAL_ZONE = "internal"


def _check_name(field: str, value: str | None) -> None:
    if value is None:
        return
    if not value.strip() or len(value) > 255 or value != value.strip():
        raise InvalidInput(f"Invalid input for field/attribute {field}: 1-255 characters, not padded")


class HostAggregate(Aggregate):
    """A named set of compute hosts with metadata, and maybe an availability zone."""

    class Created(Aggregate.Created):
        """A host aggregate was created (with an availability zone, or none)."""

        name: str
        number: int
        availability_zone: str | None

    @event(Created)
    def __init__(self, name: str, number: int, availability_zone: str | None) -> None:
        self.name = name
        self.number = number
        self.metadata: dict[str, str] = {AZ_KEY: availability_zone} if availability_zone else {}
        self.hosts: list[str] = []
        self.deleted = False

    @classmethod
    def create(
        cls, aggregate_id: UUID, name: str, number: int, availability_zone: str | None
    ) -> HostAggregate:
        """A new aggregate under ``aggregate_id`` (the id its number was registered for)."""
        _check_name("name", name)
        _check_name(AZ_KEY, availability_zone)
        if availability_zone == INTERNAL_ZONE:
            raise InvalidInput(f"Invalid input for field/attribute {AZ_KEY}: {INTERNAL_ZONE} is reserved")
        return cls._create(
            cls.Created,
            id=aggregate_id,
            name=name,
            number=number,
            availability_zone=availability_zone,
        )

    @property
    def availability_zone(self) -> str | None:
        return self.metadata.get(AZ_KEY)

    def ensure_exists(self) -> None:
        if self.deleted:
            raise NotFound(f"Aggregate {self.number} could not be found.")

    def rename(self, name: str) -> None:
        self.ensure_exists()
        _check_name("name", name)
        if name != self.name:
            self._renamed(name)

    class Renamed(Aggregate.Event):
        """A host aggregate was renamed."""

        name: str

    @event(Renamed)
    def _renamed(self, name: str) -> None:
        self.name = name

    def set_metadata(self, metadata: dict[str, str | None]) -> None:
        """Set keys; a ``None`` value removes the key (Nova's set_metadata)."""
        self.ensure_exists()
        for key, value in metadata.items():
            if not key or len(key) > 255:
                raise InvalidInput("Invalid input for field/attribute metadata key: 1-255 characters")
            if value is not None and len(value) > 255:
                raise InvalidInput(f"Invalid input for field/attribute metadata.{key}: 0-255 characters")
        if metadata.get(AZ_KEY) == INTERNAL_ZONE:
            raise InvalidInput(f"Invalid input for field/attribute {AZ_KEY}: {INTERNAL_ZONE} is reserved")
        changed = {k: v for k, v in metadata.items() if self.metadata.get(k) != v}
        if changed:
            self._metadata_set(changed)

    class MetadataSet(Aggregate.Event):
        """Metadata keys of a host aggregate were set (null: the key was removed)."""

        metadata: dict[str, str | None]

    @event(MetadataSet)
    def _metadata_set(self, metadata: dict[str, str | None]) -> None:
        merged = {**self.metadata, **metadata}
        self.metadata = {k: v for k, v in merged.items() if v is not None}

    def add_host(self, hostname: str) -> None:
        self.ensure_exists()
        if hostname in self.hosts:
            raise AlreadyExists(f"Aggregate {self.number} already has host {hostname}.")
        self._host_added(hostname)

    class HostAdded(Aggregate.Event):
        """A compute host was added to a host aggregate."""

        host: str

    @event(HostAdded)
    def _host_added(self, host: str) -> None:
        self.hosts = [*self.hosts, host]

    def remove_host(self, hostname: str) -> None:
        self.ensure_exists()
        if hostname not in self.hosts:
            raise NotFound(f"Cannot remove host {hostname} in aggregate {self.number}")
        self._host_removed(hostname)

    class HostRemoved(Aggregate.Event):
        """A compute host was removed from a host aggregate."""

        host: str

    @event(HostRemoved)
    def _host_removed(self, host: str) -> None:
        self.hosts = [h for h in self.hosts if h != host]

    def delete(self) -> None:
        self.ensure_exists()
        if self.hosts:
            raise ConflictingState(
                f"Cannot remove aggregate {self.number}. Reason: Host aggregate is not empty."
            )
        self._deleted()

    class Deleted(Aggregate.Event):
        """A host aggregate was deleted."""

    @event(Deleted)
    def _deleted(self) -> None:
        self.deleted = True
