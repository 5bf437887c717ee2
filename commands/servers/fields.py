"""A server's own fields: its name and description, metadata items and tags.

Each is load → one domain call → append on the ``Instance`` aggregate, and each change is an event
(``Instance.Updated``, ``Instance.MetadataUpdated``, ``Instance.TagsUpdated``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from commands import loaders
from commands.unit_of_work import Result, UnitOfWork, retried


@dataclass(frozen=True)
class UpdateServer:
    """Change a server's name, description or described fields (Nova's PUT /servers/{id})."""

    server_id: str
    project_id: str | None  # None: an admin acting across projects
    name: str | None = None
    description: str | None = None
    clear_description: bool = False
    # any of access_ip_v4, access_ip_v6, hostname, disk_config (Instance.update)
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SetServerMetadata:
    """Set a server's metadata items (or replace them all)."""

    server_id: str
    project_id: str | None
    items: dict[str, str]
    replace: bool = False  # PUT replaces every item; POST and PUT of one item only set


@dataclass(frozen=True)
class DeleteServerMetadataItem:
    """Remove one metadata item of a server."""

    server_id: str
    project_id: str | None
    key: str


@dataclass(frozen=True)
class SetServerTags:
    """Replace a server's tags."""

    server_id: str
    project_id: str | None
    tags: tuple[str, ...]


@dataclass(frozen=True)
class AddServerTag:
    """Add one tag to a server."""

    server_id: str
    project_id: str | None
    tag: str


@dataclass(frozen=True)
class RemoveServerTag:
    """Remove one tag of a server."""

    server_id: str
    project_id: str | None
    tag: str


@dataclass(frozen=True)
class TagAdded(Result):
    """The server's id and position, and whether the tag is new."""

    added: bool = True  # False: the server had the tag already


@retried
def update_server(cmd: UpdateServer, uow: UnitOfWork) -> Result:
    """Record the new name, description and fields."""
    inst = loaders.instance(uow, cmd.server_id, cmd.project_id)
    inst.update(cmd.name, cmd.description, clear_description=cmd.clear_description, fields=cmd.fields)
    return Result(cmd.server_id, uow.save(inst))


@retried
def set_metadata(cmd: SetServerMetadata, uow: UnitOfWork) -> Result:
    """Within the project's ``metadata_items`` quota."""
    inst = loaders.instance(uow, cmd.server_id, cmd.project_id)
    limit = uow.limits(inst.project_id)["metadata_items"]
    inst.update_metadata(cmd.items, replace=cmd.replace, limit=limit)
    return Result(cmd.server_id, uow.save(inst))


@retried
def delete_metadata_item(cmd: DeleteServerMetadataItem, uow: UnitOfWork) -> Result:
    """The item is gone (404 if it was not there)."""
    inst = loaders.instance(uow, cmd.server_id, cmd.project_id)
    inst.delete_metadata(cmd.key)
    return Result(cmd.server_id, uow.save(inst))


@retried
def set_tags(cmd: SetServerTags, uow: UnitOfWork) -> Result:
    """The server has exactly these tags."""
    inst = loaders.instance(uow, cmd.server_id, cmd.project_id)
    inst.set_tags(list(cmd.tags))
    return Result(cmd.server_id, uow.save(inst))


@retried
def add_tag(cmd: AddServerTag, uow: UnitOfWork) -> TagAdded:
    """The server has the tag (``added``: it had not before)."""
    inst = loaders.instance(uow, cmd.server_id, cmd.project_id)
    added = inst.add_tag(cmd.tag)
    return TagAdded(cmd.server_id, uow.save(inst), added)


@retried
def remove_tag(cmd: RemoveServerTag, uow: UnitOfWork) -> Result:
    """The server no longer has the tag."""
    inst = loaders.instance(uow, cmd.server_id, cmd.project_id)
    inst.remove_tag(cmd.tag)
    return Result(cmd.server_id, uow.save(inst))
