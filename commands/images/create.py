"""Creating an image, recording its data's upload and deleting it, each charged to (or released from)
the owner's image quota usage in the same atomic append."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from commands import loaders
from commands.errors import AlreadyExists, NotFound
from commands.image import Image
from commands.image_usage import ImageLimits, ImageUsage, image_usage_id
from commands.unit_of_work import Result, UnitOfWork, retried


@dataclass(frozen=True)
class CreateImage:
    """Create an image record (Glance's POST /v2/images); its data comes later."""

    owner: str
    name: str | None = None
    image_id: UUID | str | None = None
    visibility: str = "shared"
    container_format: str | None = None
    disk_format: str | None = None
    min_disk: int = 0
    min_ram: int = 0
    protected: bool = False
    tags: tuple[str, ...] = ()
    properties: dict[str, Any] = field(default_factory=dict)
    os_hidden: bool = False


@dataclass(frozen=True)
class RecordImageUpload:
    """The image's data is stored: its size and digests."""

    image_id: str
    project_id: str | None  # None: an admin
    size: int
    checksum: str
    os_hash_algo: str
    os_hash_value: str


@dataclass(frozen=True)
class DeleteImage:
    """Delete an image."""

    image_id: str
    project_id: str | None  # None: an admin


def visible_image(uow: UnitOfWork, image_id: str, project_id: str | None) -> Image:
    """The image if ``project_id`` may see it (None: an admin); Glance's 404 otherwise."""
    try:
        image = loaders.image(uow, image_id)
    except NotFound:
        raise NotFound(f"No image found with ID {image_id}") from None
    if not image.visible_to(project_id):
        raise NotFound(f"No image found with ID {image_id}")
    return image


def image_usage(uow: UnitOfWork, project_id: str) -> ImageUsage:
    """The project's image quota usage, as the log has it."""
    return uow.find(ImageUsage, image_usage_id(project_id)) or ImageUsage(project_id)


def create_image(
    cmd: CreateImage, uow: UnitOfWork, new_id: Callable[[], UUID], image_limits: ImageLimits
) -> Result:
    """An image whose id is new (given, or ``new_id``), within the owner's image count."""
    image_id = str(cmd.image_id or new_id())
    return _create(cmd, uow, image_id, image_limits)


@retried
def _create(cmd: CreateImage, uow: UnitOfWork, image_id: str, image_limits: ImageLimits) -> Result:
    fields = {k: v for k, v in vars(cmd).items() if k != "image_id"}
    fields["tags"] = list(dict.fromkeys(cmd.tags))
    image = Image.create(image_id, **fields)
    conflict = AlreadyExists(f"Image with identifier {image.image_id} already exists!")
    if uow.find(Image, image.id) is not None:
        raise conflict
    with contextlib.suppress(NotFound):
        loaders.image(uow, image.image_id)  # an image kept where version 1 put it
        raise conflict
    usage = image_usage(uow, cmd.owner)
    usage.admit(image.image_id, image_limits)
    return Result(image.image_id, uow.save(image, usage))


@retried
def record_image_upload(cmd: RecordImageUpload, uow: UnitOfWork, image_limits: ImageLimits) -> Result:
    """The upload is charged to the image's owner, whoever uploads."""
    image = visible_image(uow, cmd.image_id, cmd.project_id)
    image.ensure_owned_by(cmd.project_id)
    image.record_upload(cmd.size, cmd.checksum, cmd.os_hash_algo, cmd.os_hash_value)
    usage = image_usage(uow, image.owner)
    usage.charge(image.image_id, cmd.size, image_limits)
    return Result(image.image_id, uow.save(image, usage))


@retried
def delete_image(cmd: DeleteImage, uow: UnitOfWork) -> Result:
    """The image is deleted and its owner's usage released."""
    image = visible_image(uow, cmd.image_id, cmd.project_id)
    image.ensure_owned_by(cmd.project_id)
    image.delete()
    usage = image_usage(uow, image.owner)
    usage.release(image.image_id)
    return Result(image.image_id, uow.save(image, usage))
