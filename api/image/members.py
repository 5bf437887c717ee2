"""``/image/v2/images/{id}/members``: sharing an image with other projects, as Glance does.

The owner (or an admin) adds and removes members of a ``shared`` image; a member project answers
its own membership (``pending`` → ``accepted`` or ``rejected``); the owner sees every member, a
member only itself. Memberships live in the image's aggregate (``Image.MemberAdded``...), so they
are read from the log: a client sees its change at once.
"""

from __future__ import annotations

from typing import Any

import falcon

from api import auth
from api.body import read_document
from api.errors import BadRequest, Forbidden, ItemNotFound, PayloadTooLarge
from api.image.images import member_key
from api.readmodel import POSITION_HEADER, ReadModel
from commands.bus import MessageBus
from commands.errors import Forbidden as DomainForbidden
from commands.errors import QuotaExceeded
from commands.image import Member
from commands.images.create import visible_image
from commands.images.update import AddImageMember, RemoveImageMember, SetImageMemberStatus
from commands.unit_of_work import Result
from stratus.context import acting

API = "/v2"
MAX_MEMBER_ID = 255


def member_view(image_id: str, member_id: str, member: Member) -> dict[str, Any]:
    return {
        "member_id": member_id,
        "image_id": image_id,
        "status": member.status,
        "created_at": member.created_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "updated_at": member.updated_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "schema": f"{API}/schemas/member",
    }


def _scope(req: falcon.Request) -> str | None:
    return None if auth.is_admin(req.context.actor) else req.context.actor.project_id


def _body(req: falcon.Request, max_bytes: int) -> Any:
    doc = read_document(req, max_bytes)
    if doc is None:
        raise BadRequest("Body expected in request.")
    return doc


def _field(body: Any, name: str, missing: str, form: str) -> str:
    if not isinstance(body, dict):
        raise BadRequest(f"Expected a {name} in the form: {form}")
    if name not in body:
        raise BadRequest(missing)
    value = body[name]
    if not isinstance(value, str):
        raise BadRequest(f"Expected a {name} in the form: {form}")
    return value


class _Members:
    def __init__(self, bus: MessageBus, read: ReadModel, max_body_bytes: int) -> None:
        self._read = read
        self._bus = bus
        self._max_body = max_body_bytes

    def _written(self, resp: falcon.Response, result: Result, member_id: str) -> None:
        """The member project's lists wait for this change, though another project made it."""
        self._read.note(member_key(member_id), result.position)
        resp.set_header(POSITION_HEADER, str(result.position))

    def _answer(self, resp: falcon.Response, result: Result, member_id: str) -> None:
        image = visible_image(self._bus.uow, result.id, None)
        self._written(resp, result, member_id)
        resp.media = member_view(image.image_id, member_id, image.member(member_id))


class MemberCollection(_Members):
    """``GET``/``POST /image/v2/images/{id}/members``: the projects a shared image is offered to."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
        scope = _scope(req)
        image = visible_image(self._bus.uow, image_id, scope)
        if image.visibility != "shared":
            raise Forbidden(
                f"Not allowed to list members for image {image.image_id}: Only shared images have members."
            )
        mine = scope is None or scope == image.owner
        members = [
            member_view(image.image_id, mid, m)
            for mid, m in sorted(image.members.items())
            if mine or mid == scope
        ]
        resp.media = {"members": members, "schema": f"{API}/schemas/members"}

    def on_post(self, req: falcon.Request, resp: falcon.Response, image_id: str) -> None:
        body = _body(req, self._max_body)
        member_id = _field(body, "member", "Member to be added not specified", '{"member": "image_id"}')
        if not member_id:
            raise BadRequest("Member can't be empty")
        if len(member_id) > MAX_MEMBER_ID:
            raise BadRequest(f"Member id is longer than {MAX_MEMBER_ID} characters.")
        try:
            with acting(req.context.command):
                result = self._bus.handle(AddImageMember(image_id, _scope(req), member_id))
        except QuotaExceeded as e:
            raise PayloadTooLarge(e.message) from None
        self._answer(resp, result, member_id)


class MemberItem(_Members):
    """``GET``/``PUT``/``DELETE /image/v2/images/{id}/members/{member}``: a member's status."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, image_id: str, member_id: str) -> None:
        scope = _scope(req)
        image = visible_image(self._bus.uow, image_id, scope)
        try:
            member = image.member(member_id)
        except DomainForbidden as e:  # Glance hides what it will not show
            raise ItemNotFound(e.message) from None
        if scope is not None and scope not in (image.owner, member_id):
            raise ItemNotFound(f"{member_id} not found in the member list of the image {image.image_id}.")
        resp.media = member_view(image.image_id, member_id, member)

    def on_put(self, req: falcon.Request, resp: falcon.Response, image_id: str, member_id: str) -> None:
        body = _body(req, self._max_body)
        status = _field(body, "status", "Status not specified", '{"status": "status"}')
        with acting(req.context.command):
            result = self._bus.handle(SetImageMemberStatus(image_id, _scope(req), member_id, status))
        self._answer(resp, result, member_id)

    def on_delete(self, req: falcon.Request, resp: falcon.Response, image_id: str, member_id: str) -> None:
        with acting(req.context.command):
            result = self._bus.handle(RemoveImageMember(image_id, _scope(req), member_id))
        resp.status = falcon.HTTP_204
        self._written(resp, result, member_id)
