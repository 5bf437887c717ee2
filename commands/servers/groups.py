"""Server groups (Nova's os-server-groups): each counted in its project's ``server_groups`` ledger,
within the project's quota."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from commands import loaders
from commands.ledger import SERVER_GROUPS
from commands.server_group import ServerGroup
from commands.unit_of_work import Result, UnitOfWork, retried


@dataclass(frozen=True)
class CreateServerGroup:
    """Create a server group with an (anti-)affinity policy."""

    name: str
    project_id: str
    user_id: str
    policy: str
    rules: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DeleteServerGroup:
    """Delete a server group (``project_id`` None: an admin)."""

    group_id: str
    project_id: str | None


@retried
def create_server_group(cmd: CreateServerGroup, uow: UnitOfWork) -> Result:
    """A new group, admitted to the project's ledger in the same append."""
    # made anew each time: a save that lost the race took the pending events of the last one
    group = ServerGroup.create(cmd.name, cmd.project_id, cmd.user_id, cmd.policy, cmd.rules)
    ledger = uow.ledger(SERVER_GROUPS, cmd.project_id)
    ledger.admit(str(group.id), uow.limits(cmd.project_id))
    return Result(str(group.id), uow.save(group, ledger))


@retried
def delete_server_group(cmd: DeleteServerGroup, uow: UnitOfWork) -> Result:
    """The group is deleted and leaves its project's ledger."""
    group = loaders.server_group(uow, cmd.group_id, cmd.project_id)
    group.delete()
    ledger = uow.ledger(SERVER_GROUPS, group.project_id)
    ledger.release(cmd.group_id)
    return Result(cmd.group_id, uow.save(group, ledger))
