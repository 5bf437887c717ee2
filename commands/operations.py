"""Operator commands beyond servers: flavor extra specs and access, compute services, host
aggregates and availability zones, server groups and quotas.

Like ``commands.handlers``: each handler loads the decision state from the log, calls the domain,
and appends everything the decision changed in one atomic append, re-deciding a few times when a
concurrent writer got there first. Each returns the id it acted on and the log position.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID, uuid4

from eventsourcing.domain import Aggregate

from commands.app import Stratus
from commands.base import HandlerBase, Result
from commands.errors import AlreadyExists, InvalidInput, NotFound
from commands.flavor import Flavor, flavor_aggregate_id
from commands.handlers import CreateFlavor
from commands.host import Host, host_aggregate_id
from commands.host_aggregate import AZ_KEY, HostAggregate
from commands.ledger import SERVER_GROUPS
from commands.quota import DEFAULT_LIMITS, ProjectQuota, QuotaClass, quota_aggregate_id, quota_class_id
from commands.registry import AGGREGATE_NAMES, FLAVOR_NAMES, Registry, registry_id
from commands.server_group import ServerGroup

A = TypeVar("A", bound=Aggregate)
T = TypeVar("T")

COMPUTE_BINARY = "nova-compute"


@dataclass(frozen=True)
class SetServiceStatus:
    """os-services: ``disabled`` None/``forced_down`` None leave that part as it is."""

    host: str
    binary: str
    disabled: bool | None = None
    disabled_reason: str | None = None
    forced_down: bool | None = None


@dataclass(frozen=True)
class CreateHostAggregate:
    name: str
    availability_zone: str | None = None


@dataclass(frozen=True)
class UpdateHostAggregate:
    aggregate_id: str
    name: str | None = None
    # Only applied when ``set_zone``: None then removes the zone.
    availability_zone: str | None = None
    set_zone: bool = False


@dataclass(frozen=True)
class CreateServerGroup:
    name: str
    project_id: str
    user_id: str
    policy: str
    rules: dict[str, Any] = field(default_factory=dict)


class Operations(HandlerBase):
    def __init__(self, app: Stratus, *, new_id: Callable[[], UUID] = uuid4, attempts: int = 5) -> None:
        super().__init__(app, attempts=attempts)
        self._new_id = new_id

    def registry(self, kind: str) -> Registry:
        return self._find(Registry, registry_id(kind)) or Registry(kind)

    def flavor(self, flavorid: str) -> Flavor:
        flavor = self._get(Flavor, flavor_aggregate_id(flavorid), f"Flavor {flavorid}")
        flavor.ensure_usable()
        return flavor

    def host(self, hostname: str) -> Host:
        return self._get(Host, host_aggregate_id(hostname), f"Compute host {hostname}")

    # -- flavors --------------------------------------------------------------------------------
    def create_flavor(self, cmd: CreateFlavor) -> Result:
        """A flavor whose id and name are both new (Nova answers 409 for either)."""

        def decide() -> Result:
            if self._find(Flavor, flavor_aggregate_id(cmd.flavorid)) is not None:
                raise AlreadyExists(f"Flavor with ID {cmd.flavorid} already exists.")
            flavor = Flavor.create(**vars(cmd))
            names = self.registry(FLAVOR_NAMES)
            names.take(cmd.name, cmd.flavorid, "Flavor")
            # The flavor's event last: the position returned is the flavor's creation.
            return Result(cmd.flavorid, self._save(names, flavor))

        return self._retrying(decide)

    def delete_flavor(self, flavorid: str) -> Result:
        def decide() -> Result:
            flavor = self.flavor(flavorid)
            flavor.delete()
            names = self.registry(FLAVOR_NAMES)
            names.release(flavor.name, flavorid)
            return Result(flavorid, self._save(flavor, names))

        return self._retrying(decide)

    def set_flavor_extra_specs(self, flavorid: str, specs: Mapping[str, str]) -> Result:
        def decide() -> Result:
            flavor = self.flavor(flavorid)
            flavor.set_extra_specs(dict(specs))
            return Result(flavorid, self._save(flavor))

        return self._retrying(decide)

    def delete_flavor_extra_spec(self, flavorid: str, key: str) -> Result:
        def decide() -> Result:
            flavor = self.flavor(flavorid)
            flavor.delete_extra_spec(key)
            return Result(flavorid, self._save(flavor))

        return self._retrying(decide)

    def update_flavor_description(self, flavorid: str, description: str | None) -> Result:
        def decide() -> Result:
            flavor = self.flavor(flavorid)
            flavor.describe(description)
            return Result(flavorid, self._save(flavor))

        return self._retrying(decide)

    def add_flavor_access(self, flavorid: str, project_id: str) -> Result:
        def decide() -> Result:
            flavor = self.flavor(flavorid)
            flavor.add_access(project_id)
            return Result(flavorid, self._save(flavor))

        return self._retrying(decide)

    def remove_flavor_access(self, flavorid: str, project_id: str) -> Result:
        def decide() -> Result:
            flavor = self.flavor(flavorid)
            flavor.remove_access(project_id)
            return Result(flavorid, self._save(flavor))

        return self._retrying(decide)

    # -- compute services -----------------------------------------------------------------------
    def set_service_status(self, cmd: SetServiceStatus) -> Result:
        if cmd.binary != COMPUTE_BINARY:
            raise NotFound(f"Service {cmd.binary} on host {cmd.host} could not be found.")

        def decide() -> Result:
            try:
                host = self.host(cmd.host)
            except NotFound:
                raise NotFound(f"Service {cmd.binary} on host {cmd.host} could not be found.") from None
            if cmd.disabled is True:
                host.disable(cmd.disabled_reason)
            elif cmd.disabled is False:
                host.enable()
            if cmd.forced_down is not None:
                host.force_down(cmd.forced_down)
            return Result(str(host.id), self._save(host))

        return self._retrying(decide)

    # -- host aggregates ------------------------------------------------------------------------
    def host_aggregate(self, aggregate_id: str) -> HostAggregate:
        what = f"Aggregate {aggregate_id}"
        try:
            uid = UUID(aggregate_id)
        except ValueError:
            raise NotFound(f"{what} could not be found.") from None
        agg = self._get(HostAggregate, uid, what)
        agg.ensure_exists()
        return agg

    def create_host_aggregate(self, cmd: CreateHostAggregate) -> Result:
        new_id = self._new_id()

        def decide() -> Result:
            names = self.registry(AGGREGATE_NAMES)
            number = names.take(cmd.name, str(new_id), "Aggregate")
            agg = HostAggregate.create(new_id, cmd.name, number, cmd.availability_zone)
            return Result(str(new_id), self._save(agg, names))

        return self._retrying(decide)

    def update_host_aggregate(self, cmd: UpdateHostAggregate) -> Result:
        def decide() -> Result:
            agg = self.host_aggregate(cmd.aggregate_id)
            changed: list[Aggregate] = [agg]
            if cmd.name is not None and cmd.name != agg.name:
                names = self.registry(AGGREGATE_NAMES)
                names.take(cmd.name, cmd.aggregate_id, "Aggregate")
                names.release(agg.name, cmd.aggregate_id)
                agg.rename(cmd.name)
                changed.append(names)
            if cmd.set_zone:
                changed += self._set_metadata(agg, {AZ_KEY: cmd.availability_zone})
            return Result(cmd.aggregate_id, self._save(*changed))

        return self._retrying(decide)

    def set_host_aggregate_metadata(self, aggregate_id: str, metadata: Mapping[str, str | None]) -> Result:
        def decide() -> Result:
            agg = self.host_aggregate(aggregate_id)
            return Result(aggregate_id, self._save(agg, *self._set_metadata(agg, dict(metadata))))

        return self._retrying(decide)

    def _set_metadata(self, agg: HostAggregate, metadata: dict[str, str | None]) -> list[Aggregate]:
        """Set the metadata; when the zone changes, each member host follows it (same append)."""
        before = agg.availability_zone
        agg.set_metadata(metadata)
        if agg.availability_zone == before:
            return []
        hosts = [self.host(h) for h in agg.hosts]
        for host in hosts:
            host.assign_zone(str(agg.id), agg.availability_zone)
        return list(hosts)

    def add_host_to_aggregate(self, aggregate_id: str, hostname: str) -> Result:
        def decide() -> Result:
            agg = self.host_aggregate(aggregate_id)
            host = self.host(hostname)
            agg.add_host(hostname)
            host.assign_zone(aggregate_id, agg.availability_zone)
            return Result(aggregate_id, self._save(agg, host))

        return self._retrying(decide)

    def remove_host_from_aggregate(self, aggregate_id: str, hostname: str) -> Result:
        def decide() -> Result:
            agg = self.host_aggregate(aggregate_id)
            agg.remove_host(hostname)
            changed: list[Aggregate] = [agg]
            host = self._find(Host, host_aggregate_id(hostname))
            if host is not None:
                host.leave_aggregate(aggregate_id)
                changed.append(host)
            return Result(aggregate_id, self._save(*changed))

        return self._retrying(decide)

    def delete_host_aggregate(self, aggregate_id: str) -> Result:
        def decide() -> Result:
            agg = self.host_aggregate(aggregate_id)
            agg.delete()
            names = self.registry(AGGREGATE_NAMES)
            names.release(agg.name, aggregate_id)
            return Result(aggregate_id, self._save(agg, names))

        return self._retrying(decide)

    # -- server groups --------------------------------------------------------------------------
    def server_group(self, group_id: str, project_id: str | None) -> ServerGroup:
        what = f"Instance group {group_id}"
        try:
            uid = UUID(group_id)
        except ValueError:
            raise NotFound(f"{what} could not be found.") from None
        group = self._get(ServerGroup, uid, what)
        group.ensure_visible(project_id)
        return group

    def create_server_group(self, cmd: CreateServerGroup) -> Result:
        """A server group, counted in the project's ``server_groups`` ledger within its quota."""

        def decide() -> Result:
            # made anew each time: a save that lost the race took the pending events of the last one
            group = ServerGroup.create(cmd.name, cmd.project_id, cmd.user_id, cmd.policy, cmd.rules)
            ledger = self.ledger(SERVER_GROUPS, cmd.project_id)
            ledger.admit(str(group.id), self.limits(cmd.project_id))
            return Result(str(group.id), self._save(group, ledger))

        return self._retrying(decide)

    def delete_server_group(self, group_id: str, project_id: str | None) -> Result:
        def decide() -> Result:
            group = self.server_group(group_id, project_id)
            group.delete()
            ledger = self.ledger(SERVER_GROUPS, group.project_id)
            ledger.release(group_id)
            return Result(group_id, self._save(group, ledger))

        return self._retrying(decide)

    # -- quotas ---------------------------------------------------------------------------------
    def quota(self, project_id: str) -> ProjectQuota:
        return self._find(ProjectQuota, quota_aggregate_id(project_id)) or ProjectQuota(project_id)

    def set_quota_class(self, name: str, limits: Mapping[str, int]) -> Result:
        """Nova's quota class update; the ``default`` class's limits are every project's defaults."""

        def decide() -> Result:
            quota_class = self._find(QuotaClass, quota_class_id(name)) or QuotaClass(name)
            quota_class.set_limits(limits)
            return Result(name, self._save(quota_class))

        return self._retrying(decide)

    def quota_class(self, name: str) -> dict[str, int]:
        found = self._find(QuotaClass, quota_class_id(name))
        return found.limits if found is not None else dict(DEFAULT_LIMITS)

    def set_quota(
        self, project_id: str, limits: Mapping[str, int], used: Mapping[str, int], force: bool = False
    ) -> Result:
        if not limits:
            raise InvalidInput("No quota to update: name at least one resource.")

        def decide() -> Result:
            quota = self.quota(project_id)
            quota.set_limits(limits, used, force)
            return Result(project_id, self._save(quota))

        return self._retrying(decide)

    def reset_quota(self, project_id: str) -> Result:
        def decide() -> Result:
            quota = self.quota(project_id)
            quota.reset()
            return Result(project_id, self._save(quota))

        return self._retrying(decide)
