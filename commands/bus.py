"""The message bus: one registry from command class to the handler of its use case, and the bus that
dispatches a command to it with the handler's dependencies injected.

Each process builds its bus once, in its composition root (``bootstrap``), over one
``UnitOfWork`` (the application on the log) and the collaborators handlers ask for by parameter
name: ``new_id`` (new aggregate ids), ``network`` (the fixed network servers get addresses on),
``create_groups`` (the group commit of a process's creates), ``image_limits`` (the image quota),
``generate_key`` (new SSH key pairs), ``new_identity_id`` (Keystone's ids: 32 hex digits).
``bus.handle(command)`` then runs the command's use case and returns what its handler returns (a
``Result`` and its kin).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any
from uuid import UUID, uuid4

from commands import idempotency
from commands.app import Stratus
from commands.errors import DomainError
from commands.flavors import change as flavor_changes
from commands.flavors import create as flavors
from commands.hosts import aggregates as host_aggregates
from commands.hosts import register, services
from commands.image_usage import ImageLimits
from commands.images import create as images
from commands.images import tasks as image_tasks
from commands.images import update as image_updates
from commands.keypairs import manage as keypairs
from commands.keypairs.keys import generate_ssh_key
from commands.keystone import (
    application_credentials as keystone_credentials,
)
from commands.keystone import (
    assignments,
    catalog,
    domains,
    projects,
    roles,
    tokens,
    users,
)
from commands.keystone import bootstrap as keystone_bootstrap
from commands.keystone import groups as keystone_groups
from commands.keystone.loaders import new_identity_id
from commands.metadefs import namespaces as metadefs
from commands.network import FixedNetwork
from commands.providers import allocations as placement_allocations
from commands.providers import custom as placement_custom
from commands.providers import inventories as placement_inventories
from commands.providers import manage as placement_providers
from commands.quotas import limits as quotas
from commands.servers import actions, create, delete, fields, groups, moves, reconcile, scheduling, spawn
from commands.unit_of_work import Result, UnitOfWork
from stratus import metrics

Handler = Callable[..., Any]

#: Every command and the handler of its use case.
HANDLERS: Mapping[type, Handler] = {
    # flavors
    flavors.CreateFlavor: flavors.create_flavor,
    flavors.DefineFlavor: flavors.define_flavor,
    flavors.DeleteFlavor: flavors.delete_flavor,
    flavor_changes.SetFlavorExtraSpecs: flavor_changes.set_extra_specs,
    flavor_changes.DeleteFlavorExtraSpec: flavor_changes.delete_extra_spec,
    flavor_changes.DescribeFlavor: flavor_changes.describe,
    flavor_changes.AddFlavorAccess: flavor_changes.add_access,
    flavor_changes.RemoveFlavorAccess: flavor_changes.remove_access,
    # hosts
    register.RegisterHost: register.register_host,
    services.SetServiceStatus: services.set_service_status,
    host_aggregates.CreateHostAggregate: host_aggregates.create_host_aggregate,
    host_aggregates.UpdateHostAggregate: host_aggregates.update_host_aggregate,
    host_aggregates.SetHostAggregateMetadata: host_aggregates.set_metadata,
    host_aggregates.AddHostToAggregate: host_aggregates.add_host,
    host_aggregates.RemoveHostFromAggregate: host_aggregates.remove_host,
    host_aggregates.DeleteHostAggregate: host_aggregates.delete_host_aggregate,
    # images and key pairs
    images.CreateImage: images.create_image,
    images.RecordImageUpload: images.record_image_upload,
    images.DeleteImage: images.delete_image,
    image_updates.UpdateImage: image_updates.update_image,
    image_updates.SetImageActive: image_updates.set_image_active,
    image_updates.AddImageMember: image_updates.add_member,
    image_updates.RemoveImageMember: image_updates.remove_member,
    image_updates.SetImageMemberStatus: image_updates.set_member_status,
    image_tasks.RecordTask: image_tasks.record_task,
    keypairs.CreateKeyPair: keypairs.create_keypair,
    keypairs.DeleteKeyPair: keypairs.delete_keypair,
    # metadata definitions
    metadefs.CreateNamespace: metadefs.create_namespace,
    metadefs.UpdateNamespace: metadefs.update_namespace,
    metadefs.DeleteNamespace: metadefs.delete_namespace,
    metadefs.ChangeNamespace: metadefs.change,
    # quotas
    quotas.SetQuota: quotas.set_quota,
    quotas.ResetQuota: quotas.reset_quota,
    quotas.SetQuotaClass: quotas.set_quota_class,
    # servers
    create.CreateServer: create.create_server,
    delete.DeleteServer: delete.delete_server,
    delete.FinishDeletion: delete.finish_deletion,
    scheduling.PlaceInstance: scheduling.place_instance,
    scheduling.PlaceInstances: scheduling.place_instances,
    scheduling.RecordPlacements: scheduling.record_placements,
    spawn.StartSpawning: spawn.start_spawning,
    spawn.FinishSpawning: spawn.finish_spawning,
    spawn.FailInstance: spawn.fail_instance,
    groups.CreateServerGroup: groups.create_server_group,
    actions.RequestAction: actions.request_action,
    actions.RebuildServer: actions.rebuild,
    actions.UnshelveServer: actions.unshelve,
    actions.FinishOffload: actions.finish_offload,
    actions.FinishAction: actions.finish_action,
    actions.FailAction: actions.fail_action,
    actions.PinZone: actions.pin_zone,
    actions.ResetServerState: actions.reset_state,
    actions.LockServer: actions.lock,
    actions.UnlockServer: actions.unlock,
    fields.UpdateServer: fields.update_server,
    fields.SetServerMetadata: fields.set_metadata,
    fields.DeleteServerMetadataItem: fields.delete_metadata_item,
    fields.SetServerTags: fields.set_tags,
    fields.AddServerTag: fields.add_tag,
    fields.RemoveServerTag: fields.remove_tag,
    moves.ResizeServer: moves.resize,
    moves.MigrateServer: moves.migrate,
    moves.ConfirmResize: moves.confirm,
    moves.RevertResize: moves.revert,
    moves.ScheduleMigration: moves.schedule,
    moves.LeftSource: moves.left_source,
    moves.FinishMigration: moves.finished,
    moves.LeftDest: moves.left_dest,
    moves.FinishRevert: moves.reverted,
    moves.FailMigration: moves.fail,
    reconcile.SyncPowerState: reconcile.sync_power_state,
    reconcile.RecordStrayGuests: reconcile.record_strays,
    groups.DeleteServerGroup: groups.delete_server_group,
    # Keystone: projects, users, domains, groups, roles, assignments
    projects.CreateProject: projects.create_project,
    projects.UpdateProject: projects.update_project,
    projects.DeleteProject: projects.delete_project,
    users.CreateUser: users.create_user,
    users.UpdateUser: users.update_user,
    users.DeleteUser: users.delete_user,
    users.RecordPasswordSet: users.record_password_set,
    domains.CreateDomain: domains.create_domain,
    domains.UpdateDomain: domains.update_domain,
    domains.DeleteDomain: domains.delete_domain,
    keystone_groups.CreateGroup: keystone_groups.create_group,
    keystone_groups.UpdateGroup: keystone_groups.update_group,
    keystone_groups.DeleteGroup: keystone_groups.delete_group,
    keystone_groups.AddGroupUser: keystone_groups.add_group_user,
    keystone_groups.RemoveGroupUser: keystone_groups.remove_group_user,
    roles.CreateRole: roles.create_role,
    roles.UpdateRole: roles.update_role,
    roles.DeleteRole: roles.delete_role,
    roles.ImplyRole: roles.imply_role,
    roles.StopImplyingRole: roles.stop_implying_role,
    assignments.GrantRole: assignments.grant_role,
    assignments.RevokeRole: assignments.revoke_role,
    assignments.AssignRole: assignments.assign_role,
    assignments.UnassignRole: assignments.unassign_role,
    # Keystone: the service catalog, application credentials, tokens, the first run
    catalog.CreateRegion: catalog.create_region,
    catalog.UpdateRegion: catalog.update_region,
    catalog.DeleteRegion: catalog.delete_region,
    catalog.CreateService: catalog.create_service,
    catalog.UpdateService: catalog.update_service,
    catalog.DeleteService: catalog.delete_service,
    catalog.CreateEndpoint: catalog.create_endpoint,
    catalog.UpdateEndpoint: catalog.update_endpoint,
    catalog.DeleteEndpoint: catalog.delete_endpoint,
    catalog.SeedCatalog: catalog.seed_catalog,
    keystone_credentials.CreateApplicationCredential: keystone_credentials.create_application_credential,
    keystone_credentials.DeleteApplicationCredential: keystone_credentials.delete_application_credential,
    keystone_credentials.DeleteAccessRule: keystone_credentials.delete_access_rule,
    tokens.RevokeToken: tokens.revoke_token,
    keystone_bootstrap.BootstrapIdentity: keystone_bootstrap.bootstrap_identity,
    # Placement: providers, their inventories, traits and aggregates, custom names, allocations
    placement_providers.CreateProvider: placement_providers.create_provider,
    placement_providers.UpdateProvider: placement_providers.update_provider,
    placement_providers.DeleteProvider: placement_providers.delete_provider,
    placement_inventories.SetInventories: placement_inventories.set_inventories,
    placement_inventories.SetInventory: placement_inventories.set_inventory,
    placement_inventories.DeleteInventory: placement_inventories.delete_inventory,
    placement_inventories.SetTraits: placement_inventories.set_traits,
    placement_inventories.SetAggregates: placement_inventories.set_aggregates,
    placement_custom.CreateResourceClass: placement_custom.create_resource_class,
    placement_custom.CreateTrait: placement_custom.create_trait,
    placement_custom.DeleteResourceClass: placement_custom.delete_resource_class,
    placement_custom.DeleteTrait: placement_custom.delete_trait,
    placement_allocations.ReplaceAllocations: placement_allocations.replace_allocations,
    placement_allocations.DeleteAllocations: placement_allocations.delete_allocations,
}


#: The commands a replay under an idempotency key can answer for: their handler returns a plain
#: ``Result`` (the id acted on and a position), which the key's claim records.
#: Not an application credential's creation: its id and secret are drawn by the API beside the
#: command, so a rebuilt answer would name a credential that does not exist.
_REBUILT = frozenset(
    cls
    for cls, handler in HANDLERS.items()
    if inspect.signature(handler).return_annotation in ("Result", Result)
    and cls is not keystone_credentials.CreateApplicationCredential
)


class MessageBus:
    """Dispatches each command to its handler, with the handler's dependencies bound."""

    def __init__(
        self, uow: UnitOfWork, handlers: Mapping[type, Handler], dependencies: Mapping[str, Any]
    ) -> None:
        self.uow = uow
        self.dependencies = dependencies  # what the handlers were given, by name
        self._handlers = handlers

    @property
    def app(self) -> Stratus:
        """The application on the log the commands append to."""
        return self.uow.app

    def handle(self, command: object) -> Any:
        """Run the command's use case; what it returns (``Result``, ``ServersCreated``, ...)."""
        try:
            handler = self._handlers[type(command)]
        except KeyError:
            raise TypeError(f"no handler for {type(command).__name__}") from None
        name = type(command).__name__
        try:
            result = self._handle(command, handler)
        except DomainError:
            metrics.COMMANDS.labels(name, "refused").inc()
            raise
        except Exception:
            metrics.COMMANDS.labels(name, "failed").inc()
            raise
        metrics.COMMANDS.labels(name, "accepted").inc()
        return result

    def _handle(self, command: object, handler: Handler) -> Any:
        with idempotency.handling(command) as replayed:  # a request retried under its key
            if replayed is None:
                return handler(command)
            if type(command) not in _REBUILT:
                raise idempotency.AnswerLost(
                    "This request acted before under its Idempotency-Key, and its answer was lost; "
                    "read the resource to see the outcome."
                )
            return replayed

    def extended(self, **dependencies: Any) -> MessageBus:
        """This bus with more (or other) dependencies, on the same unit of work (and the same group
        commit of creates, unless the new id generator or network is another)."""
        merged = {**self.dependencies, **dependencies}
        if dependencies.keys() & {"new_id", "network"}:
            del merged["create_groups"]
        return bootstrap(self.uow, **merged)


def bootstrap(
    app: Stratus | UnitOfWork,
    *,
    new_id: Callable[[], UUID] = uuid4,
    network: FixedNetwork | None = None,
    attempts: int = 5,
    **dependencies: Any,
) -> MessageBus:
    """The bus of one process: every handler of ``HANDLERS`` bound to its dependencies (a given
    ``UnitOfWork`` is shared with whoever else holds it; an app gets a unit of work of its own)."""
    uow = app if isinstance(app, UnitOfWork) else UnitOfWork(app, attempts=attempts)
    deps: dict[str, Any] = {
        "new_id": new_id,
        "network": network,
        "image_limits": ImageLimits(),
        "generate_key": generate_ssh_key,
        "new_identity_id": new_identity_id,
        **dependencies,
    }
    if "create_groups" not in deps:
        deps["create_groups"] = create.create_groups(uow, new_id, network)
    return MessageBus(uow, {cls: _inject(handler, uow, deps) for cls, handler in HANDLERS.items()}, deps)


def _inject(handler: Handler, uow: UnitOfWork, deps: Mapping[str, Any]) -> Callable[[object], Any]:
    """``handler`` with the unit of work and the dependencies it names bound (cosmicpython's
    ``inject_dependencies``)."""
    wanted = _parameters(handler)
    bound = {name: _noted(name, deps[name]) for name in wanted if name in deps}
    return functools.partial(handler, uow=uow, **bound)


def _noted(name: str, dependency: Any) -> Any:
    """New ids drawn for a command are noted for its idempotency key's claim (what it created)."""
    return idempotency.drawn(dependency) if name in _ID_GENERATORS else dependency


_ID_GENERATORS = frozenset({"new_id", "new_identity_id"})


@functools.cache
def _parameters(handler: Handler) -> tuple[str, ...]:
    return tuple(inspect.signature(handler).parameters)[2:]  # after the command and the unit of work
