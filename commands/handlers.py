"""Command handlers: load the decision state from the log, call one domain method, append.

Every handler returns the id it acted on and the log position of its last event, so that a client
can read its own write. A handler that loses an optimistic-concurrency race re-decides against the
new state a few times before reporting a conflict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import NAMESPACE_URL, UUID, uuid4, uuid5

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError

from commands.app import Stratus
from commands.base import HandlerBase, Result, exists
from commands.errors import AlreadyExists, DomainError, InvalidInput, NotFound
from commands.flavor import Flavor, flavor_aggregate_id
from commands.group_commit import GroupCommit
from commands.host import Host, Resources, host_aggregate_id
from commands.image import ACTIVE, Image, canonical_image_id, image_aggregate_id, legacy_aggregate_id
from commands.instance import Instance, check_metadata_items
from commands.keypair import KeyPair, keypair_aggregate_id
from commands.network import FixedNetwork, Network
from commands.quota import check as quota_check
from commands.quota import quota_aggregate_id
from commands.server_group import GroupMembership, ServerGroup, membership_id
from commands.states import VmState
from commands.usage import ProjectUsage, usage_aggregate_id
from stratus.context import CommandContext, acting_per_event, current

_REQUEST_NS = uuid5(NAMESPACE_URL, "urn:stratus:server-request")
A = TypeVar("A", bound=Aggregate)
T = TypeVar("T")


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
    description: str | None = None
    key_name: str | None = None
    # Where the user data is filed ({"id", "size"}: a random id, no digest); the data stays off the log.
    user_data: dict[str, Any] | None = None
    # "auto" (every configured network), "none", or the ids of the networks to attach.
    networks: str | tuple[str, ...] = "auto"
    tags: tuple[str, ...] = ()
    count: int = 1  # servers to create; more than one: named <name>-1 .. <name>-N, as Nova does
    reservation_id: str | None = None
    # Admins may boot any project's private image (Glance shows them every image).
    any_image: bool = False
    # Admins may boot private flavors without access (Nova's admin context sees every flavor).
    any_flavor: bool = False
    # The server group the servers join (the ``group`` scheduler hint).
    group: str | None = None
    # Nova's accessIPv4/accessIPv6 (addresses the owner says the server is reached at), the
    # hostname (2.90; None: derived from the name) and OS-DCF:diskConfig.
    access_ip_v4: str | None = None
    access_ip_v6: str | None = None
    hostname: str | None = None
    disk_config: str = "MANUAL"
    # The host an admin asked for (2.74's host/hypervisor_hostname): the scheduler places only there.
    requested_host: str | None = None


@dataclass(frozen=True)
class ServersCreated(Result):
    """The first server's id and the request's last position, and every server the request created."""

    ids: tuple[str, ...] = ()
    reservation_id: str | None = None


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


@dataclass(frozen=True)
class _Create:
    """A create request, checked and ready to be decided (with others of its project)."""

    cmd: CreateServer
    context: CommandContext  # the request's, for its own events in a group's append
    flavor: Flavor
    image: Image | None
    keypair: KeyPair | None
    ids: list[UUID]


class _Refused(Exception):
    """A create in a group was refused: the group is decided again without it."""

    def __init__(self, index: int, error: DomainError) -> None:
        super().__init__(str(error))
        self.index, self.error = index, error


# A group of creates is one atomic append, and a NATS atomic batch carries at most 1000 messages
# (stratus.eventstore.MAX_EVENTS_PER_APPEND; the domain does not import the event store): room is
# left for a usage epoch's close and the next one's opening.
MOST_EVENTS_PER_CREATE_GROUP = 990


def _create_events(request: tuple[CreateServer, CommandContext]) -> int:
    """The most events a create appends: per server its charge, its request and its address."""
    return 3 * request[0].count


def _one(outcomes: Sequence[ServersCreated | BaseException]) -> ServersCreated:
    [outcome] = outcomes
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


class Handlers(HandlerBase):
    def __init__(
        self,
        app: Stratus,
        *,
        new_id: Callable[[], UUID] = uuid4,
        attempts: int = 5,
        network: FixedNetwork | None = None,
    ):
        super().__init__(app, attempts=attempts)
        self._new_id = new_id
        self.network = network  # the fixed network servers get an address on (None: no addresses)
        self._usage_epochs: dict[str, int] = {}  # project -> the epoch of its usage last seen current
        # concurrent creates per project, decided and appended together
        self._creates: GroupCommit[tuple[CreateServer, CommandContext], ServersCreated] = GroupCommit(
            self._decide_creates, weight=_create_events, max_weight=MOST_EVENTS_PER_CREATE_GROUP
        )

    def instance(
        self,
        server_id: str,
        project_id: str | None = None,
        *,
        deleted_too: bool = False,
        appended: bool = False,
    ) -> Instance:
        """The server (of ``project_id`` when given); a deleted one only with ``deleted_too``.
        ``appended``: the command appends to it (see ``HandlerBase._find``)."""
        what = f"Instance {server_id}"
        try:
            uid = UUID(server_id)
        except ValueError:
            raise NotFound(f"{what} could not be found.") from None
        inst = self._get(Instance, uid, what, appended=appended)
        if (inst.deleted and not deleted_too) or (project_id is not None and inst.project_id != project_id):
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
    def create_server(self, cmd: CreateServer) -> ServersCreated:
        """Record ``cmd.count`` server requests and their fixed addresses in one atomic append.

        Creates in one project that arrive while another is being decided here are decided together
        and appended in one atomic append (``GroupCommit``), each event stamped with the context of
        its own request; a create with an idempotency key or a server group is decided alone (its
        conflicts mean something of their own)."""
        if cmd.idempotency_key or cmd.group is not None:
            return _one(self._decide_creates([(cmd, current())]))
        return self._creates.submit(cmd.project_id, (cmd, current()))

    def _decide_creates(
        self, requests: list[tuple[CreateServer, CommandContext]]
    ) -> list[ServersCreated | BaseException]:
        """Decide creates of one project together: one read of their flavors, usage and quota, one
        append. A request that is refused (quota, a missing image...) gets its error and the rest are
        decided again without it; a lone request's error is raised."""
        project = requests[0][0].project_id
        outcomes: dict[int, ServersCreated | BaseException] = {}
        reads = {
            *(flavor_aggregate_id(cmd.flavor_ref) for cmd, _ in requests),
            usage_aggregate_id(project, self._usage_epochs.get(project, 0)),
            quota_aggregate_id(project),
        }
        with self.app.recorder.prefetched(reads):  # one hop for them all
            prepared: dict[int, _Create] = {}
            for i, (cmd, context) in enumerate(requests):
                try:
                    prepared[i] = self._prepare_create(cmd, context)
                except DomainError as e:
                    if len(requests) == 1:
                        raise
                    outcomes[i] = e
            while prepared:
                try:
                    outcomes.update(self._retrying_on_usage(lambda: self._decide_group(prepared)))
                    break
                except _Refused as refused:
                    if len(prepared) == 1:
                        raise refused.error from None
                    outcomes[refused.index] = refused.error
                    del prepared[refused.index]
        return [outcomes[i] for i in range(len(requests))]

    def _prepare_create(self, cmd: CreateServer, context: CommandContext) -> _Create:
        """What a create needs checked before it is decided: its flavor, image, key pair, new ids."""
        flavor = self.flavor(cmd.flavor_ref)
        if not (cmd.any_flavor or flavor.accessible_to(cmd.project_id)):
            raise NotFound(f"Flavor {cmd.flavor_ref} could not be found.")
        image = self._bootable_image(cmd, flavor.ram, flavor.disk) if cmd.image_ref else None
        keypair = self._server_keypair(cmd.user_id, cmd.key_name) if cmd.key_name else None
        if cmd.requested_host is not None:
            try:
                self.host(cmd.requested_host)
            except NotFound:
                raise InvalidInput(f"Compute host {cmd.requested_host} could not be found.") from None
        if cmd.idempotency_key:
            first = uuid5(_REQUEST_NS, f"{cmd.project_id}\x00{cmd.idempotency_key}")
            ids = [first] + [uuid5(first, str(i)) for i in range(1, cmd.count)]
        else:
            ids = [self._new_id() for _ in range(cmd.count)]
        return _Create(cmd, context, flavor, image, keypair, ids)

    def _decide_group(self, creates: Mapping[int, _Create]) -> dict[int, ServersCreated]:
        """Charge the project's usage and request the servers of every create, in one append."""
        project = next(iter(creates.values())).cmd.project_id
        books = self._usage_to_save(self.usage(project))
        limits = self.limits(project)
        network: Network | None = None  # loaded once, shared by every new server in the group
        aggregates: list[Aggregate] = []
        contexts: dict[tuple[str, int], CommandContext] = {}
        for index, c in creates.items():
            try:
                check_metadata_items(len(c.cmd.metadata), limits["metadata_items"])
                books[-1].charge([str(i) for i in c.ids], c.flavor.vcpus, c.flavor.ram, limits)
                network = self._network_for(c.cmd.networks, network)
                new = self._requested(c, network) + self._joined_group(c.cmd, c.ids)
            except DomainError as e:
                raise _Refused(index, e) from e
            for agg in (*books, *([network] if network is not None else []), *new):
                for event in agg.pending_events:
                    contexts.setdefault((str(event.originator_id), event.originator_version), c.context)
            aggregates += new
        shared = [*books, *([network] if network is not None else [])]
        try:
            with acting_per_event(contexts):
                position = self._save(*shared, *aggregates)
        except IntegrityError:
            repeated = {
                i: c for i, c in creates.items() if c.cmd.idempotency_key and exists(self.app, c.ids[0])
            }
            if repeated:  # a retried create (only ever decided alone)
                return {i: self._repeated_create(c.cmd, c.ids) for i, c in repeated.items()}
            raise  # lost a race for the usage or an address: decide again
        return {
            i: ServersCreated(str(c.ids[0]), position, tuple(map(str, c.ids)), c.cmd.reservation_id)
            for i, c in creates.items()
        }

    def _requested(self, c: _Create, network: Network | None) -> list[Aggregate]:
        cmd = c.cmd
        instances: list[Aggregate] = []
        for index, server_uuid in enumerate(c.ids):
            ports = [network.allocate(str(server_uuid))] if network is not None else []
            instances.append(
                Instance.request(
                    server_uuid,
                    name=cmd.name if cmd.count == 1 else f"{cmd.name}-{index + 1}",
                    project_id=cmd.project_id,
                    user_id=cmd.user_id,
                    flavor=c.flavor.snapshot_for_instance(),
                    image_ref=c.image.image_id if c.image is not None else "",
                    metadata=dict(cmd.metadata),
                    availability_zone=cmd.availability_zone,
                    request_key=cmd.idempotency_key,
                    description=cmd.description,
                    image=c.image.boot_snapshot() if c.image is not None else None,
                    key_name=c.keypair.name if c.keypair is not None else None,
                    key_data=c.keypair.public_key if c.keypair is not None else None,
                    user_data=dict(cmd.user_data) if cmd.user_data else None,
                    ports=ports,
                    tags=list(dict.fromkeys(cmd.tags)),
                    reservation_id=cmd.reservation_id,
                    launch_index=index,
                    scheduling={"num_instances": cmd.count, "group_id": cmd.group}
                    | ({"host": cmd.requested_host} if cmd.requested_host else {}),
                    access_ip_v4=cmd.access_ip_v4,
                    access_ip_v6=cmd.access_ip_v6,
                    hostname=cmd.hostname,
                    disk_config=cmd.disk_config,
                )
            )
        return instances

    def _retrying_on_usage(self, decide: Callable[[], T]) -> T:
        """Every create, fault and delete in a project appends to its usage: many may race, each
        re-decides after a short random wait."""
        return self._retrying(decide, attempts=max(self._attempts, 100), backoff=0.01)

    def usage(self, project_id: str) -> ProjectUsage:
        """The project's quota usage as the log has it: its current epoch (a project without servers
        has none yet). A stale remembered epoch only costs walking forward to the current one."""
        epoch = self._usage_epochs.get(project_id, 0)
        while True:
            try:
                agg: Aggregate = self.app.repository.get(usage_aggregate_id(project_id, epoch))
            except AggregateNotFoundError:
                if epoch == 0:
                    return ProjectUsage.open(project_id)
                raise  # a closed epoch always has a successor: the two are appended together
            if not isinstance(agg, ProjectUsage):
                raise NotFound(f"Quota usage of project {project_id} could not be found.")
            if not agg.closed:
                if len(self._usage_epochs) > 100_000:
                    self._usage_epochs.clear()
                self._usage_epochs[project_id] = epoch
                return agg
            epoch += 1

    def _usage_to_save(self, usage: ProjectUsage) -> list[ProjectUsage]:
        """``usage`` and, once its epoch is full, the next epoch it is carried into (its changes then
        move there: the caller charges or releases on the last element)."""
        return [usage, usage.carry_forward()] if usage.full and not usage.closed else [usage]


    def _repeated_create(self, cmd: CreateServer, ids: list[UUID]) -> ServersCreated:
        existing = self._get(Instance, ids[0], f"Instance {ids[0]}")
        if existing.request_key != cmd.idempotency_key or existing.project_id != cmd.project_id:
            raise InvalidInput("Idempotency key reused for a different request")
        position = self.app.recorder.max_notification_id() or 0
        return ServersCreated(str(ids[0]), position, tuple(map(str, ids)), existing.reservation_id)

    def image(self, image_id: str) -> Image:
        """The image whose id is ``image_id`` (in its own namespace, or where version 1 kept it)."""
        what = f"Image {image_id}"
        try:
            canonical = canonical_image_id(image_id)
        except ValueError:
            raise NotFound(f"{what} could not be found.") from None
        image = self._find(Image, image_aggregate_id(canonical))
        if image is None:
            legacy = self._find(Image, legacy_aggregate_id(canonical))
            image = legacy if legacy is not None and legacy.image_id == canonical else None
        if image is None:
            raise NotFound(f"{what} could not be found.")
        return image

    def _bootable_image(self, cmd: CreateServer, ram: int, disk: int) -> Image:
        return self.bootable_image(cmd.image_ref, None if cmd.any_image else cmd.project_id, ram, disk)

    def bootable_image(self, image_ref: str, scope: str | None, ram: int, disk: int) -> Image:
        """The image a server boots (with its kernel and ramdisk): existing, visible to ``scope``
        (None: any), active, and within the flavor's memory and disk (Nova: 400)."""
        image = self._visible_image(image_ref, scope)
        for part in (image.kernel_id, image.ramdisk_id):
            if part:
                self._visible_image(part, scope)
        if ram < image.min_ram:
            raise InvalidInput("Flavor's memory is too small for requested image.")
        if disk and disk < image.min_disk:
            raise InvalidInput("Flavor's disk is too small for requested image.")
        return image

    def _visible_image(self, image_id: str, project_id: str | None) -> Image:
        image = self.image(image_id)
        if not image.visible_to(project_id):
            raise NotFound(f"Image {image_id} could not be found.")
        if image.status != ACTIVE:
            raise InvalidInput(f"Image {image_id} is not active.")
        return image

    def keypair(self, user_id: str, name: str) -> KeyPair:
        keypair = self._get(KeyPair, keypair_aggregate_id(user_id, name), f"Keypair {name}")
        keypair.ensure_exists()
        return keypair

    def _server_keypair(self, user_id: str, name: str) -> KeyPair:
        try:
            return self.keypair(user_id, name)
        except NotFound:
            raise InvalidInput("Invalid key_name provided.") from None

    def _network_for(self, networks: str | tuple[str, ...], loaded: Network | None = None) -> Network | None:
        """The network a new server gets an address on, loaded (or defined on first use); None: none.
        ``loaded``: the network as already loaded for this decision (shared by its servers)."""
        config = self.network
        if networks == "none" or (networks == "auto" and config is None):
            return None
        if not isinstance(networks, str):
            if len(set(networks)) != len(networks):
                raise InvalidInput(f"Network {networks[0]} is duplicated.")
            unknown = [n for n in networks if config is None or n != str(config.id)]
            if unknown:
                raise NotFound(f"Network {unknown[0]} could not be found.")
            if not networks:
                return None
        assert config is not None
        if loaded is not None:
            return loaded
        try:
            agg: Aggregate = self.app.repository.get(config.id)
        except AggregateNotFoundError:
            return Network.define(config)
        if not isinstance(agg, Network):
            raise NotFound(f"Network {config.id} could not be found.")
        return agg

    def delete_server(self, cmd: DeleteServer) -> Result:
        def decide() -> Result:
            inst = self.instance(cmd.server_id, cmd.project_id)
            inst.request_delete(admin=cmd.project_id is None)  # a locked server: admins only
            if not inst.needs_host_cleanup:
                inst.mark_deleted()  # never reached a host: nothing to tear down (Nova's local delete)
                released = (*self._released_on_networks(inst), *self._released_from_quota(inst))
                return Result(cmd.server_id, self._save(inst, *released, *self._left_group(inst)))
            return Result(cmd.server_id, self._save(inst))

        return self._retrying_on_usage(decide)

    # -- scheduler and hypervisor commands ------------------------------------------------------
    def place_instance(self, cmd: PlaceInstance) -> Result:
        """Claim the instance's resources on a host and record the placement, atomically."""

        def decide() -> Result:
            inst = self.instance(cmd.server_id)
            host = self.host(cmd.hostname)
            host.claim(inst.server_id, Resources.of_flavor(inst.flavor))
            inst.schedule(host.hostname)
            group = self.server_group_of(inst.server_id)
            if group is not None:  # a hard (anti-)affinity refuses the host here, under its own check
                group.record_placement(inst.server_id, host.hostname)
            return Result(cmd.server_id, self._save(host, inst, *([group] if group else [])))

        return self._retrying(decide)

    def place_instances(self, cmds: Sequence[PlaceInstance]) -> Result:
        """Place several instances (a multi-create) in one atomic append: all of them or none."""

        def decide() -> Result:
            hosts: dict[str, Host] = {}
            instances: list[Instance] = []
            for cmd in cmds:
                inst = self.instance(cmd.server_id)
                host = hosts.get(cmd.hostname) or self.host(cmd.hostname)
                hosts[cmd.hostname] = host
                host.claim(inst.server_id, Resources.of_flavor(inst.flavor))
                inst.schedule(host.hostname)
                instances.append(inst)
            return Result(cmds[-1].server_id, self._save(*hosts.values(), *instances))

        return self._retrying(decide)

    def record_placements(
        self, aggregates: Sequence[Aggregate], contexts: Mapping[tuple[str, int], CommandContext]
    ) -> int:
        """Append the claims and placements a scheduler decided in one pass over many requests, in one
        atomic append: each event stamped with the context of the request it answers (``contexts``,
        by originator id and version). Raises ``IntegrityError`` if any aggregate moved on meanwhile."""
        with acting_per_event(contexts):
            return self._save(*aggregates)

    def known_version(self, aggregate_id: UUID) -> int | None:
        """The version of the aggregate the event store last saw stored (a hint; None: not known)."""
        return self.app.recorder.known_version(aggregate_id)

    def fail_instance(self, cmd: FailInstance) -> Result:
        """Record a fault; any resources the instance holds on its host are released with it."""

        def decide() -> Result:
            inst = self.instance(cmd.server_id)
            inst.fail(cmd.code, cmd.message, cmd.details)
            if inst.vm_state == VmState.SHELVED_OFFLOADED:  # an unshelve found no host: still shelved
                return Result(cmd.server_id, self._save(inst))
            released = (*self._released_on_host(inst), *self._released_from_quota(inst, resources_only=True))
            return Result(cmd.server_id, self._save(inst, *released))

        return self._retrying_on_usage(decide)

    def start_spawning(self, cmd: StartSpawning) -> Result:
        def decide() -> Result:
            inst = self.instance(cmd.server_id, appended=True)
            inst.start_spawning(cmd.hostname)
            return Result(cmd.server_id, self._save(inst))

        return self._retrying(decide)

    def finish_spawning(self, cmd: FinishSpawning) -> Result:
        def decide() -> Result:
            inst = self.instance(cmd.server_id, appended=True)
            inst.finish_spawning(cmd.power_state)
            return Result(cmd.server_id, self._save(inst))

        return self._retrying(decide)

    def finish_deletion(self, cmd: FinishDeletion) -> Result:
        """The host has torn the guest down: the instance is gone and its resources are free."""

        def decide() -> Result:
            inst = self.instance(cmd.server_id)
            inst.mark_deleted()
            released = (
                *self._released_on_host(inst),
                *self._released_on_networks(inst),
                *self._released_from_quota(inst),
                *self._left_group(inst),
            )
            return Result(cmd.server_id, self._save(inst, *released))

        return self._retrying_on_usage(decide)

    def _released_on_host(self, inst: Instance) -> Sequence[Host]:
        """The claims the instance holds: on its host and, while it moves, on the other side too
        (the destination's claim, the source's migration claim)."""
        move = inst.migration or {}
        hosts = []
        for hostname in dict.fromkeys(h for h in (inst.host, move.get("source"), move.get("dest")) if h):
            host = self.host(hostname)
            host.release(inst.server_id)
            if move:
                host.release_migration(move["id"])
            if host.pending_events:
                hosts.append(host)
        return hosts

    # -- server groups --------------------------------------------------------------------------
    def server_group_of(self, instance_id: str) -> ServerGroup | None:
        """The group the instance joined when it was created (None: none, or the group is deleted)."""
        try:
            membership: Aggregate = self.app.repository.get(membership_id(instance_id))
            if not isinstance(membership, GroupMembership):
                return None
            group: Aggregate = self.app.repository.get(UUID(membership.group_id))
        except AggregateNotFoundError:
            return None
        return group if isinstance(group, ServerGroup) and not group.deleted else None

    def _joined_group(self, cmd: CreateServer, ids: Sequence[UUID]) -> list[Aggregate]:
        """The group and the membership records new servers add, within ``server_group_members``."""
        if cmd.group is None:
            return []
        what = f"Instance group {cmd.group}"
        try:
            group = self._get(ServerGroup, UUID(cmd.group), what)
        except ValueError:
            raise NotFound(f"{what} could not be found.") from None
        group.ensure_visible(cmd.project_id)
        limits = self.limits(cmd.project_id)
        quota_check(limits, {"server_group_members": len(group.members)}, {"server_group_members": len(ids)})
        memberships: list[Aggregate] = []
        for server_uuid in ids:
            group.add_member(str(server_uuid))
            memberships.append(GroupMembership(instance_id=str(server_uuid), group_id=cmd.group))
        return [group, *memberships]

    def _left_group(self, inst: Instance) -> Sequence[ServerGroup]:
        group = self.server_group_of(inst.server_id)
        if group is None or inst.server_id not in group.members:
            return ()
        group.remove_member(inst.server_id)
        return (group,)

    def _released_from_quota(self, inst: Instance, resources_only: bool = False) -> Sequence[ProjectUsage]:
        """The project's usage, giving back what the instance held (only its cores and RAM on a fault)."""
        usage = self.usage(inst.project_id)
        held = inst.server_id in usage.holdings
        books = self._usage_to_save(usage) if held else [usage]
        current = books[-1]
        server = inst.server_id
        changed = current.release_resources(server) if resources_only else current.release(server)
        return books if changed else ()

    def _released_on_networks(self, inst: Instance) -> Sequence[Network]:
        """The networks whose addresses the (deleted) instance gives back."""
        networks = []
        for port in inst.ports:
            network = self._get(Network, UUID(port["network_id"]), f"Network {port['network_id']}")
            if network.release(inst.server_id):
                networks.append(network)
        return networks
