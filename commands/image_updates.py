"""Commands that change an image after it is made: a JSON patch, (de)activation, and its members.

Each loads the image as ``CatalogHandlers.image`` does (a project sees what Glance shows it), makes
one domain call and appends. Who may do what is decided by the image's owner and the members: the
owner changes the image and its member list, a member project (only) answers its own membership;
``project_id`` None is an admin, who may do either.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from commands.catalog import CatalogHandlers
from commands.errors import Forbidden
from commands.image import Image
from commands.unit_of_work import Result, UnitOfWork


@dataclass(frozen=True)
class UpdateImage:
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
    image_id: str
    project_id: str | None
    member_id: str


@dataclass(frozen=True)
class SetImageMemberStatus:
    image_id: str
    project_id: str | None  # the member project answering (None: an admin)
    member_id: str
    status: str


@dataclass(frozen=True)
class RemoveImageMember:
    image_id: str
    project_id: str | None
    member_id: str


class ImageUpdates(UnitOfWork):
    def __init__(self, catalog: CatalogHandlers) -> None:
        super().__init__(catalog.app)
        self._catalog = catalog

    def _owned(self, image_id: str, project_id: str | None, change: Callable[[Image], None]) -> Result:
        def decide() -> Result:
            image = self._catalog.image(image_id, project_id)
            image.ensure_owned_by(project_id)
            change(image)
            return Result(image.image_id, self.save(image))

        return self.retrying(decide)

    def update_image(self, cmd: UpdateImage) -> Result:
        return self._owned(
            cmd.image_id,
            cmd.project_id,
            lambda image: image.update(cmd.fields, cmd.properties, list(cmd.removed)),
        )

    def set_image_active(self, cmd: SetImageActive) -> Result:
        return self._owned(
            cmd.image_id,
            cmd.project_id,
            lambda image: image.reactivate() if cmd.active else image.deactivate(),
        )

    def add_member(self, cmd: AddImageMember) -> Result:
        try:
            return self._owned(cmd.image_id, cmd.project_id, lambda image: image.add_member(cmd.member_id))
        except Forbidden:  # Glance says no more than this, whether for the owner or the visibility
            raise Forbidden(f"Not allowed to create members for image {cmd.image_id}.") from None

    def remove_member(self, cmd: RemoveImageMember) -> Result:
        try:
            return self._owned(cmd.image_id, cmd.project_id, lambda image: image.remove_member(cmd.member_id))
        except Forbidden:
            raise Forbidden(f"Not allowed to delete members for image {cmd.image_id}.") from None

    def set_member_status(self, cmd: SetImageMemberStatus) -> Result:
        def decide() -> Result:
            image = self._catalog.image(cmd.image_id, cmd.project_id)
            denied = Forbidden(f"Not allowed to update members for image {cmd.image_id}.")
            if image.visibility != "shared":
                raise denied
            image.member(cmd.member_id)  # 404 for a member that is not there
            if cmd.project_id is not None and cmd.project_id != cmd.member_id:
                raise denied
            image.set_member_status(cmd.member_id, cmd.status)
            return Result(image.image_id, self.save(image))

        return self.retrying(decide)
