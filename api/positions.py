"""Read your writes: every successful write answers the log position of its last event in the
``X-Stratus-Position`` header, and only there.

Nova's, Keystone's, Glance's and Placement's bodies have exactly the keys their own services have
at the requested microversion: strict clients (tempest's response schemas, gophercloud, Terraform)
refuse any other key, so Stratus's extras travel in headers. Most resources set the header
themselves; a resource may instead leave the position it wrote at in
``req.context.written_position`` and this middleware answers it.

A client reads its own write back by sending the position as ``X-Stratus-Min-Position`` (or
``?min_position=``) on a read (api/readmodel.py). A client that does not (tempest, the stock CLI
and SDKs know nothing of it) still reads its own writes from the API process it wrote through: the
process remembers each user's and each project's last written position (``Written``), and a read
without a position of its own waits for the later of its user's and its project's (and the
project an admin's write concerned: ``req.context.written_project``), as Nova's clients expect of a
database they read after writing.
"""

from __future__ import annotations

import falcon

from api.readmodel import POSITION_HEADER, Written, project_key

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class PositionHeader:
    """Middleware: a write's answer says its log position in ``X-Stratus-Position``."""

    def __init__(self, written: Written | None = None) -> None:
        self._written = written

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        if not req_succeeded or req.method not in MUTATING:
            return
        header = resp.get_header(POSITION_HEADER)
        position = int(header) if header is not None else getattr(req.context, "written_position", None)
        if not (isinstance(position, int) and position > 0):
            return
        if header is None:
            resp.set_header(POSITION_HEADER, str(position))
        actor = getattr(req.context, "actor", None)
        if self._written is not None and actor is not None:
            self._written.record(actor.user_id, position)
            # the project's other users (a reader, tempest's alt member) read it too, as in Nova
            self._written.record(project_key(actor.project_id), position)
            concerned = getattr(req.context, "written_project", None)
            if concerned:  # an admin wrote to another project's resource
                self._written.record(project_key(concerned), position)
