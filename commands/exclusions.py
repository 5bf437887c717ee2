"""The operator's exclusions of refused events: the way out of a forged event in a history.

A worker (and the API) loads an aggregate only if every event of its history passes the trust
check (docs/trust.md); a forged event therefore freezes the server, usage or host whose history
holds it. The log is append-only, so the operator does not remove the event: ``stratus trust
exclude <position>`` records that it is excluded, and loads then fold it as nothing
(``stratus.eventstore.signing.Excluded``), as the projector, which never applied it, has it. One
aggregate holds every exclusion; only an ``admin`` identity's exclusions count.
"""

from __future__ import annotations

from uuid import UUID

from eventsourcing.domain import Aggregate, event

from commands.errors import AlreadyExists
from stratus.eventstore.signing import EXCLUSIONS_ID


class Exclusions(Aggregate):
    """Every refused event the operator excluded, by log position."""

    @staticmethod
    def create_id() -> UUID:
        return EXCLUSIONS_ID

    class Opened(Aggregate.Created):
        """The record of excluded events was opened."""

    @event(Opened)
    def __init__(self) -> None:
        self.excluded: dict[int, str] = {}  # position -> the excluded event's id

    def exclude(self, position: int, event_id: str, aggregate_id: str, reason: str) -> None:
        """Record that the refused event ``event_id``, at ``position`` in ``aggregate_id``'s history,
        counts as nothing from now on (``reason``: why, the operator's words)."""
        if position in self.excluded:
            raise AlreadyExists(f"The event at position {position} is excluded already.")
        self._event_excluded(position, event_id, aggregate_id, reason)

    class EventExcluded(Aggregate.Event):
        """The operator excluded a refused event: loads fold it as nothing."""

        position: int
        event_id: str
        aggregate_id: str
        reason: str

    @event(EventExcluded)
    def _event_excluded(self, position: int, event_id: str, aggregate_id: str, reason: str) -> None:
        self.excluded = {**self.excluded, position: event_id}
