"""An image's tags (``PUT/DELETE /image/v2/images/{id}/tags/{tag}``) and its deactivation
(``POST /image/v2/images/{id}/actions/deactivate`` and ``.../reactivate``), as Glance serves them.

Both are changes of the owner's (or an admin's), recorded as ``Image.Updated`` and
``Image.Deactivated``/``Reactivated``; each answers 204.
"""

from __future__ import annotations

import falcon

from api import auth
from api.errors import BadRequest, ItemNotFound, PayloadTooLarge
from api.readmodel import POSITION_HEADER
from commands.bus import MessageBus
from commands.errors import Forbidden, QuotaExceeded
from commands.images.create import visible_image
from commands.images.update import SetImageActive, UpdateImage
from commands.unit_of_work import Result
from stratus.context import acting

MAX_TAG = 255


def _scope(req: falcon.Request) -> str | None:
    return None if auth.is_admin(req.context.actor) else req.context.actor.project_id


def _done(resp: falcon.Response, result: Result) -> None:
    resp.status = falcon.HTTP_204
    resp.set_header(POSITION_HEADER, str(result.position))


class ImageTag:
    """``PUT``/``DELETE /image/v2/images/{id}/tags/{tag}``: Glance's image tags."""

    def __init__(self, bus: MessageBus) -> None:
        self._bus = bus

    def _retag(self, req: falcon.Request, image_id: str, tag: str, *, add: bool) -> Result:
        scope = _scope(req)
        image = visible_image(self._bus.uow, image_id, scope)
        try:
            image.ensure_owned_by(scope)
        except Forbidden:
            verb = "update" if add else "delete"
            raise Forbidden(f"Not allowed to {verb} tags for image {image.image_id}.") from None
        if add:
            tags = [*image.tags, tag]
        elif tag in image.tags:
            tags = [t for t in image.tags if t != tag]
        else:
            raise ItemNotFound(f"Tag {tag} not found.")
        try:
            with acting(req.context.command):
                return self._bus.handle(UpdateImage(image.image_id, scope, {"tags": tags}))
        except QuotaExceeded as e:
            raise PayloadTooLarge(
                f"Image tag limit exceeded for image {image.image_id}: {e.message}:"
            ) from None

    def on_put(self, req: falcon.Request, resp: falcon.Response, image_id: str, tag: str) -> None:
        if len(tag) > MAX_TAG:
            raise BadRequest(f"Provided object does not match schema 'image': '{tag[:64]}...' is too long")
        _done(resp, self._retag(req, image_id, tag, add=True))

    def on_delete(self, req: falcon.Request, resp: falcon.Response, image_id: str, tag: str) -> None:
        _done(resp, self._retag(req, image_id, tag, add=False))


class ImageAction:
    """``POST .../actions/deactivate`` or ``.../actions/reactivate`` (one resource per action)."""

    def __init__(self, bus: MessageBus, *, active: bool) -> None:
        self._bus = bus
        self._active = active

    def on_post(self, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
        with acting(req.context.command):
            result = self._bus.handle(SetImageActive(image_id, _scope(req), self._active))
        _done(resp, result)
