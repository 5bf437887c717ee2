"""A server on its host: the hypervisor worker starts spawning it, finishes, or records a fault."""

from __future__ import annotations

from dataclasses import dataclass

from commands import loaders
from commands.servers import releases
from commands.states import VmState
from commands.unit_of_work import Result, UnitOfWork, retried


@dataclass(frozen=True)
class StartSpawning:
    """The host begins to build the server's guest."""

    server_id: str
    hostname: str


@dataclass(frozen=True)
class FinishSpawning:
    """The server's guest runs (or is in ``power_state``)."""

    server_id: str
    power_state: int


@dataclass(frozen=True)
class FailInstance:
    """Record that the server could not be built or scheduled."""

    server_id: str
    code: str
    message: str
    details: str = ""


@retried
def start_spawning(cmd: StartSpawning, uow: UnitOfWork) -> Result:
    """The server is building on ``hostname``."""
    inst = loaders.instance(uow, cmd.server_id, appended=True)
    inst.start_spawning(cmd.hostname)
    return Result(cmd.server_id, uow.save(inst))


@retried
def finish_spawning(cmd: FinishSpawning, uow: UnitOfWork) -> Result:
    """The server is built."""
    inst = loaders.instance(uow, cmd.server_id, appended=True)
    inst.finish_spawning(cmd.power_state)
    return Result(cmd.server_id, uow.save(inst))


@retried(on_usage=True)
def fail_instance(cmd: FailInstance, uow: UnitOfWork) -> Result:
    """Record a fault; any resources the instance holds on its host are released with it."""
    inst = loaders.instance(uow, cmd.server_id)
    inst.fail(cmd.code, cmd.message, cmd.details)
    if inst.vm_state == VmState.SHELVED_OFFLOADED:  # an unshelve found no host: still shelved
        return Result(cmd.server_id, uow.save(inst))
    released = (*releases.on_host(uow, inst), *releases.from_quota(uow, inst, resources_only=True))
    return Result(cmd.server_id, uow.save(inst, *released))
