"""Middleware: a mutating request sent with ``Idempotency-Key`` acts once; a retry gets the first answer.

Every POST, PUT, PATCH and DELETE of every API (Nova, Keystone, Glance, Placement) may carry the
header (a Stratus extra: the bodies keep exactly their keys). The record lives on the log
(``commands.idempotency``), keyed by the caller's project (or user, for a token without one), so it
holds across restarts, API workers and nodes:

- no record: the request runs; its first append carries the key's claim, atomically; once answered,
  the answer (status, body, the resource's headers) is appended to the record;
- a record for the same request (same method, path, query and body) with an answer: that answer is
  replayed (with ``Idempotent-Replayed: true``), the resource is not called;
- a record with no answer (the first run's append reached the log, its answer never did: a crash, a
  lost acknowledgement, a 5xx): the request runs in replay mode, every command returning the claimed
  result without acting, and the answer it renders is recorded;
- a record for another request: 422 ``stratus.idempotency_key_reused`` (as the IETF draft
  "The Idempotency-Key HTTP Header Field"; Stripe answers 400); two requests with one key at the same
  moment: one acts, the other 409 ``stratus.idempotency_key_in_use``.

A request that fails before appending anything (validation, 404, a refused state) leaves no record:
it had no effect, and a retry is decided afresh. 5xx answers are never recorded (the outcome was not
known to the client either). Secrets in an answer (adminPass, private_key, secrets, passwords) are
not recorded, nor is user data: a replay carries their keys with empty values.

Server create keeps its own key handling (``api/servers.py``: a create with a key always answers with
the server the key first made); image data uploads (``application/octet-stream``) and token requests
ignore the header.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from typing import Any

import falcon
from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import IntegrityError
from falcon.stream import BoundedStream

from api import error_codes as codes
from api.body import unstorable
from api.errors import BadRequest
from api.middleware import REQUEST_ID_HEADERS
from api.placement import PREFIX as PLACEMENT
from api.placement.common import error_body
from commands import idempotency
from commands.app import Stratus
from commands.idempotency import IdempotencyKey, Keyed, KeyReused
from commands.unit_of_work import Result
from stratus import serialization
from stratus.context import Actor
from stratus.eventstore.errors import EventStoreUnavailable

log = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
FINGERPRINT = "idempotency-fingerprint"  # the purpose the digest keys are derived for
_MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Values never kept on the log (docs/security.md): secrets, and user data (a server's body at 2.3+).
_SECRETS = frozenset(
    {"adminPass", "private_key", "secret", "password", "original_password", "OS-EXT-SRV-ATTR:user_data"}
)
# Headers an answer is not replayed with: this request's own ids, and what the server adds itself.
_NOT_REPLAYED = frozenset(
    {*(h.lower() for h in REQUEST_ID_HEADERS), "x-subject-token", "date", "content-length"}
)


class IdempotencyKeys:
    """Middleware (after authentication): dedupe retried mutating requests by ``Idempotency-Key``."""

    def __init__(self, app: Stratus, max_body_bytes: int, digests: Callable[[str, bytes], list[str]]) -> None:
        self._app = app
        self._max_body = max_body_bytes
        self._digests = digests  # keyed: the log never holds a plain digest of a body (passwords)

    def process_resource(
        self, req: falcon.Request, resp: falcon.Response, resource: object, params: dict[str, Any]
    ) -> None:
        req.context.idempotency = None
        key = req.get_header(HEADER)
        actor = getattr(req.context, "actor", None)
        if key is None or actor is None or req.method not in _MUTATING or _exempt(req):
            return
        try:
            self._enter(req, resp, key, actor)
        except (BadRequest, KeyReused) as e:
            if not req.path.startswith(PLACEMENT):
                raise  # Nova's fault (Keystone's error under /identity: api/identity/middleware.py)
            status = e.status if isinstance(e, BadRequest) else codes.IDEMPOTENCY_KEY_REUSED.status
            resp.status = falcon.code_to_http_status(status)
            resp.media = error_body(status, e.message, e.code, getattr(req.context, "request_id", ""))
            resp.complete = True  # Placement's error shape, as its responders answer

    def _enter(self, req: falcon.Request, resp: falcon.Response, key: str, actor: Actor) -> None:
        if not 1 <= len(key) <= idempotency.MAX_KEY_LENGTH or unstorable(key):
            raise BadRequest(f"{HEADER} must be 1 to {idempotency.MAX_KEY_LENGTH} storable characters.")
        scope = actor.project_id or f"user:{actor.user_id}"
        fingerprints = self._fingerprints(req)
        request = Keyed(scope, key, fingerprints[0])
        record = self._record(request)
        if record is not None:
            record.check(fingerprints)  # KeyReused: 422
            if record.answer is not None:
                _replay(resp, *record.answer)
                return
            # Acted, answer unknown: render it again without acting.
            request.replay = Result(record.target, self._app.recorder.max_notification_id() or 0)
        req.context.idempotency = request
        req.context.idempotency_token = idempotency.enter(request)

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        request: Keyed | None = getattr(req.context, "idempotency", None)
        if request is None:
            return
        idempotency.leave(req.context.idempotency_token)
        req.context.idempotency = None
        if not (request.claimed or request.replay is not None):
            return  # nothing acted: nothing to answer for
        if request.replay is not None:
            resp.set_header(REPLAYED_HEADER, "true")
        status = resp.status_code
        if status >= 500:
            return  # the claim alone stays: the next retry renders the answer
        body = resp.render_body()
        if body is None and resp.stream is not None:
            return
        headers = {k: v for k, v in resp.headers.items() if k.lower() not in _NOT_REPLAYED}
        self._answer(request, status, _redacted(body or b""), headers)

    def _record(self, request: Keyed) -> IdempotencyKey | None:
        try:
            agg: object = self._app.repository.get(request.record_id)
        except AggregateNotFoundError:
            return None
        return agg if isinstance(agg, IdempotencyKey) else None

    def _answer(self, request: Keyed, status: int, body: str, headers: dict[str, str]) -> None:
        record = self._record(request)
        if record is None or record.answer is not None:
            return
        record.record_answer(status, body, headers)
        try:
            self._app.save(record)
        except (IntegrityError, EventStoreUnavailable) as e:
            # Another retry answered first, or the log is away: the claim stays, and a later retry
            # renders the answer again; the client has this answer already.
            log.info("answer of idempotency key %s not recorded: %s", request.record_id, e)

    def _fingerprints(self, req: falcon.Request) -> list[str]:
        """What makes two requests the same: method, path, query and body (read here, and given back
        to the resource as the stream it reads), digested under each of the deployment's keys."""
        data = BoundedStream(req.env["wsgi.input"], req.content_length or 0).read(self._max_body + 1)
        # The resource reads it again: falcon wraps ``wsgi.input`` on its first read of the body.
        req.env["wsgi.input"] = req.stream = io.BytesIO(data)
        parts = (req.method.encode(), req.path.encode(), req.query_string.encode(), data)
        return self._digests(FINGERPRINT, b"".join(len(p).to_bytes(8, "big") + p for p in parts))


def _exempt(req: falcon.Request) -> bool:
    """Requests the header means nothing to here (see the module's docstring)."""
    if req.method == "POST" and req.path.rstrip("/").endswith("/v2.1/servers"):
        return True
    if "/v3/auth/" in req.path:
        return True
    return (req.content_type or "").startswith("application/octet-stream")


def _replay(resp: falcon.Response, status: int, body: str, headers: dict[str, str]) -> None:
    resp.status = status
    resp.set_headers(headers)
    resp.set_header(REPLAYED_HEADER, "true")
    resp.data = body.encode() if body else None
    resp.complete = True  # the resource is not called


def _redacted(body: bytes) -> str:
    """The answer's body as text, the values of secrets emptied (never kept on the log)."""
    try:
        doc = serialization.loads(body) if body else None
    except ValueError:
        return body.decode("utf-8", "replace")
    if not _has_secret(doc):
        return body.decode()
    return serialization.dumps(_blank(doc)).decode()


def _has_secret(doc: Any) -> bool:
    if isinstance(doc, dict):
        return any(k in _SECRETS or _has_secret(v) for k, v in doc.items())
    if isinstance(doc, list):
        return any(_has_secret(v) for v in doc)
    return False


def _blank(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: ("" if k in _SECRETS and isinstance(v, str) else _blank(v)) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_blank(v) for v in doc]
    return doc
