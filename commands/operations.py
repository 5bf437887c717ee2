"""``Operations``: the operator's commands beyond servers (flavors, compute services, host aggregates,
server groups, quotas) as methods over the bus, for callers written before there was one.

Each use case lives in its own module (``commands.flavors``, ``commands.hosts``,
``commands.servers.groups``, ``commands.quotas``); new code sends their commands to the bus.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from uuid import UUID, uuid4

from commands import loaders
from commands.app import Stratus
from commands.bus import bootstrap
from commands.flavor import Flavor
from commands.flavors.change import (
    AddFlavorAccess,
    DeleteFlavorExtraSpec,
    DescribeFlavor,
    RemoveFlavorAccess,
    SetFlavorExtraSpecs,
)
from commands.flavors.create import CreateFlavor, DeleteFlavor
from commands.host import Host
from commands.host_aggregate import HostAggregate
from commands.hosts import aggregates
from commands.hosts.aggregates import (
    AddHostToAggregate,
    CreateHostAggregate,
    DeleteHostAggregate,
    RemoveHostFromAggregate,
    SetHostAggregateMetadata,
    UpdateHostAggregate,
)
from commands.hosts.services import SetServiceStatus
from commands.quota import ProjectQuota
from commands.quotas import limits as quotas
from commands.quotas.limits import ResetQuota, SetQuota, SetQuotaClass
from commands.registry import Registry
from commands.server_group import ServerGroup
from commands.servers.groups import CreateServerGroup, DeleteServerGroup
from commands.unit_of_work import Result, UnitOfWork


class Operations:
    """The operator's commands and the loaders of what they change, as methods."""

    def __init__(self, app: Stratus, *, new_id: Callable[[], UUID] = uuid4, attempts: int = 5) -> None:
        self.app = app
        self.uow = UnitOfWork(app, attempts=attempts)
        self.bus = bootstrap(self.uow, new_id=new_id)

    def registry(self, kind: str) -> Registry:
        """``commands.loaders.registry``."""
        return loaders.registry(self.uow, kind)

    def flavor(self, flavorid: str) -> Flavor:
        """``commands.loaders.flavor``."""
        return loaders.flavor(self.uow, flavorid)

    def host(self, hostname: str) -> Host:
        """``commands.loaders.host``."""
        return loaders.host(self.uow, hostname)

    def limits(self, project_id: str) -> Mapping[str, int]:
        """``UnitOfWork.limits``."""
        return self.uow.limits(project_id)

    def host_aggregate(self, aggregate_id: str) -> HostAggregate:
        """``commands.hosts.aggregates.host_aggregate``."""
        return aggregates.host_aggregate(self.uow, aggregate_id)

    def server_group(self, group_id: str, project_id: str | None) -> ServerGroup:
        """``commands.loaders.server_group``."""
        return loaders.server_group(self.uow, group_id, project_id)

    def quota(self, project_id: str) -> ProjectQuota:
        """``commands.quotas.limits.quota``."""
        return quotas.quota(self.uow, project_id)

    def quota_class(self, name: str) -> dict[str, int]:
        """``commands.quotas.limits.quota_class``."""
        return quotas.quota_class(self.uow, name)

    # -- flavors --------------------------------------------------------------------------------
    def create_flavor(self, cmd: CreateFlavor) -> Result:
        """``commands.flavors.create``."""
        return self.bus.handle(cmd)

    def delete_flavor(self, flavorid: str) -> Result:
        """``commands.flavors.create``."""
        return self.bus.handle(DeleteFlavor(flavorid))

    def set_flavor_extra_specs(self, flavorid: str, specs: Mapping[str, str]) -> Result:
        """``commands.flavors.change``."""
        return self.bus.handle(SetFlavorExtraSpecs(flavorid, specs))

    def delete_flavor_extra_spec(self, flavorid: str, key: str) -> Result:
        """``commands.flavors.change``."""
        return self.bus.handle(DeleteFlavorExtraSpec(flavorid, key))

    def update_flavor_description(self, flavorid: str, description: str | None) -> Result:
        """``commands.flavors.change``."""
        return self.bus.handle(DescribeFlavor(flavorid, description))

    def add_flavor_access(self, flavorid: str, project_id: str) -> Result:
        """``commands.flavors.change``."""
        return self.bus.handle(AddFlavorAccess(flavorid, project_id))

    def remove_flavor_access(self, flavorid: str, project_id: str) -> Result:
        """``commands.flavors.change``."""
        return self.bus.handle(RemoveFlavorAccess(flavorid, project_id))

    # -- compute services and host aggregates ---------------------------------------------------
    def set_service_status(self, cmd: SetServiceStatus) -> Result:
        """``commands.hosts.services``."""
        return self.bus.handle(cmd)

    def create_host_aggregate(self, cmd: CreateHostAggregate) -> Result:
        """``commands.hosts.aggregates``."""
        return self.bus.handle(cmd)

    def update_host_aggregate(self, cmd: UpdateHostAggregate) -> Result:
        """``commands.hosts.aggregates``."""
        return self.bus.handle(cmd)

    def set_host_aggregate_metadata(self, aggregate_id: str, metadata: Mapping[str, str | None]) -> Result:
        """``commands.hosts.aggregates``."""
        return self.bus.handle(SetHostAggregateMetadata(aggregate_id, metadata))

    def add_host_to_aggregate(self, aggregate_id: str, hostname: str) -> Result:
        """``commands.hosts.aggregates``."""
        return self.bus.handle(AddHostToAggregate(aggregate_id, hostname))

    def remove_host_from_aggregate(self, aggregate_id: str, hostname: str) -> Result:
        """``commands.hosts.aggregates``."""
        return self.bus.handle(RemoveHostFromAggregate(aggregate_id, hostname))

    def delete_host_aggregate(self, aggregate_id: str) -> Result:
        """``commands.hosts.aggregates``."""
        return self.bus.handle(DeleteHostAggregate(aggregate_id))

    # -- server groups and quotas ---------------------------------------------------------------
    def create_server_group(self, cmd: CreateServerGroup) -> Result:
        """``commands.servers.groups``."""
        return self.bus.handle(cmd)

    def delete_server_group(self, group_id: str, project_id: str | None) -> Result:
        """``commands.servers.groups``."""
        return self.bus.handle(DeleteServerGroup(group_id, project_id))

    def set_quota_class(self, name: str, limits: Mapping[str, int]) -> Result:
        """``commands.quotas.limits``."""
        return self.bus.handle(SetQuotaClass(name, limits))

    def set_quota(
        self, project_id: str, limits: Mapping[str, int], used: Mapping[str, int], force: bool = False
    ) -> Result:
        """``commands.quotas.limits``."""
        return self.bus.handle(SetQuota(project_id, limits, used, force))

    def reset_quota(self, project_id: str) -> Result:
        """``commands.quotas.limits``."""
        return self.bus.handle(ResetQuota(project_id))
