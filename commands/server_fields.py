"""``ServerFieldHandlers``: a server's own fields (``commands.servers.fields``) as methods over the
bus, for callers written before there was one."""

from __future__ import annotations

from commands.handlers import Handlers
from commands.servers.fields import (
    AddServerTag,
    DeleteServerMetadataItem,
    RemoveServerTag,
    SetServerMetadata,
    SetServerTags,
    TagAdded,
    UpdateServer,
)
from commands.unit_of_work import Result


class ServerFieldHandlers:
    """Each method sends its command to the bus."""

    def __init__(self, handlers: Handlers) -> None:
        self._h = handlers

    def update_server(self, cmd: UpdateServer) -> Result:
        """``UpdateServer``."""
        return self._h.bus.handle(cmd)

    def set_metadata(self, cmd: SetServerMetadata) -> Result:
        """``SetServerMetadata``."""
        return self._h.bus.handle(cmd)

    def delete_metadata_item(self, cmd: DeleteServerMetadataItem) -> Result:
        """``DeleteServerMetadataItem``."""
        return self._h.bus.handle(cmd)

    def set_tags(self, cmd: SetServerTags) -> Result:
        """``SetServerTags``."""
        return self._h.bus.handle(cmd)

    def add_tag(self, cmd: AddServerTag) -> TagAdded:
        """``AddServerTag``."""
        return self._h.bus.handle(cmd)

    def remove_tag(self, cmd: RemoveServerTag) -> Result:
        """``RemoveServerTag``."""
        return self._h.bus.handle(cmd)
