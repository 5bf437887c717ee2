"""Changing an image after it is made: a JSON patch, (de)activation, and its members.

Each loads the image as a project sees it (``images.create.visible_image``), makes one domain call
and appends. Who may do what is decided by the image's owner and the members: the owner changes the
image and its member list, a member project (only) answers its own membership; ``project_id`` None
is an admin, who may do either.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from commands.errors import Forbidden
from commands.image import Image
from commands.images.create import visible_image
from commands.unit_of_work import Result, UnitOfWork, retried


@dataclass(frozen=True)
class UpdateImage:
    """Apply a Glance JSON patch's changes to an image."""

    image_id: str
    project_id: str | None  # None: an admin
    fields: dict[str, Any] = field(default_factory=dict)  # base properties (``image.UPDATABLE``)
    properties: dict[str, Any] = field(default_factory=dict)  # additional properties set
    removed: tuple[str, ...] = ()  # additional properties removed


@dataclass(frozen=True)
class SetImageActive:
    """Deactivate (``active`` False) or reactivate an image."""

    image_id: str
    project_id: str | None
    active: bool


@dataclass(frozen=True)
class AddImageMember:
    """Share an image with a project."""

    image_id: str
    project_id: str | None
    member_id: str


@dataclass(frozen=True)
class SetImageMemberStatus:
    """A member project accepts or rejects an image shared with it."""

    image_id: str
    project_id: str | None  # the member project answering (None: an admin)
    member_id: str
    status: str


@dataclass(frozen=True)
class RemoveImageMember:
    """Stop sharing an image with a project."""

    image_id: str
    project_id: str | None
    member_id: str


@retried
def _owned(cmd: Any, uow: UnitOfWork, change: Callable[[Image], None]) -> Result:
    """Change the image ``cmd`` names, if its project owns it."""
    image = visible_image(uow, cmd.image_id, cmd.project_id)
    image.ensure_owned_by(cmd.project_id)
    change(image)
    return Result(image.image_id, uow.save(image))


def update_image(cmd: UpdateImage, uow: UnitOfWork) -> Result:
    """Set and remove the image's properties."""
    return _owned(cmd, uow, lambda image: image.update(cmd.fields, cmd.properties, list(cmd.removed)))


def set_image_active(cmd: SetImageActive, uow: UnitOfWork) -> Result:
    """Glance's deactivate and reactivate actions."""
    return _owned(cmd, uow, lambda image: image.reactivate() if cmd.active else image.deactivate())


def add_member(cmd: AddImageMember, uow: UnitOfWork) -> Result:
    """Glance says no more than "not allowed", whether for the owner or the visibility."""
    try:
        return _owned(cmd, uow, lambda image: image.add_member(cmd.member_id))
    except Forbidden:
        raise Forbidden(f"Not allowed to create members for image {cmd.image_id}.") from None


def remove_member(cmd: RemoveImageMember, uow: UnitOfWork) -> Result:
    """Only the owner removes a member."""
    try:
        return _owned(cmd, uow, lambda image: image.remove_member(cmd.member_id))
    except Forbidden:
        raise Forbidden(f"Not allowed to delete members for image {cmd.image_id}.") from None


@retried
def set_member_status(cmd: SetImageMemberStatus, uow: UnitOfWork) -> Result:
    """Only the member itself (or an admin) answers, and only for a shared image."""
    image = visible_image(uow, cmd.image_id, cmd.project_id)
    denied = Forbidden(f"Not allowed to update members for image {cmd.image_id}.")
    if image.visibility != "shared":
        raise denied
    image.member(cmd.member_id)  # 404 for a member that is not there
    if cmd.project_id is not None and cmd.project_id != cmd.member_id:
        raise denied
    image.set_member_status(cmd.member_id, cmd.status)
    return Result(image.image_id, uow.save(image))
