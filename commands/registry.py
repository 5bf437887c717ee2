"""Registry: the names (and small integer ids) that must be unique among one kind of resource.

Uniqueness across aggregates cannot be checked by one aggregate alone, so each kind that needs it
(flavor names, host aggregate names) has one ``Registry`` aggregate. A create appends the new
resource's creation and the registry's ``NameTaken`` in one atomic append, under the registry's
optimistic-concurrency check: two creates racing for one name cannot both succeed. The registry
also numbers what it registers, for resources Nova identifies by integers (host aggregates).
"""

from __future__ import annotations

from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from commands.errors import AlreadyExists

_NS = uuid5(NAMESPACE_URL, "urn:stratus:registry")

FLAVOR_NAMES = "flavor-names"
AGGREGATE_NAMES = "aggregate-names"
PROVIDER_NAMES = "provider-names"  # Placement providers that are not compute hosts


def registry_id(kind: str) -> UUID:
    return uuid5(_NS, kind)


class Registry(Aggregate):
    """Names (and small integer ids) unique among one kind of resource, taken atomically with it."""

    @staticmethod
    def create_id(kind: str) -> UUID:
        return registry_id(kind)

    class Opened(Aggregate.Created):
        """A registry of unique names for one kind of resource was opened."""

        kind: str

    @event(Opened)
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.names: dict[str, str] = {}  # name -> owner (the resource's id)
        self.last_number = 0

    def take(self, name: str, owner: str, what: str) -> int:
        """Register ``name`` for ``owner``; the number it got. ``what`` names the kind in errors."""
        current = self.names.get(name)
        if current is not None and current != owner:
            raise AlreadyExists(f"{what} with name {name} already exists.")
        if current == owner:
            return self.last_number
        self._name_taken(name, owner, self.last_number + 1)
        return self.last_number

    class NameTaken(Aggregate.Event):
        """A name was registered for a resource, with the number the registry gave it."""

        name: str
        owner: str
        number: int

    @event(NameTaken)
    def _name_taken(self, name: str, owner: str, number: int) -> None:
        self.names = {**self.names, name: owner}
        self.last_number = number

    def release(self, name: str, owner: str) -> None:
        if self.names.get(name) == owner:
            self._name_released(name)

    class NameReleased(Aggregate.Event):
        """A name was released (its resource was deleted or renamed)."""

        name: str

    @event(NameReleased)
    def _name_released(self, name: str) -> None:
        self.names = {k: v for k, v in self.names.items() if k != name}
