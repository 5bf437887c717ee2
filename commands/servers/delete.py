"""Deleting a server: the request (the API), and the host's word that the guest is torn down."""

from __future__ import annotations

from dataclasses import dataclass

from commands import loaders
from commands.servers import releases
from commands.unit_of_work import Result, UnitOfWork, retried


@dataclass(frozen=True)
class DeleteServer:
    """Delete a server (Nova's DELETE /servers/{id})."""

    server_id: str
    project_id: str | None  # None: an admin acting across projects


@dataclass(frozen=True)
class FinishDeletion:
    """The host has torn the server's guest down."""

    server_id: str


@retried(on_usage=True)
def delete_server(cmd: DeleteServer, uow: UnitOfWork) -> Result:
    """Ask the server's host to delete it; a server that never reached a host is gone at once, with
    its addresses, quota and group membership (Nova's local delete)."""
    inst = loaders.instance(uow, cmd.server_id, cmd.project_id)
    inst.request_delete(admin=cmd.project_id is None)  # a locked server: admins only
    if not inst.needs_host_cleanup:
        inst.mark_deleted()  # never reached a host: nothing to tear down
        released = (*releases.on_networks(uow, inst), *releases.from_quota(uow, inst))
        return Result(cmd.server_id, uow.save(inst, *released, *releases.from_group(uow, inst)))
    return Result(cmd.server_id, uow.save(inst))


@retried(on_usage=True)
def finish_deletion(cmd: FinishDeletion, uow: UnitOfWork) -> Result:
    """The instance is gone and its resources are free."""
    inst = loaders.instance(uow, cmd.server_id)
    inst.mark_deleted()
    released = (
        *releases.on_host(uow, inst),
        *releases.on_networks(uow, inst),
        *releases.from_quota(uow, inst),
        *releases.from_group(uow, inst),
    )
    return Result(cmd.server_id, uow.save(inst, *released))
