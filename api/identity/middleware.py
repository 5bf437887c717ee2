"""Errors in Keystone's shape under ``/identity``: ``{"error": {"code", "title", "message"}}``.

``api/errors.py`` renders every failure as Nova's fault body, in one place; this middleware rewrites
that body for the paths Keystone's clients call, so the mapping from exception to status stays one.
"""

from __future__ import annotations

import falcon

from api.identity.common import PREFIX

_TITLES = {
    400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 409: "Conflict",
    429: "Too Many Requests", 503: "Service Unavailable",
}  # fmt: skip


class KeystoneErrors:
    """Middleware: under ``/identity``, Nova's fault body becomes Keystone's ``{"error": {...}}``."""

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        if not (req.path == PREFIX or req.path.startswith(PREFIX + "/")):
            return
        media = resp.media
        if not isinstance(media, dict) or len(media) != 1:
            return
        (fault,) = media.values()
        if not isinstance(fault, dict) or "code" not in fault or "message" not in fault:
            return
        code = int(fault["code"])
        if code < 400:
            return
        error = {"code": code, "title": _TITLES.get(code, "Error"), "message": fault["message"]}
        resp.media = {"error": error}
