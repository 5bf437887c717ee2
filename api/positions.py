"""Read your writes: every successful write answers the log position of its last event, in the
``X-Stratus-Position`` header and, where the body allows it, in the body as ``stratus:position``.

Most resources set the header themselves; a resource may instead leave the position it wrote at in
``req.context.written_position`` and this middleware answers it. The body carries the same number
where adding a member cannot change what a client reads:

- a body that wraps its resource in one member (Nova's and Keystone's ``{"server": {...}}``,
  ``{"metadata": {...}}``, ``{"project": {...}}``) gets ``stratus:position`` beside that member: the
  clients read the member they expect and ignore the rest, and the member itself stays exactly
  Nova's (some are maps of user-chosen keys, such as flavor extra specs, where an extra entry would
  read as data);
- a write answered with no body (202 for a server action, 201 for a tag) gets
  ``{"stratus:position": N}`` as its body;
- an unwrapped body (Glance's image, Placement's objects, whose unknown members clients keep as
  properties) and a 204 (which has no body by definition) carry the header only.

A client reads its own write back by sending the position as ``X-Stratus-Min-Position`` (or
``?min_position=``) on a read (api/readmodel.py).
"""

from __future__ import annotations

import falcon

from api.readmodel import POSITION_HEADER

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
BODY_MEMBER = "stratus:position"


class PositionHeader:
    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        if not req_succeeded or req.method not in MUTATING:
            return
        if resp.get_header(POSITION_HEADER) is None:
            position = getattr(req.context, "written_position", None)
            if not (isinstance(position, int) and position > 0):
                return
            resp.set_header(POSITION_HEADER, str(position))
        _into_body(resp, int(resp.get_header(POSITION_HEADER) or 0))


def _into_body(resp: falcon.Response, position: int) -> None:
    media = resp.media
    if isinstance(media, dict) and len(media) == 1 and isinstance(next(iter(media.values())), (dict, list)):
        resp.media = {**media, BODY_MEMBER: position}
    elif resp.status_code in (201, 202) and not _has_body(resp):
        resp.media = {BODY_MEMBER: position}


def _has_body(resp: falcon.Response) -> bool:
    return any(part is not None for part in (resp.media, resp.text, resp.data, resp.stream))
