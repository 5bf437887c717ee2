"""A project's image quota: how many images it has and how much image data it stores.

Glance's unified limits ``image_count_total`` (images that are not deleted) and
``image_size_total`` (MiB of uploaded data). Each project's usage is one small aggregate, appended
in the same atomic append as the image event it counts (created, uploaded, deleted), under its own
concurrency check: two concurrent uploads cannot both take the last megabytes (the loser decides
again and is refused), as the project's servers are charged in ``commands.usage``.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from commands.errors import QuotaExceeded
from commands.quota import check

_NS = uuid5(NAMESPACE_URL, "urn:stratus:image-usage")
IMAGE_COUNT = "image_count_total"
IMAGE_SIZE = "image_size_total"
MIB = 1024 * 1024


@dataclass(frozen=True)
class ImageLimits:
    """Per-project limits (-1: unlimited): images, and MiB of image data."""

    image_count_total: int = 100
    image_size_total: int = 10240


def image_usage_id(project_id: str) -> UUID:
    return uuid5(_NS, project_id)


class ImageUsage(Aggregate):
    """The images of one project and the bytes each one stores (0 until its data is uploaded)."""

    @staticmethod
    def create_id(project_id: str) -> UUID:
        return image_usage_id(project_id)

    class Opened(Aggregate.Created):
        """A project's image quota usage began to be counted (commands/image_usage.py)."""

        project_id: str

    @event(Opened)
    def __init__(self, project_id: str) -> None:
        self.project_id = project_id
        self.images: dict[str, int] = {}

    @property
    def stored(self) -> int:
        """Bytes of image data the project stores."""
        return sum(self.images.values())

    def admit(self, image_id: str, limits: ImageLimits) -> None:
        """Count a new image (Glance's 413 past ``image_count_total``)."""
        if image_id in self.images:
            return
        check({IMAGE_COUNT: limits.image_count_total}, {IMAGE_COUNT: len(self.images)}, {IMAGE_COUNT: 1})
        self._admitted(image_id)

    class ImageAdmitted(Aggregate.Event):
        """An image was counted against the project's image_count_total, in the same atomic append as its
        creation."""

        image_id: str

    @event(ImageAdmitted)
    def _admitted(self, image_id: str) -> None:
        self.images = {**self.images, image_id: 0}

    def remaining(self, limits: ImageLimits) -> int | None:
        """Bytes the project may still upload (None: unlimited)."""
        if limits.image_size_total < 0:
            return None
        return max(0, limits.image_size_total * MIB - self.stored)

    def charge(self, image_id: str, size: int, limits: ImageLimits) -> None:
        """Count ``size`` bytes of ``image_id``'s data, within ``image_size_total``."""
        left = self.remaining(limits)
        if left is not None and size > left:
            used = -(-self.stored // MIB)
            raise QuotaExceeded(
                f"Quota exceeded for {IMAGE_SIZE}: Requested {-(-size // MIB)} MiB, "
                f"but already used {used} of {limits.image_size_total} MiB {IMAGE_SIZE}"
            )
        self._charged(image_id, size)

    class ImageCharged(Aggregate.Event):
        """An image's uploaded bytes were counted against the project's image_size_total, in the same
        atomic append as the upload."""

        image_id: str
        size: int

    @event(ImageCharged)
    def _charged(self, image_id: str, size: int) -> None:
        self.images = {**self.images, image_id: size}

    def release(self, image_id: str) -> None:
        if image_id in self.images:
            self._released(image_id)

    class ImageReleased(Aggregate.Event):
        """An image stopped counting (deleted), in the same atomic append as its deletion."""

        image_id: str

    @event(ImageReleased)
    def _released(self, image_id: str) -> None:
        self.images = {k: v for k, v in self.images.items() if k != image_id}
