"""A server's power actions, rebuild, shelve and unshelve, zone pins, state resets and locks, and
their outcome on the host.

Each is load → one domain call → append. Two actions racing on one server cannot both be recorded:
both loaded the same version, only the first append matches it, the second re-decides against the new
state and is refused by the guard (409) instead of being half-applied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from commands import loaders
from commands.actions import ACTIONS
from commands.errors import InvalidInput, NotFound
from commands.host_aggregate import DEFAULT_ZONE
from commands.unit_of_work import Result, UnitOfWork, retried


@dataclass(frozen=True)
class RequestAction:
    """start, stop, reboot (soft), reboot_hard, pause, unpause, suspend or resume a server."""

    server_id: str
    project_id: str | None  # None: an admin acting across projects
    action: str
    admin: bool = False


@dataclass(frozen=True)
class RebuildServer:
    """Rebuild a server from an image (Nova's rebuild action)."""

    server_id: str
    project_id: str | None  # the caller's scope (None: an admin acting on any project's server)
    image_ref: str
    admin: bool = False
    # What else a rebuild may change: name, description, metadata (replaced), the described fields
    # (Instance.update), the key pair (2.54; "" drops it) and the user data (2.57; a 1-tuple, None drops it).
    name: str | None = None
    description: str | None = None
    clear_description: bool = False
    metadata: dict[str, str] | None = None
    fields: dict[str, Any] = field(default_factory=dict)
    key_name: str | None = None
    user_data: tuple[dict[str, Any] | None] | None = None
    user_id: str = ""  # whose key pair ``key_name`` names


@dataclass(frozen=True)
class UnshelveServer:
    """Bring a shelved server back onto a host."""

    server_id: str
    project_id: str | None
    admin: bool = False
    zone: tuple[str | None] | None = None  # the zone to pin it to ((None,): unpin); None: as it was
    host: str | None = None  # where an admin wants it (2.91)


@dataclass(frozen=True)
class PinZone:
    """Pin a server to an availability zone, or unpin it."""

    server_id: str
    project_id: str | None
    zone: str | None  # None: unpin


@dataclass(frozen=True)
class FinishAction:
    """The host finished an action on the server's guest."""

    server_id: str
    action: str
    power_state: int


@dataclass(frozen=True)
class FailAction:
    """The host could not carry out an action on the server's guest."""

    server_id: str
    action: str
    code: str
    message: str
    details: str = ""
    power_state: int | None = None  # what the host saw; None: unknown, keep the last known
    broken: bool = False  # the guest is gone or unusable: the server goes to ERROR


@dataclass(frozen=True)
class ResetServerState:
    """An admin sets a server's state (os-resetState)."""

    server_id: str
    state: str  # "active" or "error"


@dataclass(frozen=True)
class LockServer:
    """Lock a server against changes by non-admins (or by anyone but an admin who locked it)."""

    server_id: str
    project_id: str | None
    admin: bool = False
    reason: str | None = None


@dataclass(frozen=True)
class UnlockServer:
    """Unlock a server."""

    server_id: str
    project_id: str | None
    admin: bool = False


@dataclass(frozen=True)
class FinishOffload(FinishAction):
    """The host shelved the server and removed its guest."""


def request_action(cmd: RequestAction, uow: UnitOfWork) -> Result:
    """Ask the server's host to carry out a known action."""
    if cmd.action not in ACTIONS:
        raise InvalidInput(f"Unknown action {cmd.action}")
    return _request_action(cmd, uow)


@retried
def _request_action(cmd: RequestAction, uow: UnitOfWork) -> Result:
    inst = loaders.instance(uow, cmd.server_id, cmd.project_id)
    inst.request_action(cmd.action, admin=cmd.admin)
    return Result(cmd.server_id, uow.save(inst))


@retried
def rebuild(cmd: RebuildServer, uow: UnitOfWork) -> Result:
    """Rebuild the server from ``image_ref`` (visible to its project, active, fits its flavor)."""
    inst = loaders.instance(uow, cmd.server_id, cmd.project_id)
    scope = None if cmd.admin else inst.project_id
    ram, disk = int(inst.flavor["ram"]), int(inst.flavor["disk"])
    image = loaders.bootable_image(uow, cmd.image_ref, scope, ram, disk)
    inst.rebuild(image.image_id, image.boot_snapshot(), admin=cmd.admin)
    inst.update(cmd.name, cmd.description, clear_description=cmd.clear_description, fields=cmd.fields)
    if cmd.metadata is not None:
        inst.update_metadata(cmd.metadata, replace=True, limit=uow.limits(inst.project_id)["metadata_items"])
    key: tuple[str | None, str | None] | None = None
    if cmd.key_name == "":
        key = (None, None)
    elif cmd.key_name is not None:
        keypair = loaders.server_keypair(uow, cmd.user_id, cmd.key_name)
        key = (keypair.name, keypair.public_key)
    inst.change_boot_data(key, cmd.user_data)
    return Result(cmd.server_id, uow.save(inst))


@retried
def unshelve(cmd: UnshelveServer, uow: UnitOfWork) -> Result:
    """The server is to be scheduled again (onto ``host`` if an admin names one)."""
    inst = loaders.instance(uow, cmd.server_id, cmd.project_id)
    if cmd.host is not None:
        try:
            loaders.host(uow, cmd.host)
        except NotFound:
            raise InvalidInput(f"Compute host {cmd.host} could not be found.") from None
    inst.unshelve(admin=cmd.admin, zone=cmd.zone, host=cmd.host)
    return Result(cmd.server_id, uow.save(inst))


@retried
def finish_offload(cmd: FinishOffload, uow: UnitOfWork) -> Result:
    """The shelve is done, the server leaves the host and the host's resources are free, in one
    append (the quota stays charged, as Nova's)."""
    inst = loaders.instance(uow, cmd.server_id)
    inst.finish_action(cmd.action, cmd.power_state)
    host = loaders.host(uow, inst.host) if inst.host else None
    inst.offload()
    if host is None:
        return Result(cmd.server_id, uow.save(inst))
    host.release(inst.server_id)
    return Result(cmd.server_id, uow.save(inst, host))


@retried
def finish_action(cmd: FinishAction, uow: UnitOfWork) -> Result:
    """The action is done; the server is in ``power_state``."""
    inst = loaders.instance(uow, cmd.server_id)
    inst.finish_action(cmd.action, cmd.power_state)
    return Result(cmd.server_id, uow.save(inst))


@retried
def fail_action(cmd: FailAction, uow: UnitOfWork) -> Result:
    """The action failed (the server in ERROR if its guest is ``broken``)."""
    inst = loaders.instance(uow, cmd.server_id)
    inst.fail_action(
        cmd.action, cmd.code, cmd.message, cmd.details, power_state=cmd.power_state, broken=cmd.broken
    )
    return Result(cmd.server_id, uow.save(inst))


@retried
def pin_zone(cmd: PinZone, uow: UnitOfWork) -> Result:
    """Pinned to a zone its host is in (if it has one)."""
    inst = loaders.instance(uow, cmd.server_id, cmd.project_id)
    host = loaders.host(uow, inst.host) if inst.host else None
    inst.pin_zone(cmd.zone, host.availability_zone(DEFAULT_ZONE) if host is not None else "")
    return Result(cmd.server_id, uow.save(inst))


@retried
def reset_state(cmd: ResetServerState, uow: UnitOfWork) -> Result:
    """The server is ACTIVE or ERROR, whatever it was doing."""
    inst = loaders.instance(uow, cmd.server_id)
    inst.reset_state(cmd.state)
    return Result(cmd.server_id, uow.save(inst))


@retried
def lock(cmd: LockServer, uow: UnitOfWork) -> Result:
    """The server is locked (with a reason, if given)."""
    inst = loaders.instance(uow, cmd.server_id, cmd.project_id)
    inst.lock(admin=cmd.admin, reason=cmd.reason)
    return Result(cmd.server_id, uow.save(inst))


@retried
def unlock(cmd: UnlockServer, uow: UnitOfWork) -> Result:
    """The server is unlocked."""
    inst = loaders.instance(uow, cmd.server_id, cmd.project_id)
    inst.unlock(admin=cmd.admin)
    return Result(cmd.server_id, uow.save(inst))
