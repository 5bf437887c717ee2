"""Creating servers: ``CreateServer`` records ``count`` server requests and their fixed addresses,
charged to the project's quota usage, in one atomic append.

Creates in one project that arrive while another is being decided in this process are decided
together and appended in one atomic append (``GroupCommit``), each event stamped with the context of
its own request; a create with an idempotency key or a server group is decided alone (its conflicts
mean something of their own).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError

from commands import loaders
from commands.errors import DomainError, InvalidInput, NotFound
from commands.flavor import Flavor, flavor_aggregate_id
from commands.group_commit import GroupCommit
from commands.image import Image
from commands.instance import Instance, check_metadata_items
from commands.keypair import KeyPair
from commands.network import FixedNetwork, Network
from commands.quota import DEFAULT_CLASS, quota_aggregate_id, quota_class_id
from commands.quota import check as quota_check
from commands.server_group import GroupMembership
from commands.unit_of_work import Result, UnitOfWork, exists
from commands.usage import usage_aggregate_id
from stratus.context import CommandContext, acting_per_event, current

_REQUEST_NS = uuid5(NAMESPACE_URL, "urn:stratus:server-request")

# A group of creates is one atomic append, and a NATS atomic batch carries at most 1000 messages
# (stratus.eventstore.MAX_EVENTS_PER_APPEND; the domain does not import the event store): room is
# left for a usage epoch's close and the next one's opening.
MOST_EVENTS_PER_CREATE_GROUP = 990


@dataclass(frozen=True)
class CreateServer:
    """Create one server, or ``count`` of them (Nova's POST /servers)."""

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
    # Nova's config_drive: the guest gets its metadata on an ISO 9660 disk too (docs/metadata.md).
    config_drive: bool = False


@dataclass(frozen=True)
class ServersCreated(Result):
    """The first server's id and the request's last position, and every server the request created."""

    ids: tuple[str, ...] = ()
    reservation_id: str | None = None


CreateGroups = GroupCommit[tuple[CreateServer, CommandContext], ServersCreated]


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


def create_server(cmd: CreateServer, uow: UnitOfWork, create_groups: CreateGroups) -> ServersCreated:
    """Decide the create with the others of its project that arrive meanwhile (``create_groups``),
    or alone when it has an idempotency key or a server group."""
    if cmd.idempotency_key or cmd.group is not None:
        [outcome] = create_groups.decide([(cmd, current())])
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome
    return create_groups.submit(cmd.project_id, (cmd, current()))


def create_groups(uow: UnitOfWork, new_id: Callable[[], UUID], network: FixedNetwork | None) -> CreateGroups:
    """The group commit that decides a process's concurrent creates per project (``network``: the
    fixed network servers get an address on; None: no addresses)."""

    def decide(requests: list[tuple[CreateServer, CommandContext]]) -> list[ServersCreated | BaseException]:
        return _decide_creates(requests, uow, new_id, network)

    return GroupCommit(decide, weight=_create_events, max_weight=MOST_EVENTS_PER_CREATE_GROUP)


def _create_events(request: tuple[CreateServer, CommandContext]) -> int:
    """The most events a create appends: per server its charge, its request and its address."""
    return 3 * request[0].count


def _decide_creates(
    requests: list[tuple[CreateServer, CommandContext]],
    uow: UnitOfWork,
    new_id: Callable[[], UUID],
    network: FixedNetwork | None,
) -> list[ServersCreated | BaseException]:
    """Decide creates of one project together: one read of their flavors, usage and quota, one
    append. A request that is refused (quota, a missing image...) gets its error and the rest are
    decided again without it; a lone request's error is raised."""
    project = requests[0][0].project_id
    outcomes: dict[int, ServersCreated | BaseException] = {}
    reads = {  # what every create loads: its flavor, the project's usage and limits (uow.limits)
        *(flavor_aggregate_id(cmd.flavor_ref) for cmd, _ in requests),
        usage_aggregate_id(project, uow.usage_epochs.get(project, 0)),
        quota_aggregate_id(project),
        quota_class_id(DEFAULT_CLASS),
    }
    with uow.app.recorder.prefetched(reads):  # one hop for them all
        prepared: dict[int, _Create] = {}
        for i, (cmd, context) in enumerate(requests):
            try:
                prepared[i] = _prepare_create(uow, new_id, cmd, context)
            except DomainError as e:
                if len(requests) == 1:
                    raise
                outcomes[i] = e
        while prepared:
            try:
                outcomes.update(uow.retrying_on_usage(lambda: _decide_group(uow, network, prepared)))
                break
            except _Refused as refused:
                if len(prepared) == 1:
                    raise refused.error from None
                outcomes[refused.index] = refused.error
                del prepared[refused.index]
    return [outcomes[i] for i in range(len(requests))]


def _prepare_create(
    uow: UnitOfWork, new_id: Callable[[], UUID], cmd: CreateServer, context: CommandContext
) -> _Create:
    """What a create needs checked before it is decided: its flavor, image, key pair, new ids."""
    flavor = loaders.flavor(uow, cmd.flavor_ref)
    if not (cmd.any_flavor or flavor.accessible_to(cmd.project_id)):
        raise NotFound(f"Flavor {cmd.flavor_ref} could not be found.")
    image = None
    if cmd.image_ref:
        scope = None if cmd.any_image else cmd.project_id
        image = loaders.bootable_image(uow, cmd.image_ref, scope, flavor.ram, flavor.disk)
    keypair = loaders.server_keypair(uow, cmd.user_id, cmd.key_name) if cmd.key_name else None
    if cmd.requested_host is not None:
        try:
            loaders.host(uow, cmd.requested_host)
        except NotFound:
            raise InvalidInput(f"Compute host {cmd.requested_host} could not be found.") from None
    if cmd.idempotency_key:
        first = uuid5(_REQUEST_NS, f"{cmd.project_id}\x00{cmd.idempotency_key}")
        ids = [first] + [uuid5(first, str(i)) for i in range(1, cmd.count)]
    else:
        ids = [new_id() for _ in range(cmd.count)]
    return _Create(cmd, context, flavor, image, keypair, ids)


def _decide_group(
    uow: UnitOfWork, config: FixedNetwork | None, creates: Mapping[int, _Create]
) -> dict[int, ServersCreated]:
    """Charge the project's usage and request the servers of every create, in one append."""
    project = next(iter(creates.values())).cmd.project_id
    books = loaders.usage_to_save(loaders.usage(uow, project))
    limits = uow.limits(project)
    network: Network | None = None  # loaded once, shared by every new server in the group
    aggregates: list[Aggregate] = []
    contexts: dict[tuple[str, int], CommandContext] = {}
    for index, c in creates.items():
        try:
            check_metadata_items(len(c.cmd.metadata), limits["metadata_items"])
            books[-1].charge([str(i) for i in c.ids], c.flavor.vcpus, c.flavor.ram, limits)
            network = _network_for(uow, config, c.cmd.networks, network)
            new = _requested(c, network) + _joined_group(uow, c.cmd, c.ids)
        except DomainError as e:
            raise _Refused(index, e) from e
        for agg in (*books, *([network] if network is not None else []), *new):
            for event in agg.pending_events:
                contexts.setdefault((str(event.originator_id), event.originator_version), c.context)
        aggregates += new
    shared = [*books, *([network] if network is not None else [])]
    try:
        with acting_per_event(contexts):
            position = uow.save(*shared, *aggregates)
    except IntegrityError:
        repeated = {i: c for i, c in creates.items() if c.cmd.idempotency_key and exists(uow.app, c.ids[0])}
        if repeated:  # a retried create (only ever decided alone)
            return {i: _repeated_create(uow, c.cmd, c.ids) for i, c in repeated.items()}
        raise  # lost a race for the usage or an address: decide again
    return {
        i: ServersCreated(str(c.ids[0]), position, tuple(map(str, c.ids)), c.cmd.reservation_id)
        for i, c in creates.items()
    }


def _requested(c: _Create, network: Network | None) -> list[Aggregate]:
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
                config_drive=cmd.config_drive or _config_drive_mandatory(c.image),
            )
        )
    return instances


def _config_drive_mandatory(image: Image | None) -> bool:
    """Nova's ``configdrive.required_by``: an image property may force the config drive."""
    return image is not None and image.properties.get("img_config_drive") == "mandatory"


def _repeated_create(uow: UnitOfWork, cmd: CreateServer, ids: list[UUID]) -> ServersCreated:
    existing = uow.get(Instance, ids[0], f"Instance {ids[0]}")
    if existing.request_key != cmd.idempotency_key or existing.project_id != cmd.project_id:
        raise InvalidInput("Idempotency key reused for a different request")
    position = uow.app.recorder.max_notification_id() or 0
    return ServersCreated(str(ids[0]), position, tuple(map(str, ids)), existing.reservation_id)


def _network_for(
    uow: UnitOfWork, config: FixedNetwork | None, networks: str | tuple[str, ...], loaded: Network | None
) -> Network | None:
    """The network a new server gets an address on, loaded (or defined on first use); None: none.
    ``loaded``: the network as already loaded for this decision (shared by its servers)."""
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
        agg: Aggregate = uow.app.repository.get(config.id)
    except AggregateNotFoundError:
        return Network.define(config)
    if not isinstance(agg, Network):
        raise NotFound(f"Network {config.id} could not be found.")
    return agg


def _joined_group(uow: UnitOfWork, cmd: CreateServer, ids: Sequence[UUID]) -> list[Aggregate]:
    """The group and the membership records new servers add, within ``server_group_members``."""
    if cmd.group is None:
        return []
    group = loaders.server_group(uow, cmd.group, cmd.project_id)
    limits = uow.limits(cmd.project_id)
    quota_check(limits, {"server_group_members": len(group.members)}, {"server_group_members": len(ids)})
    memberships: list[Aggregate] = []
    for server_uuid in ids:
        group.add_member(str(server_uuid))
        memberships.append(GroupMembership(instance_id=str(server_uuid), group_id=cmd.group))
    return [group, *memberships]
