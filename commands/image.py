"""Image: a bootable disk (or a kernel, or a ramdisk) in the image service, Glance v2's subset.

The aggregate holds the image's metadata; its data lives in the image store on disk
(``stratus.imagestore``) and the log records only what identifies it: size, checksum and hash.
Status goes ``queued`` (created) → ``active`` (data uploaded) → ``deleted``.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from commands.errors import Conflict, Forbidden, InvalidInput, NotFound

QUEUED = "queued"
ACTIVE = "active"
DELETED = "deleted"
PUBLIC = "public"
PRIVATE = "private"
SHARED = "shared"
COMMUNITY = "community"
VISIBILITIES = (PUBLIC, PRIVATE, SHARED, COMMUNITY)
# The image property naming the kernel command line for direct kernel boot (Nova's os_command_line).
COMMAND_LINE = "os_command_line"


class Image(Aggregate):
    @event("Created")
    def __init__(
        self,
        name: str | None,
        owner: str,
        visibility: str,
        container_format: str | None,
        disk_format: str | None,
        min_disk: int,
        min_ram: int,
        protected: bool,
        tags: list[str],
        properties: dict[str, Any],
    ) -> None:
        self.name = name
        self.owner = owner
        self.visibility = visibility
        self.container_format = container_format
        self.disk_format = disk_format
        self.min_disk = min_disk
        self.min_ram = min_ram
        self.protected = protected
        self.tags = list(tags)
        self.properties = dict(properties)
        self.status = QUEUED
        self.size: int | None = None
        self.checksum: str | None = None
        self.os_hash_algo: str | None = None
        self.os_hash_value: str | None = None

    @classmethod
    def create(cls, image_id: UUID, **fields: Any) -> Image:
        if fields["visibility"] not in VISIBILITIES:
            raise InvalidInput(f"Invalid visibility value: {fields['visibility']}")
        return cls._create(cls.Created, id=image_id, **fields)  # type: ignore[attr-defined, no-any-return]

    @property
    def image_id(self) -> str:
        return str(self.id)

    @property
    def kernel_id(self) -> str | None:
        value = self.properties.get("kernel_id")
        return str(value) if value else None

    @property
    def ramdisk_id(self) -> str | None:
        value = self.properties.get("ramdisk_id")
        return str(value) if value else None

    def visible_to(self, project_id: str | None) -> bool:
        """Whether a project may see and boot the image (None: an admin, who sees every image)."""
        if self.status == DELETED:
            return False
        return project_id is None or self.visibility in (PUBLIC, COMMUNITY) or self.owner == project_id

    def ensure_owned_by(self, project_id: str | None) -> None:
        """Only the owner (or an admin) may change an image; others get Glance's 403."""
        if project_id is not None and self.owner != project_id:
            raise Forbidden(f"You are not permitted to modify image {self.id}.")

    def ensure_uploadable(self) -> None:
        """Data may be uploaded once, to a queued image whose formats are set (Glance's rules)."""
        if self.status == DELETED:
            raise NotFound(f"No image found with ID {self.id}")
        if self.status != QUEUED:
            raise Conflict(f"Image status transition from {self.status} to saving is not allowed")
        if not self.container_format or not self.disk_format:
            raise InvalidInput("Properties container_format, disk_format must be set prior to saving data.")

    def record_upload(self, size: int, checksum: str, os_hash_algo: str, os_hash_value: str) -> None:
        self.ensure_uploadable()
        self._uploaded(size, checksum, os_hash_algo, os_hash_value)

    @event("Uploaded")
    def _uploaded(self, size: int, checksum: str, os_hash_algo: str, os_hash_value: str) -> None:
        self.status = ACTIVE
        self.size = size
        self.checksum = checksum
        self.os_hash_algo = os_hash_algo
        self.os_hash_value = os_hash_value

    def delete(self) -> None:
        if self.status == DELETED:
            raise NotFound(f"No image found with ID {self.id}")
        if self.protected:
            raise Forbidden(f"Image {self.id} is protected and cannot be deleted.")
        self._deleted()

    @event("Deleted")
    def _deleted(self) -> None:
        self.status = DELETED

    def boot_snapshot(self) -> dict[str, Any]:
        """What a server records of the image it is built from (Nova keeps image metadata too)."""
        return {
            "id": self.image_id,
            "name": self.name,
            "disk_format": self.disk_format,
            "min_disk": self.min_disk,
            "min_ram": self.min_ram,
            "kernel_id": self.kernel_id,
            "ramdisk_id": self.ramdisk_id,
            COMMAND_LINE: self.properties.get(COMMAND_LINE),
        }
