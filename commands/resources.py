"""Which aggregate holds a resource's history: the API's and auditors' names → aggregate ids.

Servers are their own aggregate id; hosts and flavors are addressed by their names and derive their
aggregate ids from them; projects, users and roles by their Keystone ids (a project's history holds
its role grants). ``aggregate`` takes any aggregate id as it is, so every kind of aggregate
(including kinds added later) has a history without a change here.
"""

from __future__ import annotations

from uuid import UUID

from commands.errors import InvalidInput, NotFound
from commands.flavor import flavor_aggregate_id
from commands.host import host_aggregate_id
from commands.identity import aggregate_id as identity_aggregate_id

KINDS = ("server", "host", "flavor", "project", "user", "role", "aggregate")


def _uuid(value: str) -> UUID | None:
    try:
        return UUID(value)
    except ValueError:
        return None


def aggregate_id(kind: str, resource_id: str) -> UUID | str:
    """The aggregate id of ``kind``/``resource_id``; ``InvalidInput`` for an unknown kind or bad id."""
    if kind == "server":
        server = _uuid(resource_id)
        if server is None:
            raise InvalidInput(f"Invalid server id {resource_id[:64]!r}: a UUID")
        return server
    if kind == "host":
        return host_aggregate_id(resource_id)
    if kind == "flavor":
        return flavor_aggregate_id(resource_id)
    if kind in ("project", "user", "role"):  # Keystone ids; role grants are events of the project
        try:
            return identity_aggregate_id(resource_id)
        except NotFound:
            raise InvalidInput(f"Invalid {kind} id {resource_id[:64]!r}: 32 hex digits") from None
    if kind == "aggregate":
        found = _uuid(resource_id)
        return found if found is not None else resource_id
    raise InvalidInput(f"Unknown resource kind {kind[:32]!r}: one of {', '.join(KINDS)}")
