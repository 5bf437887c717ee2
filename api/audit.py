"""``/v2.1/stratus/...``: history and past state for auditors, read from the log (not the read models).

- ``GET /v2.1/stratus/history/{kind}/{id}?limit=&marker=``: every event of a resource, oldest first,
  as structured CloudEvents with actor, request, correlation and causation ids and chain hashes;
  ``marker`` is the position of the last event already seen.
- ``GET /v2.1/stratus/state/{kind}/{id}?as_of=<position|RFC 3339 time>``: the resource as it was.
- ``GET /v2.1/stratus/usage/{project_id}?as_of=...``: a project's quota usage as it was.
- ``GET /v2.1/stratus/audit/verify?upto=&anchor=POSITION:HASH``: the hash chain checked from position 1
  (``stratus audit verify`` over HTTP), for auditors only.

``kind``: ``server``, ``host``, ``flavor``, or ``aggregate`` (any aggregate id). Project isolation:
a server's history and state are visible to its project (another project's server does not exist:
404); hosts, flavors and raw aggregates, and other projects' usage, need an auditor (admin).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from uuid import UUID

import falcon

from api import auth
from api.errors import BadRequest, ItemNotFound
from api.redaction import project_of, state_for_member, view
from commands import resources
from commands.app import Stratus
from commands.errors import InvalidInput
from projections import asof
from stratus import positions
from stratus.audit import history, verify
from stratus.config import Settings
from stratus.context import Actor

DEFAULT_LIMIT = 100
# ``verify.verify`` bound to the deployment's stream: (upto, anchors) -> the report.
Verifier = Callable[[int | None, Mapping[int, str]], verify.Report]


def can_audit_everything(actor: Actor) -> bool:
    """Auditors read across projects: Nova's admins (the identity layer decides who holds the role)."""
    return auth.is_admin(actor)


def _as_of(req: falcon.Request) -> asof.AsOf:
    raw = req.get_param("as_of")
    if raw is None:
        raise BadRequest("as_of is required: a log position or an RFC 3339 timestamp")
    try:
        return asof.AsOf.parse(raw)
    except asof.InvalidAsOf as e:
        raise BadRequest(str(e)) from None


def _limit_marker(req: falcon.Request) -> tuple[int, int | None]:
    limit = DEFAULT_LIMIT
    raw = req.get_param("limit")
    if raw is not None:
        try:
            limit = min(positions.parse_natural(raw), history.MAX_PAGE)
        except ValueError:
            limit = 0
        if limit < 1:
            raise BadRequest("limit param must be a positive integer")
    raw_marker = req.get_param("marker")
    if raw_marker is None:
        return limit, None
    try:
        return limit, positions.parse_natural(raw_marker)
    except ValueError:
        raise BadRequest("marker param must be a log position (an integer)") from None


class _Audit:
    def __init__(self, app: Stratus, log: history.LogReader) -> None:
        """``app``: the aggregates past states are folded with; ``log``: where their events are read."""
        self._app = app
        self._reader = log

    def _aggregate(self, actor: Actor, kind: str, resource_id: str) -> UUID | str:
        try:
            aggregate_id = resources.aggregate_id(kind, resource_id)
        except InvalidInput as e:
            raise BadRequest(e.message) from None
        if kind == "server":
            if not can_audit_everything(actor) and self._owner(aggregate_id) != actor.project_id:
                raise ItemNotFound(f"Instance {resource_id} could not be found.")
        elif not can_audit_everything(actor):
            auth.require_admin(actor, f"os_compute_api:stratus:audit:{kind}")
        return aggregate_id

    def _owner(self, aggregate_id: UUID | str) -> str | None:
        first, _ = history.page(self._reader, aggregate_id, limit=1)
        return project_of(first[0]) if first else None


class History(_Audit):
    """``GET /v2.1/stratus/history/{kind}/{id}``: every event of one resource, as the log holds it."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, kind: str, resource_id: str) -> None:
        aggregate_id = self._aggregate(req.context.actor, kind, resource_id)
        limit, marker = _limit_marker(req)
        entries, next_marker = history.page(self._reader, aggregate_id, limit=limit, marker=marker)
        if not entries and marker is None:
            raise ItemNotFound(f"No history for {kind} {resource_id}.")
        admin = can_audit_everything(req.context.actor)
        shown = (view(e, admin=admin, where="history") for e in entries)
        events = [event for event in shown if event is not None]
        body: dict[str, Any] = {
            "kind": kind,
            "id": resource_id,
            "aggregate_id": str(aggregate_id),
            "events": events,
        }
        if next_marker is not None:
            body["next_marker"] = next_marker
            href = f"{req.prefix}{req.path}?limit={limit}&marker={next_marker}"
            body["links"] = [{"rel": "next", "href": href}]
        resp.media = body


class State(_Audit):
    """``GET /v2.1/stratus/state/{kind}/{id}``: a resource's state at a past point of the log."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, kind: str, resource_id: str) -> None:
        aggregate_id = self._aggregate(req.context.actor, kind, resource_id)
        as_of = _as_of(req)
        if not isinstance(aggregate_id, UUID):
            raise BadRequest("Past state is available for aggregates with UUID ids")
        past = asof.state_at(self._app, self._reader, aggregate_id, as_of)
        if past is None:
            raise ItemNotFound(f"{kind} {resource_id} did not exist at {as_of.describe()}.")
        resp.media = {
            "kind": kind,
            "id": resource_id,
            "as_of": as_of.describe(),
            "version": past.version,
            "position": past.position,
            "time": past.time,
            "state": past.state if can_audit_everything(req.context.actor) else state_for_member(past.state),
        }


class Usage(_Audit):
    """``GET /v2.1/stratus/usage/{project_id}``: a project's usage, computed from the log."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, project_id: str) -> None:
        actor: Actor = req.context.actor
        if project_id != actor.project_id and not can_audit_everything(actor):
            auth.require_admin(actor, "os_compute_api:stratus:audit:usage")
        as_of = _as_of(req)
        usage = asof.project_usage(self._app, self._reader, project_id, as_of)
        resp.media = {"usage": {**usage.to_dict(), "as_of": as_of.describe()}}


def _anchors(req: falcon.Request) -> dict[int, str]:
    anchors: dict[int, str] = {}
    for raw in req.get_param_as_list("anchor") or []:
        position, sep, value = raw.partition(":")
        hexdigits = len(value) == 64 and all(c in "0123456789abcdefABCDEF" for c in value)
        try:
            at = positions.parse_natural(position)
        except ValueError:
            at = 0
        if not sep or at < 1 or not hexdigits:
            raise BadRequest(f"anchor {raw[:80]!r} is not POSITION:HASH (a position, 64 hex digits)")
        anchors[at] = value.lower()
    return anchors


class Verification:
    """``GET /v2.1/stratus/audit/verify``: the log's hash chain checked from position 1 (auditors only).

    The report of ``stratus audit verify --json`` (without the signatures' pass) and the anchor to
    record; ``upto`` stops at a position, each ``anchor`` (repeatable) must still hold. It reads the
    whole log up to there (~40k events/s): a large log takes the request that long.
    """

    def __init__(self, verifier: Verifier) -> None:
        self._verify = verifier

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        auth.require_admin(req.context.actor, "os_compute_api:stratus:audit:verify")
        upto = None
        raw = req.get_param("upto")
        if raw is not None:
            try:
                upto = positions.parse_natural(raw)
            except ValueError:
                upto = 0
            if upto < 1:
                raise BadRequest("upto param must be a log position (a positive integer)")
        report = self._verify(upto, _anchors(req))
        body = report.to_dict()
        body["anchor"] = f"{report.last_position}:{report.global_hash}" if report.ok else None
        resp.media = {"verification": body}


def stream_verifier(settings: Settings) -> Verifier:
    """The chain check of the deployment's stream, read with the process's NATS identity."""

    def check(upto: int | None, anchors: Mapping[int, str]) -> verify.Report:
        return verify.verify(
            settings.nats_urls, settings.stream, settings.subject_prefix, upto=upto, anchors=anchors,
            seed_file=settings.nats_seed_file,
        )  # fmt: skip

    return check
