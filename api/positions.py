"""Read your writes: every successful write answers the log position of its last event in the
``X-Stratus-Position`` header, and only there.

Nova's, Keystone's, Glance's and Placement's bodies have exactly the keys their own services have
at the requested microversion: strict clients (tempest's response schemas, gophercloud, Terraform)
refuse any other key, so Stratus's extras travel in headers. Most resources set the header
themselves; a resource may instead leave the position it wrote at in
``req.context.written_position`` and this middleware answers it.

A client reads its own write back by sending the position as ``X-Stratus-Min-Position`` (or
``?min_position=``) on a read (api/readmodel.py).
"""

from __future__ import annotations

import falcon

from api.readmodel import POSITION_HEADER

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class PositionHeader:
    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        if not req_succeeded or req.method not in MUTATING or resp.get_header(POSITION_HEADER) is not None:
            return
        position = getattr(req.context, "written_position", None)
        if isinstance(position, int) and position > 0:
            resp.set_header(POSITION_HEADER, str(position))
