"""Commands on a server's own fields: its name and description, metadata items and tags.

Each is load → one domain call → append on the ``Instance`` aggregate, re-decided when a concurrent
writer changed the server first, and each change is an event (``Instance.Updated``,
``Instance.MetadataUpdated``, ``Instance.TagsUpdated``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from commands.handlers import Handlers
from commands.instance import Instance
from commands.unit_of_work import Result


@dataclass(frozen=True)
class UpdateServer:
    server_id: str
    project_id: str | None  # None: an admin acting across projects
    name: str | None = None
    description: str | None = None
    clear_description: bool = False
    # any of access_ip_v4, access_ip_v6, hostname, disk_config (Instance.update)
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SetServerMetadata:
    server_id: str
    project_id: str | None
    items: dict[str, str]
    replace: bool = False  # PUT replaces every item; POST and PUT of one item only set


@dataclass(frozen=True)
class DeleteServerMetadataItem:
    server_id: str
    project_id: str | None
    key: str


@dataclass(frozen=True)
class SetServerTags:
    server_id: str
    project_id: str | None
    tags: tuple[str, ...]


@dataclass(frozen=True)
class AddServerTag:
    server_id: str
    project_id: str | None
    tag: str


@dataclass(frozen=True)
class RemoveServerTag:
    server_id: str
    project_id: str | None
    tag: str


@dataclass(frozen=True)
class TagAdded(Result):
    added: bool = True  # False: the server had the tag already


class ServerFieldHandlers:
    def __init__(self, handlers: Handlers) -> None:
        self._handlers = handlers

    def _change(self, server_id: str, project_id: str | None, change: Callable[[Instance], object]) -> Result:
        def decide() -> Result:
            inst = self._handlers.instance(server_id, project_id)
            change(inst)
            return Result(server_id, self._handlers.uow.save(inst))

        return self._handlers.uow.retrying(decide)

    def update_server(self, cmd: UpdateServer) -> Result:
        return self._change(
            cmd.server_id,
            cmd.project_id,
            lambda i: i.update(
                cmd.name, cmd.description, clear_description=cmd.clear_description, fields=cmd.fields
            ),
        )

    def set_metadata(self, cmd: SetServerMetadata) -> Result:
        return self._change(
            cmd.server_id,
            cmd.project_id,
            lambda i: i.update_metadata(
                cmd.items, replace=cmd.replace, limit=self._handlers.limits(i.project_id)["metadata_items"]
            ),
        )

    def delete_metadata_item(self, cmd: DeleteServerMetadataItem) -> Result:
        return self._change(cmd.server_id, cmd.project_id, lambda i: i.delete_metadata(cmd.key))

    def set_tags(self, cmd: SetServerTags) -> Result:
        return self._change(cmd.server_id, cmd.project_id, lambda i: i.set_tags(list(cmd.tags)))

    def add_tag(self, cmd: AddServerTag) -> TagAdded:
        added: list[bool] = []
        result = self._change(cmd.server_id, cmd.project_id, lambda i: added.append(i.add_tag(cmd.tag)))
        return TagAdded(result.id, result.position, added[-1])

    def remove_tag(self, cmd: RemoveServerTag) -> Result:
        return self._change(cmd.server_id, cmd.project_id, lambda i: i.remove_tag(cmd.tag))
