"""Command handlers for a server's power actions and locks, and for their outcome on the host.

Each is load → one domain call → append, re-deciding when a concurrent writer got there first
(``Handlers._retrying``). Two actions racing on one server cannot both be recorded: both loaded the
same version, only the first append matches it, the second re-decides against the new state and
is refused by the guard (409) instead of being half-applied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate

from commands import loaders
from commands.actions import ACTIONS
from commands.census import GuestCensus, census_id
from commands.errors import InvalidInput, NotFound
from commands.handlers import Handlers
from commands.host_aggregate import DEFAULT_ZONE
from commands.instance import Instance
from commands.unit_of_work import Result


@dataclass(frozen=True)
class RequestAction:
    """start, stop, reboot (soft), reboot_hard, pause, unpause, suspend or resume a server."""

    server_id: str
    project_id: str | None  # None: an admin acting across projects
    action: str
    admin: bool = False


@dataclass(frozen=True)
class RebuildServer:
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
    server_id: str
    project_id: str | None
    admin: bool = False
    zone: tuple[str | None] | None = None  # the zone to pin it to ((None,): unpin); None: as it was
    host: str | None = None  # where an admin wants it (2.91)


@dataclass(frozen=True)
class PinZone:
    server_id: str
    project_id: str | None
    zone: str | None  # None: unpin


@dataclass(frozen=True)
class FinishAction:
    server_id: str
    action: str
    power_state: int


@dataclass(frozen=True)
class FailAction:
    server_id: str
    action: str
    code: str
    message: str
    details: str = ""
    power_state: int | None = None  # what the host saw; None: unknown, keep the last known
    broken: bool = False  # the guest is gone or unusable: the server goes to ERROR


@dataclass(frozen=True)
class ResetServerState:
    server_id: str
    state: str  # "active" or "error"


@dataclass(frozen=True)
class LockServer:
    server_id: str
    project_id: str | None
    admin: bool = False
    reason: str | None = None


@dataclass(frozen=True)
class UnlockServer:
    server_id: str
    project_id: str | None
    admin: bool = False


class LifecycleHandlers:
    def __init__(self, handlers: Handlers) -> None:
        self._h = handlers

    def request_action(self, cmd: RequestAction) -> Result:
        if cmd.action not in ACTIONS:
            raise InvalidInput(f"Unknown action {cmd.action}")

        def decide() -> Result:
            inst = self._h.instance(cmd.server_id, cmd.project_id)
            inst.request_action(cmd.action, admin=cmd.admin)
            return Result(cmd.server_id, self._h.uow.save(inst))

        return self._h.uow.retrying(decide)

    def rebuild(self, cmd: RebuildServer) -> Result:
        """Rebuild the server from ``image_ref`` (visible to its project, active, fits its flavor)."""

        def decide() -> Result:
            inst = self._h.instance(cmd.server_id, cmd.project_id)
            scope = None if cmd.admin else inst.project_id
            ram, disk = int(inst.flavor["ram"]), int(inst.flavor["disk"])
            image = loaders.bootable_image(self._h.uow, cmd.image_ref, scope, ram, disk)
            inst.rebuild(image.image_id, image.boot_snapshot(), admin=cmd.admin)
            inst.update(cmd.name, cmd.description, clear_description=cmd.clear_description, fields=cmd.fields)
            if cmd.metadata is not None:
                inst.update_metadata(
                    cmd.metadata, replace=True, limit=self._h.limits(inst.project_id)["metadata_items"]
                )
            key: tuple[str | None, str | None] | None = None
            if cmd.key_name == "":
                key = (None, None)
            elif cmd.key_name is not None:
                keypair = loaders.server_keypair(self._h.uow, cmd.user_id, cmd.key_name)
                key = (keypair.name, keypair.public_key)
            inst.change_boot_data(key, cmd.user_data)
            return Result(cmd.server_id, self._h.uow.save(inst))

        return self._h.uow.retrying(decide)

    def unshelve(self, cmd: UnshelveServer) -> Result:
        def decide() -> Result:
            inst = self._h.instance(cmd.server_id, cmd.project_id)
            if cmd.host is not None:
                try:
                    self._h.host(cmd.host)
                except NotFound:
                    raise InvalidInput(f"Compute host {cmd.host} could not be found.") from None
            inst.unshelve(admin=cmd.admin, zone=cmd.zone, host=cmd.host)
            return Result(cmd.server_id, self._h.uow.save(inst))

        return self._h.uow.retrying(decide)

    def finish_offload(self, cmd: FinishAction) -> Result:
        """The host shelved and removed the guest: the shelve is done, the server leaves the host and
        the host's resources are free, in one append (the quota stays charged, as Nova's)."""

        def decide() -> Result:
            inst = self._h.instance(cmd.server_id)
            inst.finish_action(cmd.action, cmd.power_state)
            host = self._h.host(inst.host) if inst.host else None
            inst.offload()
            if host is None:
                return Result(cmd.server_id, self._h.uow.save(inst))
            host.release(inst.server_id)
            return Result(cmd.server_id, self._h.uow.save(inst, host))

        return self._h.uow.retrying(decide)

    def finish_action(self, cmd: FinishAction) -> Result:
        def decide() -> Result:
            inst = self._h.instance(cmd.server_id)
            inst.finish_action(cmd.action, cmd.power_state)
            return Result(cmd.server_id, self._h.uow.save(inst))

        return self._h.uow.retrying(decide)

    def fail_action(self, cmd: FailAction) -> Result:
        def decide() -> Result:
            inst = self._h.instance(cmd.server_id)
            inst.fail_action(
                cmd.action,
                cmd.code,
                cmd.message,
                cmd.details,
                power_state=cmd.power_state,
                broken=cmd.broken,
            )
            return Result(cmd.server_id, self._h.uow.save(inst))

        return self._h.uow.retrying(decide)

    def pin_zone(self, cmd: PinZone) -> Result:
        def decide() -> Result:
            inst = self._h.instance(cmd.server_id, cmd.project_id)
            host = self._h.host(inst.host) if inst.host else None
            inst.pin_zone(cmd.zone, host.availability_zone(DEFAULT_ZONE) if host is not None else "")
            return Result(cmd.server_id, self._h.uow.save(inst))

        return self._h.uow.retrying(decide)

    def reset_state(self, cmd: ResetServerState) -> Result:
        def decide() -> Result:
            inst = self._h.instance(cmd.server_id)
            inst.reset_state(cmd.state)
            return Result(cmd.server_id, self._h.uow.save(inst))

        return self._h.uow.retrying(decide)

    def lock(self, cmd: LockServer) -> Result:
        def decide() -> Result:
            inst = self._h.instance(cmd.server_id, cmd.project_id)
            inst.lock(admin=cmd.admin, reason=cmd.reason)
            return Result(cmd.server_id, self._h.uow.save(inst))

        return self._h.uow.retrying(decide)

    def unlock(self, cmd: UnlockServer) -> Result:
        def decide() -> Result:
            inst = self._h.instance(cmd.server_id, cmd.project_id)
            inst.unlock(admin=cmd.admin)
            return Result(cmd.server_id, self._h.uow.save(inst))

        return self._h.uow.retrying(decide)


# -- reconciliation: what the host found --------------------------------------------------------
@dataclass(frozen=True)
class SyncPowerState:
    """What the host saw of a server's guest. ``observe``, when given, looks again once the server
    has been loaded, so that what is compared is never older than the log state it is compared
    with (a spawn or action finishing in between then makes the append conflict and re-decide)."""

    server_id: str
    observed: int
    missing: bool = False
    observe: Callable[[], tuple[int, bool]] | None = None


@dataclass(frozen=True)
class RecordStrayGuests:
    """The strays a host runs now (uuid -> (name, power state, action)); others are forgotten."""

    hostname: str
    strays: dict[str, tuple[str, int, str]]


class ReconciliationHandlers:
    def __init__(self, handlers: Handlers) -> None:
        self._h = handlers

    def sync_power_state(self, cmd: SyncPowerState) -> bool:
        """True when the host's report changed the server (an event was recorded)."""

        def decide() -> bool:
            inst = self._h.instance(cmd.server_id)
            observed, missing = cmd.observe() if cmd.observe is not None else (cmd.observed, cmd.missing)
            if not inst.sync_power_state(observed, missing=missing):
                return False
            self._h.uow.save(inst)
            return True

        return self._h.uow.retrying(decide)

    def deleted_instance(self, server_id: str) -> bool:
        """The log holds this instance, deleted (its guest, if any, is an orphan)."""
        try:
            agg: Aggregate = self._h.app.repository.get(UUID(server_id))
        except (AggregateNotFoundError, ValueError):
            return False
        return isinstance(agg, Instance) and agg.deleted

    def record_strays(self, cmd: RecordStrayGuests) -> bool:
        def decide() -> bool:
            try:
                census: Aggregate = self._h.app.repository.get(census_id(cmd.hostname))
            except AggregateNotFoundError:
                census = GuestCensus.open(cmd.hostname)
            assert isinstance(census, GuestCensus)
            changed = census.forget_gone(set(cmd.strays))
            for uuid, (name, power_state, action) in sorted(cmd.strays.items()):
                changed = census.found_stray(uuid, name, power_state, action) or changed
            if changed:
                self._h.uow.save(census)
            return changed

        return self._h.uow.retrying(decide)
