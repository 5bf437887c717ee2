"""``GET /v2.1/stratus/events``: the log as server-sent events, for integrators without NATS.

Each event is one SSE message: ``id:`` its position, ``event:`` its CloudEvents type, ``data:`` the
structured-mode CloudEvent (``schemas/envelope.v1.json``, the same envelope as the history, with the
chain hashes). Filters: ``type`` (a resource kind: ``server``/``instance``, ``host``, ``flavor``, or
any other aggregate kind), ``id`` (one resource; with ``type``, or an aggregate id), ``project`` (the
events of resources owned by one project). Resuming: the ``Last-Event-ID`` header (what browsers'
EventSource sends on reconnect) or ``?after=<position>``; without either the stream starts at the
end of the log (new events only). A position older than the stream's first (if retention is ever
set) is a 410 with the first position still available.

Why a separate process (``stratus watch``): a stream holds its request for as long as the client
listens, and the API's gunicorn sync workers (2 by default) would be taken by two watchers. The
watch process serves the same falcon app (same identity, policy, errors and request ids) under
gunicorn's threaded worker (``gthread``): one thread per open stream, each with its own cursor on
the log, reading through the process's one NATS connection; a slow reader blocks only its own
thread's socket writes, never the others or the log. Keep-alive comments every ``heartbeat``
seconds let the server notice clients that went away.

Browsers: the dashboard (``api/dashboard``) is served by the API on another port, and reads the
stream with ``fetch`` and its ``X-Auth-Token`` header (EventSource cannot send one, and a token never
goes in a URL). That is a cross-origin read, which the stream allows (CORS) to pages served from the
same host name as the one the browser asked the stream from; no cookie is involved, so allowing an
origin lends it nothing it does not already hold (the token).

Visibility: a member sees only their project's resources (``project`` defaults to theirs; another
project is 403); auditors (admin) see everything, or one project with ``project``. A resource's
project is the ``project_id`` of its aggregate's first event; resources without one (hosts,
flavors), identity records (projects, users, role grants) and Placement's consumers (their
allocations name compute hosts' providers) are visible to auditors only.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import falcon
import nats.errors
import orjson

from api import error_codes as codes
from api.app import Deps, LazyApp
from api.audit import can_audit_everything
from api.auth import Authenticator
from api.errors import ApiError, BadRequest, Forbidden, TooManyRequests, Unauthorized
from api.readmodel import ReadModel
from api.redaction import project_of, view
from commands import resources
from commands.errors import InvalidInput
from stratus import positions
from stratus.audit import history
from stratus.config import Settings
from stratus.context import Actor
from stratus.eventstore import EventStoreUnavailable, JetStreamApplicationRecorder
from stratus.eventstore.envelope import UNDECODABLE_TOPIC

log = logging.getLogger("stratus.watch")

ROUTE = "/v2.1/stratus/events"
DEFAULT_THREADS = 64
HEARTBEAT_SECONDS = 15.0
_PAGE = 500
# A stream's last words when the watch is stopping (a comment: EventSource reconnects on the end).
STOPPING = b": stratus watch is stopping; reconnect\n\n"
# Identity records (a project itself, its users and role grants) are for auditors, even when they
# name a project: Keystone's default policy lets members list neither users nor role assignments.
IDENTITY_KINDS = frozenset({"project", "user", "role", "group", "domain", "token", "credential"})
# Placement's records name resource providers (compute hosts) by id: Placement's API is for admins
# and services, and the server view shows members no host, so a consumer's allocations are for
# auditors too, whatever project they are charged to.
PLACEMENT_KINDS = frozenset({"consumer", "placementcatalog"})
_KIND_ALIASES = {"server": "instance", "servers": "instance", "hypervisor": "host"}


class PositionExpired(ApiError, error=codes.POSITION_EXPIRED):
    """The stream no longer holds the position asked to resume from."""


# Kinds whose first event names their owner by another field than ``project_id``: an image's
# project is Glance's ``owner``; a key pair belongs to a user (``user:<id>``), not to a project.
_OWNER_FIELDS = {"image": "owner"}
USER_KINDS = frozenset({"keypair"})


def owner_of(first: history.Entry, kind: str) -> str | None:
    """Who owns an aggregate of ``kind`` whose first event is ``first``: a project id, ``user:<id>``
    for a user's own resource, or None (auditors only)."""
    if kind in IDENTITY_KINDS | PLACEMENT_KINDS:
        return None
    if kind in USER_KINDS:
        user = project_of(first, "user_id")
        return None if user is None else f"user:{user}"
    return project_of(first, _OWNER_FIELDS.get(kind, "project_id"))


class _Owners:
    """Who owns an aggregate (``owner_of`` its first event), cached per stream."""

    def __init__(self, reader: history.LogReader, size: int = 10_000) -> None:
        self._reader = reader
        self._cache: OrderedDict[str, str | None] = OrderedDict()
        self._size = size

    def of(self, entry: history.Entry) -> str | None:
        if entry.envelope.topic == UNDECODABLE_TOPIC:  # no aggregate to look up: for auditors only
            return None
        key = str(entry.envelope.originator_id)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        first = entry
        if entry.envelope.originator_version != 1:
            found, _ = history.page(self._reader, entry.envelope.originator_id, limit=1)
            first = found[0] if found else entry
        kind = entry.envelope.type.split(".")[1] if entry.envelope.type.count(".") >= 2 else ""
        owner = owner_of(first, kind)
        self._cache[key] = owner
        while len(self._cache) > self._size:
            self._cache.popitem(last=False)
        return owner


def sse(entry: history.Entry, *, member: bool = False) -> bytes | None:
    """One SSE message; a member's has its data redacted as the server view is; None for a message
    this reader is not shown (api/redaction.py: not a readable event, or of an unknown type)."""
    event = view(entry, admin=not member, where="event stream")
    if event is None:
        return None
    data = orjson.dumps(event)  # one line: orjson emits no newline (and escapes control characters)
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (entry.position, entry.envelope.type.encode(), data)


@dataclasses.dataclass(frozen=True)
class StreamLimits:
    """Open streams at most per user and in all (each holds a thread of ``stratus watch``), and how
    often an open stream checks that its token is still good."""

    per_user: int = 4
    total: int = 60
    recheck_seconds: float = 5.0

    @classmethod
    def for_pool(cls, settings: Settings, threads: int) -> StreamLimits:
        """The limits of a process serving with ``threads`` threads: ``watch_max_streams`` at most,
        and never so many that no thread is left for the API's other requests (an eighth of the
        threads, at least two, stay free; one stream is always allowed)."""
        spare = max(2, threads // 8)
        total = max(1, min(settings.watch_max_streams, threads - spare))
        return cls(per_user=settings.watch_max_streams_per_user, total=total)


_LATER = {"Retry-After": "10"}


class _Open:
    """The streams open now, per user; one lock, since each stream is served by a thread."""

    def __init__(self, limits: StreamLimits) -> None:
        self._limits = limits
        self._lock = threading.Lock()
        self._by_user: dict[str, int] = {}

    def take(self, user_id: str) -> None:
        with self._lock:
            mine = self._by_user.get(user_id, 0)
            if mine >= self._limits.per_user:
                raise TooManyRequests(
                    f"You have {mine} event streams open, the most allowed; close one first.",
                    headers=_LATER,
                )
            if sum(self._by_user.values()) >= self._limits.total:
                raise TooManyRequests("Too many event streams are open; retry later.", headers=_LATER)
            self._by_user[user_id] = mine + 1

    def release(self, user_id: str) -> None:
        with self._lock:
            left = self._by_user.get(user_id, 0) - 1
            if left > 0:
                self._by_user[user_id] = left
            else:
                self._by_user.pop(user_id, None)


class _Stream:
    """The response body of one stream: its events, and the release of its place when the server
    closes it, whether it was read to the end, abandoned by the client, or never started."""

    def __init__(self, events: Iterator[bytes], release: Callable[[], None]) -> None:
        self._events = events
        self._release: Callable[[], None] | None = release

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        return next(self._events)

    def close(self) -> None:
        close = getattr(self._events, "close", None)
        if close is not None:
            close()
        release, self._release = self._release, None
        if release is not None:
            release()


def allowed_origin(req: falcon.Request) -> str | None:
    """The page origin a browser may read the stream from: one on the host name this request was
    sent to (the dashboard served by the API, on another port of the same host), else None."""
    origin = req.get_header("Origin")
    if not origin:
        return None
    try:
        host = urlsplit(origin).hostname
    except ValueError:
        return None
    return origin if host is not None and host == req.host.lower() else None


def cross_origin(req: falcon.Request, resp: falcon.Response) -> None:
    """The CORS headers of an answer to a page of ``allowed_origin``."""
    resp.append_header("Vary", "Origin")
    origin = allowed_origin(req)
    if origin is not None:
        resp.set_header("Access-Control-Allow-Origin", origin)


class Events:
    """``GET /v2.1/stratus/events``: the log's events as server-sent events, for what the caller may see."""

    # A browser's preflight of a cross-origin read carries no token (it asks whether one may be sent).
    public = frozenset({"OPTIONS"})

    def __init__(
        self,
        recorder: JetStreamApplicationRecorder,
        heartbeat: float = HEARTBEAT_SECONDS,
        *,
        authenticator: Authenticator | None = None,
        limits: StreamLimits | None = None,
    ) -> None:
        self._recorder = recorder
        self._heartbeat = heartbeat
        self._auth = authenticator
        self._limits = limits or StreamLimits()
        self._open = _Open(self._limits)
        self._stopping = threading.Event()

    def stop(self) -> None:
        """End every open stream now (the process was told to stop): each says so in a comment and
        ends, and the clients reconnect after the stream's ``retry`` (to another watch, in a rolling
        restart) instead of holding the worker until gunicorn's graceful timeout kills it."""
        self._stopping.set()
        self._recorder.wake_waiters()

    def _filter(self, req: falcon.Request) -> str:
        layout = self._recorder.layout
        kind = req.get_param("type")
        resource_id = req.get_param("id")
        if resource_id is not None:
            try:
                api_kind = kind if kind in resources.KINDS else "aggregate"
                return layout.aggregate_filter(resources.aggregate_id(api_kind, resource_id))
            except InvalidInput as e:
                raise BadRequest(e.message) from None
        if kind is not None:
            kind = _KIND_ALIASES.get(kind.lower(), kind.lower())
            if not kind or len(kind) > 64:
                raise BadRequest("type must be a resource kind, e.g. server, host or flavor")
            return layout.kind_filter(kind)
        return layout.all

    def _project(self, actor: Actor, req: falcon.Request) -> str | None:
        project = req.get_param("project")
        if can_audit_everything(actor):
            return project
        if project is not None and project != actor.project_id:
            raise Forbidden("Policy doesn't allow os_compute_api:stratus:events for another project.")
        return actor.project_id

    def _start(self, req: falcon.Request) -> int:
        raw = req.get_header("Last-Event-ID") or req.get_param("after")
        if raw is None:
            return (self._recorder.max_notification_id() or 0) + 1
        try:
            start = positions.parse_natural(raw) + 1
        except ValueError:
            raise BadRequest("Last-Event-ID / after must be a log position (an integer)") from None
        first = self._first_position()
        if start < first:
            raise PositionExpired(
                f"Position {start - 1} is no longer in the log (retention); the oldest available is {first}. "
                f"Resume from after={first - 1} and rebuild what came before from an export."
            )
        return start

    def _first_position(self) -> int:
        r = self._recorder

        async def info() -> int:
            return int((await r.bridge.js.stream_info(r.stream)).state.first_seq or 1)

        try:
            return r.bridge.run(info, r.attempt_timeout)
        except (nats.errors.Error, TimeoutError) as e:
            raise EventStoreUnavailable(f"could not read the stream's first position: {e}") from e

    def on_options(self, req: falcon.Request, resp: falcon.Response) -> None:
        """The CORS preflight: GET with a token and a resume position, from an allowed origin."""
        cross_origin(req, resp)
        resp.set_header("Access-Control-Allow-Methods", "GET")
        resp.set_header("Access-Control-Allow-Headers", "X-Auth-Token, Last-Event-ID")
        resp.set_header("Access-Control-Max-Age", "600")
        resp.status = falcon.HTTP_204

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        cross_origin(req, resp)
        actor: Actor = req.context.actor
        subject_filter = self._filter(req)
        project = self._project(actor, req)
        start = self._start(req)
        owners = _Owners(self._recorder)
        mine = {project, f"user:{actor.user_id}"}  # the project's resources and the user's own
        visible: Callable[[history.Entry], bool] = (
            (lambda e: True) if project is None else (lambda e: owners.of(e) in mine)
        )
        member = not can_audit_everything(actor)
        events = self._events(start, subject_filter, visible, member, self._still_allowed(req, actor))
        # Last, so that nothing can fail between taking a place and handing its release to the body
        # (which the server closes however the stream ends); a refusal is an ordinary JSON error.
        self._open.take(actor.user_id)
        resp.content_type = "text/event-stream"
        resp.set_header("Cache-Control", "no-cache")
        resp.set_header("X-Accel-Buffering", "no")  # no proxy buffering (nginx)
        resp.stream = _Stream(events, lambda: self._open.release(actor.user_id))

    def _still_allowed(self, req: falcon.Request, actor: Actor) -> Callable[[], str]:
        """Why the stream must end now, or "" while its token is still good: ``unauthorized`` once the
        token expired or was revoked (any token of its chain), or its user was disabled, changed
        password or lost a role (``api/auth.py`` decides); ``unavailable`` when the identity read
        model cannot say (ended rather than trusted: the client reconnects and is checked afresh)."""
        authenticated = getattr(req.context, "auth", None)
        if self._auth is None or authenticated is None:
            return lambda: ""
        auth, token = self._auth, authenticated.token

        def check() -> str:
            try:
                auth.authenticate(req, token)
            except Unauthorized:
                return "unauthorized"
            except ApiError as e:  # the read model unreachable or behind: its own errors, 503
                log.warning("event stream of user %s: token not re-checked: %s", actor.user_id, e)
                return "unavailable"
            return ""

        return check

    def _events(
        self,
        cursor: int,
        subject_filter: str,
        visible: Callable[[history.Entry], bool],
        member: bool,
        refused: Callable[[], str],
    ) -> Iterator[bytes]:
        """The stream's messages. The token is checked again every ``recheck_seconds`` (before the
        next message goes out, however long the backlog, and while idle), so a stream outlives its
        token's validity by that much at most."""
        r = self._recorder
        yield b"retry: 2000\n: stratus events from position %d\n\n" % cursor
        beat = checked = time.monotonic()
        wait = min(self._heartbeat, self._limits.recheck_seconds)

        def ended() -> bytes | None:
            nonlocal checked
            if time.monotonic() - checked < self._limits.recheck_seconds:
                return None
            reason = refused()
            checked = time.monotonic()
            if not reason:
                return None
            return b'event: stratus.stream.ended\ndata: {"reason": "%s"}\n\n' % reason.encode()

        while True:
            if (end := ended()) is not None:
                yield end
                return
            if self._stopping.is_set():
                yield STOPPING
                return
            last = r.max_notification_id() or 0
            while cursor <= last:
                msgs = r.read_messages(cursor, _PAGE, stop=last, subject_filter=subject_filter)
                for m in msgs:
                    entry = history.entry_of(m)
                    if not visible(entry) or (message := sse(entry, member=member)) is None:
                        continue
                    if (end := ended()) is not None:
                        yield end
                        return
                    yield message
                    beat = time.monotonic()
                cursor = last + 1 if len(msgs) < _PAGE else history.entry_of(msgs[-1]).position + 1
            if time.monotonic() - beat >= self._heartbeat:
                yield b": keep-alive\n\n"
                beat = time.monotonic()
            r.wait_for_position(last, timeout=wait, cancel=self._stopping)


class WatchApp(LazyApp):
    """The API app with the event stream added, composed in the worker on its first request."""

    def __init__(self, threads: int = DEFAULT_THREADS) -> None:
        super().__init__()
        self._threads = threads
        self._events: Events | None = None

    def stop_streams(self) -> None:
        """Called on the worker's SIGTERM (``processes.gunicorn_conf``): the open streams end."""
        if self._events is not None:
            self._events.stop()

    def _extend(self, app: falcon.App, deps: Deps) -> None:
        settings = deps.settings
        authenticator = Authenticator(deps.token_signer, ReadModel(deps.pool, settings.read_wait_seconds))
        limits = StreamLimits.for_pool(settings, self._threads)
        events = Events(deps.log, authenticator=authenticator, limits=limits)
        app.add_route(ROUTE, events)
        self._events = events


def add_route(
    app: falcon.App,
    recorder: JetStreamApplicationRecorder,
    heartbeat: float = HEARTBEAT_SECONDS,
    *,
    authenticator: Authenticator | None = None,
    limits: StreamLimits | None = None,
) -> None:
    """For composition roots and tests that build the app themselves."""
    app.add_route(ROUTE, Events(recorder, heartbeat, authenticator=authenticator, limits=limits))
