"""Loading the decision state: the aggregates a command decides on, found by what the request names.

Each loader reads through a ``UnitOfWork`` (so, within a decision, it may answer from this process's
cache where ``appended`` says the command appends to what it loads) and raises the API's
``NotFound`` with the message Nova or Glance give for a missing one. Handlers of every subject share
them: a flavor, a host or a server is loaded the same way wherever a command names it.
"""

from __future__ import annotations

from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate

from commands.errors import InvalidInput, NotFound
from commands.flavor import Flavor, flavor_aggregate_id
from commands.host import Host, host_aggregate_id
from commands.image import ACTIVE, Image, canonical_image_id, image_aggregate_id, legacy_aggregate_id
from commands.instance import Instance
from commands.keypair import KeyPair, keypair_aggregate_id
from commands.registry import Registry, registry_id
from commands.server_group import GroupMembership, ServerGroup, membership_id
from commands.unit_of_work import UnitOfWork
from commands.usage import ProjectUsage, newest_epoch, usage_aggregate_id


def instance(
    uow: UnitOfWork,
    server_id: str,
    project_id: str | None = None,
    *,
    deleted_too: bool = False,
    appended: bool = False,
) -> Instance:
    """The server (of ``project_id`` when given); a deleted one only with ``deleted_too``.
    ``appended``: the command appends to it (see ``UnitOfWork.find``)."""
    what = f"Instance {server_id}"
    try:
        uid = UUID(server_id)
    except ValueError:
        raise NotFound(f"{what} could not be found.") from None
    inst = uow.get(Instance, uid, what, appended=appended)
    if (inst.deleted and not deleted_too) or (project_id is not None and inst.project_id != project_id):
        raise NotFound(f"{what} could not be found.")
    return inst


def flavor(uow: UnitOfWork, flavorid: str) -> Flavor:
    """The flavor, unless it is deleted."""
    found = uow.get(Flavor, flavor_aggregate_id(flavorid), f"Flavor {flavorid}")
    found.ensure_usable()
    return found


def host(uow: UnitOfWork, hostname: str) -> Host:
    """The compute host registered under ``hostname``."""
    return uow.get(Host, host_aggregate_id(hostname), f"Compute host {hostname}")


def registry(uow: UnitOfWork, kind: str) -> Registry:
    """The names taken among one kind of resource (``commands.registry``)."""
    return uow.find(Registry, registry_id(kind)) or Registry(kind)


def image(uow: UnitOfWork, image_id: str) -> Image:
    """The image whose id is ``image_id`` (in its own namespace, or where version 1 kept it)."""
    what = f"Image {image_id}"
    try:
        canonical = canonical_image_id(image_id)
    except ValueError:
        raise NotFound(f"{what} could not be found.") from None
    found = uow.find(Image, image_aggregate_id(canonical))
    if found is None:
        legacy = uow.find(Image, legacy_aggregate_id(canonical))
        found = legacy if legacy is not None and legacy.image_id == canonical else None
    if found is None:
        raise NotFound(f"{what} could not be found.")
    return found


def bootable_image(uow: UnitOfWork, image_ref: str, scope: str | None, ram: int, disk: int) -> Image:
    """The image a server boots (with its kernel and ramdisk): existing, visible to ``scope``
    (None: any), active, and within the flavor's memory and disk (Nova: 400)."""
    found = _visible_image(uow, image_ref, scope)
    for part in (found.kernel_id, found.ramdisk_id):
        if part:
            _visible_image(uow, part, scope)
    if ram < found.min_ram:
        raise InvalidInput("Flavor's memory is too small for requested image.")
    if disk and disk < found.min_disk:
        raise InvalidInput("Flavor's disk is too small for requested image.")
    return found


def _visible_image(uow: UnitOfWork, image_id: str, project_id: str | None) -> Image:
    found = image(uow, image_id)
    if not found.visible_to(project_id):
        raise NotFound(f"Image {image_id} could not be found.")
    if found.status != ACTIVE:
        raise InvalidInput(f"Image {image_id} is not active.")
    return found


def keypair(uow: UnitOfWork, user_id: str, name: str) -> KeyPair:
    """The user's key pair ``name``, unless deleted."""
    found = uow.get(KeyPair, keypair_aggregate_id(user_id, name), f"Keypair {name}")
    found.ensure_exists()
    return found


def server_keypair(uow: UnitOfWork, user_id: str, name: str) -> KeyPair:
    """The key pair a server is given: a missing one is the request's fault (Nova: 400)."""
    try:
        return keypair(uow, user_id, name)
    except NotFound:
        raise InvalidInput("Invalid key_name provided.") from None


def usage(uow: UnitOfWork, project_id: str) -> ProjectUsage:
    """The project's quota usage as the log has it: its current epoch (a project without servers
    has none yet). A stale remembered epoch only costs walking forward to the current one."""
    epochs = uow.usage_epochs
    if project_id in epochs:
        epoch = epochs[project_id]
    else:  # this process has not met the project yet: find its current epoch without loading the rest
        epoch = newest_epoch(
            0,
            lambda e: bool(
                uow.app.recorder.select_events(usage_aggregate_id(project_id, e), desc=True, limit=1)
            ),
        )
    while True:
        try:
            agg: Aggregate = uow.app.repository.get(usage_aggregate_id(project_id, epoch))
        except AggregateNotFoundError:
            if epoch == 0:  # the project's first server opens it: the next create need not look again
                epochs[project_id] = 0
                opened = ProjectUsage.open(project_id)
                uow.appending(opened)  # and finds it cached once it is saved
                return opened
            raise  # a closed epoch always has a successor: the two are appended together
        if not isinstance(agg, ProjectUsage):
            raise NotFound(f"Quota usage of project {project_id} could not be found.")
        if not agg.closed:
            if len(epochs) > 100_000:
                epochs.clear()
            epochs[project_id] = epoch
            return agg
        # Closed: read no more, though it holds every server's holdings at its close (a project's
        # closed epochs would fill the cache with copies of its whole usage).
        uow.forget(agg.id)
        epoch += 1


def usage_to_save(current: ProjectUsage) -> list[ProjectUsage]:
    """``current`` and, once its epoch is full, the next epoch it is carried into (its changes then
    move there: the caller charges or releases on the last element)."""
    return [current, current.carry_forward()] if current.full and not current.closed else [current]


def server_group_of(uow: UnitOfWork, instance_id: str) -> ServerGroup | None:
    """The group the instance joined when it was created (None: none, or the group is deleted)."""
    try:
        membership: Aggregate = uow.app.repository.get(membership_id(instance_id))
        if not isinstance(membership, GroupMembership):
            return None
        group: Aggregate = uow.app.repository.get(UUID(membership.group_id))
    except AggregateNotFoundError:
        return None
    return group if isinstance(group, ServerGroup) and not group.deleted else None


def server_group(uow: UnitOfWork, group_id: str, project_id: str | None) -> ServerGroup:
    """The server group, if ``project_id`` (None: an admin) may see it."""
    what = f"Instance group {group_id}"
    try:
        uid = UUID(group_id)
    except ValueError:
        raise NotFound(f"{what} could not be found.") from None
    group = uow.get(ServerGroup, uid, what)
    group.ensure_visible(project_id)
    return group
