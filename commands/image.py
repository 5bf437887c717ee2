"""Image: a bootable disk (or a kernel, or a ramdisk) in the image service, Glance v2's subset.

The aggregate holds the image's metadata; its data lives in the image store on disk
(``stratus.imagestore``) and the log records only what identifies it: size, checksum and hash.
Status goes ``queued`` (created) → ``active`` (data uploaded) → ``deleted``.

Clients may choose an image's id (Glance lets them), so an image's aggregate id is not that id but
derived from it in the images' own namespace (``image_aggregate_id``, a UUID version 5): a chosen id
never takes, blocks or reveals the aggregate of anything else (servers, hosts, projects and users
have version 4 UUIDs; flavors, key pairs and names their own version 5 namespaces), and "already
exists" speaks of images only. Images recorded before version 2 of ``Image.Created`` kept the
chosen id as their aggregate id (``legacy_aggregate_id``).
"""

from __future__ import annotations

from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

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
_NS = uuid5(NAMESPACE_URL, "urn:stratus:image")


def canonical_image_id(image_id: str) -> str:
    """Glance's form of an image id (lowercase, hyphenated UUID); ``ValueError`` for anything else."""
    return str(UUID(image_id))


def image_aggregate_id(image_id: str) -> UUID:
    """The aggregate id of the image whose (canonical) id is ``image_id``."""
    return uuid5(_NS, image_id)


def legacy_aggregate_id(image_id: str) -> UUID:
    """Where an image recorded before ``Image.Created`` v2 lives: its own id."""
    return UUID(image_id)


class Image(Aggregate):
    class Created(Aggregate.Created):
        image_id: str
        name: str | None
        owner: str
        visibility: str
        container_format: str | None
        disk_format: str | None
        min_disk: int
        min_ram: int
        protected: bool
        tags: list[str]
        properties: dict[str, Any]

        class_version = 2

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            """Version 2: the image's id, apart from its aggregate's (version 1: the same)."""
            state["image_id"] = str(state["originator_id"])

    @event(Created)
    def __init__(
        self,
        image_id: str,
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
        self._image_id = image_id
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
    def create(cls, image_id: UUID | str, **fields: Any) -> Image:
        if fields["visibility"] not in VISIBILITIES:
            raise InvalidInput(f"Invalid visibility value: {fields['visibility']}")
        canonical = canonical_image_id(str(image_id))
        return cls._create(  # type: ignore[no-any-return]
            cls.Created, id=image_aggregate_id(canonical), image_id=canonical, **fields
        )

    @property
    def image_id(self) -> str:
        return self._image_id

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
            raise Forbidden(f"You are not permitted to modify image {self.image_id}.")

    def ensure_uploadable(self) -> None:
        """Data may be uploaded once, to a queued image whose formats are set (Glance's rules)."""
        if self.status == DELETED:
            raise NotFound(f"No image found with ID {self.image_id}")
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
            raise NotFound(f"No image found with ID {self.image_id}")
        if self.protected:
            raise Forbidden(f"Image {self.image_id} is protected and cannot be deleted.")
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
