"""Nova's os-services: a compute host's service enabled or disabled, and forced down or not."""

from __future__ import annotations

from dataclasses import dataclass

from commands import loaders
from commands.errors import NotFound
from commands.unit_of_work import Result, UnitOfWork, retried

COMPUTE_BINARY = "nova-compute"


@dataclass(frozen=True)
class SetServiceStatus:
    """os-services: ``disabled`` None/``forced_down`` None leave that part as it is."""

    host: str
    binary: str
    disabled: bool | None = None
    disabled_reason: str | None = None
    forced_down: bool | None = None


def set_service_status(cmd: SetServiceStatus, uow: UnitOfWork) -> Result:
    """Only the compute service is known (Nova: 404 for any other binary)."""
    if cmd.binary != COMPUTE_BINARY:
        raise NotFound(f"Service {cmd.binary} on host {cmd.host} could not be found.")
    return _set_status(cmd, uow)


@retried
def _set_status(cmd: SetServiceStatus, uow: UnitOfWork) -> Result:
    try:
        host = loaders.host(uow, cmd.host)
    except NotFound:
        raise NotFound(f"Service {cmd.binary} on host {cmd.host} could not be found.") from None
    if cmd.disabled is True:
        host.disable(cmd.disabled_reason)
    elif cmd.disabled is False:
        host.enable()
    if cmd.forced_down is not None:
        host.force_down(cmd.forced_down)
    return Result(str(host.id), uow.save(host))
