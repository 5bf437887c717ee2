"""Image: a bootable disk (or a kernel, or a ramdisk) in the image service, Glance v2's subset.

The aggregate holds the image's metadata; its data lives in the image store on disk
(``stratus.imagestore``) and the log records only what identifies it: size, checksum and hash.
Status goes ``queued`` (created) → ``active`` (data uploaded) → ``deleted``; an active image may be
``deactivated`` and reactivated. The owner shares a ``shared`` image with other projects (members,
each ``pending``, ``accepted`` or ``rejected`` as the member project decides), as Glance does.

Clients may choose an image's id (Glance lets them), so an image's aggregate id is not that id but
derived from it in the images' own namespace (``image_aggregate_id``, a UUID version 5): a chosen id
never takes, blocks or reveals the aggregate of anything else (servers, hosts, projects and users
have version 4 UUIDs; flavors, key pairs and names their own version 5 namespaces), and "already
exists" speaks of images only. Images recorded before version 2 of ``Image.Created`` kept the
chosen id as their aggregate id (``legacy_aggregate_id``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from commands.errors import (
    AlreadyExists,
    Conflict,
    Forbidden,
    InvalidInput,
    InvalidState,
    NotFound,
    QuotaExceeded,
)

QUEUED = "queued"
ACTIVE = "active"
DELETED = "deleted"
DEACTIVATED = "deactivated"
PUBLIC = "public"
PRIVATE = "private"
SHARED = "shared"
COMMUNITY = "community"
VISIBILITIES = (PUBLIC, PRIVATE, SHARED, COMMUNITY)
# The image property naming the kernel command line for direct kernel boot (Nova's os_command_line).
COMMAND_LINE = "os_command_line"
_NS = uuid5(NAMESPACE_URL, "urn:stratus:image")
# What ``update`` may change besides the additional properties (Glance's writable base properties).
UPDATABLE = (
    "name", "visibility", "protected", "os_hidden", "min_disk", "min_ram", "tags", "owner",
    "container_format", "disk_format",
)  # fmt: skip
FORMATS = ("container_format", "disk_format")  # replaceable while the image is queued only
MEMBER_STATUSES = ("pending", "accepted", "rejected")
MAX_TAGS = 128  # Glance's image_tag_quota
MAX_MEMBERS = 128  # Glance's image_member_quota


_ABSENT = object()


@dataclass(frozen=True)
class Member:
    """A project's membership of a shared image."""

    status: str
    created_at: datetime
    updated_at: datetime


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
    """A bootable disk, kernel or ramdisk in the image service: metadata, sharing and the fate of its data."""

    class Created(Aggregate.Created):
        """An image was registered (status queued): its id and metadata, no data yet. Version 3 adds
        os_hidden (Glance's hidden images, left out of lists unless asked for); version 2 added
        image_id."""

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
        os_hidden: bool

        class_version = 3

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            """Version 2: the image's id, apart from its aggregate's (version 1: the same)."""
            state["image_id"] = str(state["originator_id"])

        @staticmethod
        def upcast_v2_v3(state: dict[str, Any]) -> None:
            """Version 3: ``os_hidden`` (images made before it are listed: not hidden)."""
            state["os_hidden"] = False

    class MemberAdded(Aggregate.Event):
        """The owner shared the image with a project; its membership is pending."""

        member_id: str

        def apply(self, aggregate: Any) -> None:
            aggregate.members = {
                **aggregate.members,
                self.member_id: Member("pending", self.timestamp, self.timestamp),
            }

    class MemberStatusChanged(Aggregate.Event):
        """The member project accepted or rejected the image (or set it pending again)."""

        member_id: str
        status: str

        def apply(self, aggregate: Any) -> None:
            old = aggregate.members[self.member_id]
            aggregate.members = {
                **aggregate.members,
                self.member_id: Member(self.status, old.created_at, self.timestamp),
            }

    class MemberRemoved(Aggregate.Event):
        """The owner stopped sharing the image with the project."""

        member_id: str

        def apply(self, aggregate: Any) -> None:
            aggregate.members = {k: v for k, v in aggregate.members.items() if k != self.member_id}

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
        os_hidden: bool = False,
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
        self.os_hidden = os_hidden
        self.members: dict[str, Member] = {}
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
        fields.setdefault("os_hidden", False)  # listed unless asked otherwise, as Glance
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
        """Whether a project may see and boot the image (None: an admin, who sees every image).

        A member of a shared image sees it whatever its membership's status (Glance's rule; lists
        show only accepted ones by default).
        """
        if self.status == DELETED:
            return False
        if project_id is None or self.visibility in (PUBLIC, COMMUNITY) or self.owner == project_id:
            return True
        return self.visibility == SHARED and project_id in self.members

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

    class Uploaded(Aggregate.Event):
        """The image's data was stored (status active): its size and digests, never the data."""

        size: int
        checksum: str
        os_hash_algo: str
        os_hash_value: str

    @event(Uploaded)
    def _uploaded(self, size: int, checksum: str, os_hash_algo: str, os_hash_value: str) -> None:
        self.status = ACTIVE
        self.size = size
        self.checksum = checksum
        self.os_hash_algo = os_hash_algo
        self.os_hash_value = os_hash_value

    def update(self, fields: dict[str, Any], properties: dict[str, Any], removed: list[str]) -> None:
        """Change base properties (``UPDATABLE``) and additional ones, as one JSON patch does."""
        if self.status == DELETED:
            raise NotFound(f"No image found with ID {self.image_id}")
        unknown = set(fields) - set(UPDATABLE)
        if unknown:
            raise InvalidInput(f"Attribute '{sorted(unknown)[0]}' is read-only.")
        if "visibility" in fields and fields["visibility"] not in VISIBILITIES:
            raise InvalidInput(f"Invalid visibility value: {fields['visibility']}")
        for key in FORMATS:
            if key in fields and fields[key] != getattr(self, key) and self.status != QUEUED:
                raise Forbidden(f"Attribute {key} can be only replaced for a queued image.")
        if len(fields.get("tags", ())) > MAX_TAGS:
            raise QuotaExceeded(f"Maximum number of tags exceeded: {MAX_TAGS}")
        missing = [key for key in removed if key not in self.properties]
        if missing:
            raise InvalidState(f"Property {missing[0]} does not exist.")
        changed = {k: v for k, v in fields.items() if getattr(self, k) != v}
        if "tags" in changed:
            changed["tags"] = list(dict.fromkeys(changed["tags"]))
        props = {k: v for k, v in properties.items() if self.properties.get(k, _ABSENT) != v}
        if changed or props or removed:
            self._updated(changed, props, list(removed))

    class Updated(Aggregate.Event):
        """The owner (or an admin) changed the image's metadata, as one JSON patch or a tag change: the new
        values of the base properties that changed (fields), the additional properties set (properties)
        and those removed (removed)."""

        fields: dict[str, Any]
        properties: dict[str, Any]
        removed: list[str]

    @event(Updated)
    def _updated(self, fields: dict[str, Any], properties: dict[str, Any], removed: list[str]) -> None:
        for key, value in fields.items():
            setattr(self, key, list(value) if key == "tags" else value)
        self.properties = {k: v for k, v in {**self.properties, **properties}.items() if k not in removed}

    def deactivate(self) -> None:
        """Glance: only an active image may be deactivated (again: nothing to do)."""
        if self.status == DEACTIVATED:
            return
        if self.status != ACTIVE:
            raise Forbidden(f"Not allowed to deactivate image in status '{self.status}'")
        self._deactivated()

    class Deactivated(Aggregate.Event):
        """An admin or the owner deactivated the active image: its data cannot be downloaded (except by an
        admin) until it is reactivated."""

    @event(Deactivated)
    def _deactivated(self) -> None:
        self.status = DEACTIVATED

    def reactivate(self) -> None:
        if self.status == ACTIVE:
            return
        if self.status != DEACTIVATED:
            raise Forbidden(f"Not allowed to reactivate image in status '{self.status}'")
        self._reactivated()

    class Reactivated(Aggregate.Event):
        """The deactivated image is active again."""

    @event(Reactivated)
    def _reactivated(self) -> None:
        self.status = ACTIVE

    # -- members (sharing) ------------------------------------------------------------------------
    def ensure_shared(self) -> None:
        if self.visibility != SHARED:
            raise Forbidden("Only shared images have members.")

    def member(self, member_id: str) -> Member:
        self.ensure_shared()
        found = self.members.get(member_id)
        if found is None:
            raise NotFound(f"{member_id} not found in the member list of the image {self.image_id}.")
        return found

    def add_member(self, member_id: str) -> None:
        self.ensure_shared()
        if member_id in self.members:
            raise AlreadyExists(f"Member {member_id} is duplicated for image {self.image_id}")
        if len(self.members) >= MAX_MEMBERS:
            raise QuotaExceeded(
                f"Image member limit exceeded for image {self.image_id}: "
                f"Maximum number of image members exceeded: {MAX_MEMBERS}:"
            )
        self.trigger_event(self.MemberAdded, member_id=member_id)

    def set_member_status(self, member_id: str, status: str) -> None:
        member = self.member(member_id)
        if status not in MEMBER_STATUSES:
            raise InvalidInput('Incorrect request: Status must be "pending", "accepted" or "rejected".')
        if member.status == status:
            return
        self.trigger_event(self.MemberStatusChanged, member_id=member_id, status=status)

    def remove_member(self, member_id: str) -> None:
        self.member(member_id)
        self.trigger_event(self.MemberRemoved, member_id=member_id)

    def delete(self) -> None:
        if self.status == DELETED:
            raise NotFound(f"No image found with ID {self.image_id}")
        if self.protected:
            raise Forbidden(f"Image {self.image_id} is protected and cannot be deleted.")
        self._deleted()

    class Deleted(Aggregate.Event):
        """The image is gone (status deleted); its data is removed from the store."""

    @event(Deleted)
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
