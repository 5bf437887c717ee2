"""``Handlers``: the bus of one process behind the methods its callers used before there was one.

Each use case lives in a module of its own (``commands.servers.create``, ``commands.flavors``, ...)
and is reached through ``commands.bus``; this class builds that bus over one ``UnitOfWork`` and
keeps the loaders callers read the decision state with (``instance``, ``host``, ``usage``, ...).
New code sends commands: ``handlers.bus.handle(DeleteServer(...))``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from uuid import UUID, uuid4

from eventsourcing.domain import Aggregate

from commands import loaders
from commands.app import Stratus
from commands.bus import MessageBus, bootstrap
from commands.flavor import Flavor
from commands.flavors.create import CreateFlavor, DefineFlavor
from commands.host import Host
from commands.hosts.register import RegisterHost
from commands.image import Image
from commands.instance import Instance
from commands.keypair import KeyPair
from commands.network import FixedNetwork
from commands.server_group import ServerGroup
from commands.servers import scheduling
from commands.servers.create import CreateGroups, CreateServer, ServersCreated
from commands.servers.delete import DeleteServer, FinishDeletion
from commands.servers.scheduling import PlaceInstance, PlaceInstances, RecordPlacements
from commands.servers.spawn import FailInstance, FinishSpawning, StartSpawning
from commands.unit_of_work import Result, UnitOfWork
from commands.usage import ProjectUsage
from stratus.context import CommandContext


class Handlers:
    """A process's command bus and the loaders of the decision state, as methods."""

    def __init__(
        self,
        app: Stratus,
        *,
        new_id: Callable[[], UUID] = uuid4,
        attempts: int = 5,
        network: FixedNetwork | None = None,
    ):
        self.app = app
        self.uow = UnitOfWork(app, attempts=attempts)
        self._new_id = new_id
        self.network = network

    @property
    def network(self) -> FixedNetwork | None:
        """The fixed network servers get an address on (None: no addresses)."""
        network: FixedNetwork | None = self.bus.dependencies["network"]
        return network

    @network.setter
    def network(self, network: FixedNetwork | None) -> None:
        self.bus: MessageBus = bootstrap(self.uow, new_id=self._new_id, network=network)
        # concurrent creates per project, decided and appended together
        self.creates: CreateGroups = self.bus.dependencies["create_groups"]

    # -- the decision state ---------------------------------------------------------------------
    def instance(
        self,
        server_id: str,
        project_id: str | None = None,
        *,
        deleted_too: bool = False,
        appended: bool = False,
    ) -> Instance:
        """``commands.loaders.instance``."""
        return loaders.instance(self.uow, server_id, project_id, deleted_too=deleted_too, appended=appended)

    def flavor(self, flavorid: str) -> Flavor:
        """``commands.loaders.flavor``."""
        return loaders.flavor(self.uow, flavorid)

    def host(self, hostname: str) -> Host:
        """``commands.loaders.host``."""
        return loaders.host(self.uow, hostname)

    def image(self, image_id: str) -> Image:
        """``commands.loaders.image``."""
        return loaders.image(self.uow, image_id)

    def keypair(self, user_id: str, name: str) -> KeyPair:
        """``commands.loaders.keypair``."""
        return loaders.keypair(self.uow, user_id, name)

    def usage(self, project_id: str) -> ProjectUsage:
        """``commands.loaders.usage``."""
        return loaders.usage(self.uow, project_id)

    def limits(self, project_id: str) -> Mapping[str, int]:
        """``UnitOfWork.limits``."""
        return self.uow.limits(project_id)

    def server_group_of(self, instance_id: str) -> ServerGroup | None:
        """``commands.loaders.server_group_of``."""
        return loaders.server_group_of(self.uow, instance_id)

    def known_version(self, aggregate_id: UUID) -> int | None:
        """``commands.servers.scheduling.known_version``."""
        return scheduling.known_version(self.uow, aggregate_id)

    # -- commands -------------------------------------------------------------------------------
    def create_flavor(self, cmd: CreateFlavor) -> Result:
        """A flavor whose id is new (its name unchecked: ``DefineFlavor``)."""
        return self.bus.handle(DefineFlavor(**vars(cmd)))

    def register_host(self, cmd: RegisterHost) -> Result:
        """``commands.hosts.register``."""
        return self.bus.handle(cmd)

    def create_server(self, cmd: CreateServer) -> ServersCreated:
        """``commands.servers.create``."""
        return self.bus.handle(cmd)

    def delete_server(self, cmd: DeleteServer) -> Result:
        """``commands.servers.delete``."""
        return self.bus.handle(cmd)

    def place_instance(self, cmd: PlaceInstance) -> Result:
        """``commands.servers.scheduling``."""
        return self.bus.handle(cmd)

    def place_instances(self, cmds: Sequence[PlaceInstance]) -> Result:
        """``commands.servers.scheduling``: all of them or none."""
        return self.bus.handle(PlaceInstances(tuple(cmds)))

    def record_placements(
        self, aggregates: Sequence[Aggregate], contexts: Mapping[tuple[str, int], CommandContext]
    ) -> int:
        """``commands.servers.scheduling.record_placements``."""
        return self.bus.handle(RecordPlacements(aggregates, contexts))

    def fail_instance(self, cmd: FailInstance) -> Result:
        """``commands.servers.spawn``."""
        return self.bus.handle(cmd)

    def start_spawning(self, cmd: StartSpawning) -> Result:
        """``commands.servers.spawn``."""
        return self.bus.handle(cmd)

    def finish_spawning(self, cmd: FinishSpawning) -> Result:
        """``commands.servers.spawn``."""
        return self.bus.handle(cmd)

    def finish_deletion(self, cmd: FinishDeletion) -> Result:
        """``commands.servers.delete``."""
        return self.bus.handle(cmd)
