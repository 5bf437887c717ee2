"""Command handlers: load the decision state from the log, call one domain method, append.

Every handler returns the id it acted on and the log position of its last event, so that a client
can read its own write. A handler that loses an optimistic-concurrency race re-decides against the
new state a few times before reporting a conflict.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar
from uuid import NAMESPACE_URL, UUID, uuid4, uuid5

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError

from commands.app import Stratus
from commands.errors import AlreadyExists, Conflict, InvalidInput, NotFound
from commands.flavor import Flavor, flavor_aggregate_id
from commands.host import Host, Resources, host_aggregate_id
from commands.instance import Instance

_REQUEST_NS = uuid5(NAMESPACE_URL, "urn:stratus:server-request")
A = TypeVar("A", bound=Aggregate)
T = TypeVar("T")


@dataclass(frozen=True)
class Result:
    id: str
    position: int


# -- commands (imperative, small) ----------------------------------------------------------------
@dataclass(frozen=True)
class CreateFlavor:
    flavorid: str
    name: str
    vcpus: int
    ram: int
    disk: int
    ephemeral: int = 0
    swap: int = 0
    rxtx_factor: float = 1.0
    is_public: bool = True
    description: str | None = None


@dataclass(frozen=True)
class RegisterHost:
    hostname: str
    vcpus: int
    memory_mb: int
    disk_gb: int
    hypervisor_type: str = "QEMU"


@dataclass(frozen=True)
class CreateServer:
    name: str
    project_id: str
    user_id: str
    flavor_ref: str
    image_ref: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    availability_zone: str | None = None
    # A client-chosen key that makes a retried create return the first one's server.
    idempotency_key: str | None = None


@dataclass(frozen=True)
class DeleteServer:
    server_id: str
    project_id: str | None  # None: an admin acting across projects


@dataclass(frozen=True)
class PlaceInstance:
    server_id: str
    hostname: str


@dataclass(frozen=True)
class FailInstance:
    server_id: str
    code: str
    message: str
    details: str = ""


@dataclass(frozen=True)
class StartSpawning:
    server_id: str
    hostname: str


@dataclass(frozen=True)
class FinishSpawning:
    server_id: str
    power_state: int


@dataclass(frozen=True)
class FinishDeletion:
    server_id: str


class Handlers:
    def __init__(self, app: Stratus, *, new_id: Callable[[], UUID] = uuid4, attempts: int = 5):
        self.app = app
        self._new_id = new_id
        self._attempts = attempts

    # -- plumbing -------------------------------------------------------------------------------
    def _get(self, cls: type[A], aggregate_id: UUID, what: str) -> A:
        try:
            agg: Aggregate = self.app.repository.get(aggregate_id)
        except AggregateNotFoundError:
            raise NotFound(f"{what} could not be found.") from None
        if not isinstance(agg, cls):
            raise NotFound(f"{what} could not be found.")
        return agg

    def _save(self, *aggregates: Aggregate) -> int:
        recordings = self.app.save(*aggregates)
        if recordings:
            return recordings[-1].notification.id
        return self.app.recorder.max_notification_id() or 0

    def _retrying(self, decide: Callable[[], T]) -> T:
        """Run load-decide-append again when a concurrent writer got there first."""
        for _ in range(self._attempts - 1):
            try:
                return decide()
            except IntegrityError:
                continue
        try:
            return decide()
        except IntegrityError as e:
            raise Conflict("Another request changed this resource at the same time; retry.") from e

    def instance(self, server_id: str, project_id: str | None = None) -> Instance:
        what = f"Instance {server_id}"
        try:
            uid = UUID(server_id)
        except ValueError:
            raise NotFound(f"{what} could not be found.") from None
        inst = self._get(Instance, uid, what)
        if inst.deleted or (project_id is not None and inst.project_id != project_id):
            raise NotFound(f"{what} could not be found.")
        return inst

    def flavor(self, flavorid: str) -> Flavor:
        flavor = self._get(Flavor, flavor_aggregate_id(flavorid), f"Flavor {flavorid}")
        flavor.ensure_usable()
        return flavor

    def host(self, hostname: str) -> Host:
        return self._get(Host, host_aggregate_id(hostname), f"Compute host {hostname}")

    # -- operator commands ----------------------------------------------------------------------
    def create_flavor(self, cmd: CreateFlavor) -> Result:
        flavor = Flavor.create(**vars(cmd))
        try:
            return Result(cmd.flavorid, self._save(flavor))
        except IntegrityError:
            raise AlreadyExists(f"Flavor with ID {cmd.flavorid} already exists.") from None

    def register_host(self, cmd: RegisterHost) -> Result:
        """Register a hypervisor; registering an existing one again is a no-op."""
        host = Host.register(
            cmd.hostname, cmd.vcpus, cmd.memory_mb, cmd.disk_gb, hypervisor_type=cmd.hypervisor_type
        )
        try:
            return Result(str(host.id), self._save(host))
        except IntegrityError:
            existing = self.host(cmd.hostname)
            return Result(str(existing.id), self.app.recorder.max_notification_id() or 0)

    # -- user commands --------------------------------------------------------------------------
    def create_server(self, cmd: CreateServer) -> Result:
        flavor = self.flavor(cmd.flavor_ref)
        if cmd.idempotency_key:
            server_uuid = uuid5(_REQUEST_NS, f"{cmd.project_id}\x00{cmd.idempotency_key}")
        else:
            server_uuid = self._new_id()
        instance = Instance.request(
            server_uuid,
            name=cmd.name,
            project_id=cmd.project_id,
            user_id=cmd.user_id,
            flavor=flavor.snapshot_for_instance(),
            image_ref=cmd.image_ref,
            metadata=dict(cmd.metadata),
            availability_zone=cmd.availability_zone,
            request_key=cmd.idempotency_key,
        )
        try:
            return Result(str(server_uuid), self._save(instance))
        except IntegrityError:
            if not cmd.idempotency_key:
                raise
            existing = self._get(Instance, server_uuid, f"Instance {server_uuid}")
            if existing.request_key != cmd.idempotency_key or existing.project_id != cmd.project_id:
                raise InvalidInput("Idempotency key reused for a different request") from None
            return Result(str(server_uuid), self.app.recorder.max_notification_id() or 0)

    def delete_server(self, cmd: DeleteServer) -> Result:
        def decide() -> Result:
            inst = self.instance(cmd.server_id, cmd.project_id)
            inst.request_delete()
            if not inst.needs_host_cleanup:
                inst.mark_deleted()  # never reached a host: nothing to tear down (Nova's local delete)
            return Result(cmd.server_id, self._save(inst))

        return self._retrying(decide)

    # -- scheduler and hypervisor commands ------------------------------------------------------
    def place_instance(self, cmd: PlaceInstance) -> Result:
        """Claim the instance's resources on a host and record the placement, atomically."""

        def decide() -> Result:
            inst = self.instance(cmd.server_id)
            host = self.host(cmd.hostname)
            host.claim(inst.server_id, Resources.of_flavor(inst.flavor))
            inst.schedule(host.hostname)
            return Result(cmd.server_id, self._save(host, inst))

        return self._retrying(decide)

    def fail_instance(self, cmd: FailInstance) -> Result:
        """Record a fault; any resources the instance holds on its host are released with it."""

        def decide() -> Result:
            inst = self.instance(cmd.server_id)
            inst.fail(cmd.code, cmd.message, cmd.details)
            return Result(cmd.server_id, self._save(inst, *self._released_on_host(inst)))

        return self._retrying(decide)

    def start_spawning(self, cmd: StartSpawning) -> Result:
        def decide() -> Result:
            inst = self.instance(cmd.server_id)
            inst.start_spawning(cmd.hostname)
            return Result(cmd.server_id, self._save(inst))

        return self._retrying(decide)

    def finish_spawning(self, cmd: FinishSpawning) -> Result:
        def decide() -> Result:
            inst = self.instance(cmd.server_id)
            inst.finish_spawning(cmd.power_state)
            return Result(cmd.server_id, self._save(inst))

        return self._retrying(decide)

    def finish_deletion(self, cmd: FinishDeletion) -> Result:
        """The host has torn the guest down: the instance is gone and its resources are free."""

        def decide() -> Result:
            inst = self.instance(cmd.server_id)
            inst.mark_deleted()
            return Result(cmd.server_id, self._save(inst, *self._released_on_host(inst)))

        return self._retrying(decide)

    def _released_on_host(self, inst: Instance) -> Sequence[Host]:
        if inst.host is None:
            return ()
        host = self.host(inst.host)
        host.release(inst.server_id)
        return (host,)

