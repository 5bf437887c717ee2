"""eventsourcing recorders on one JetStream stream: the log every Stratus decision is appended to.

One message per event, position (notification id) = stream sequence. Appends are optimistic per
aggregate (expected last sequence on the aggregate's subjects), atomic across aggregates (NATS atomic
batches), and idempotent (``Nats-Msg-Id`` = ``<originator>:<version>``; an ambiguous publish is
resolved by reading the log back). Reads are batched direct gets. See docs/eventstore.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import nats.errors
import nats.js.errors
import orjson
from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    IntegrityError,
    ListenNotifySubscription,
    Notification,
    StoredEvent,
)
from nats.aio.msg import Msg
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig

from stratus import metrics
from stratus.config import Settings
from stratus.context import CommandContext, current, event_contexts
from stratus.eventstore import chain
from stratus.eventstore import envelope as env
from stratus.eventstore.bridge import NatsBridge
from stratus.eventstore.errors import (
    MAX_EVENTS_PER_APPEND,
    ConcurrentAppendError,
    EventStoreUnavailable,
    TooManyEventsError,
)
from stratus.eventstore.signing import (
    EXCLUDED_TOPIC,
    EXCLUSIONS_ID,
    INSTANCE_KIND,
    LoadCheck,
    Loaded,
    Signer,
    Verifier,
    exclusions,
)
from stratus.eventstore.subjects import SubjectLayout, encode_token

log = logging.getLogger(__name__)
_BEHIND = "a replica behind the log"

_READ_BATCH = 1000
_EARLIER_HEADS = 8  # earlier heads remembered per aggregate (see _Head.earlier)
_WAKE_DELAY = 0.002  # the longest a commit's wake-up waits for a write to go with (_announce)
_LONG_READ = 3600.0  # the bound of a whole aggregate's read; each request in it has attempt_timeout

# JetStream error codes (nats-server errors.json).
ERR_WRONG_LAST_SEQUENCE = 10071
ERR_BATCH_DUPLICATE_MSG_ID = 10201
_TRANSIENT_CODES = frozenset({408, 429, 503})
# 10158, "duplicate message id is in process": on a cluster, an earlier attempt with the same msg id is
# still being replicated (seen by the fault campaign after a stream leader was killed): the outcome is
# unknown, as after a timeout.
ERR_DUPLICATE_IN_PROCESS = 10158
_TRANSIENT_ERR_CODES = frozenset({10008, 10009, 10210, ERR_DUPLICATE_IN_PROCESS})

_EXPECTED_SEQ = "Nats-Expected-Last-Subject-Sequence"
_EXPECTED_SEQ_SUBJECT = "Nats-Expected-Last-Subject-Sequence-Subject"
_BATCH_ID = "Nats-Batch-Id"
_BATCH_SEQ = "Nats-Batch-Sequence"
_BATCH_COMMIT = "Nats-Batch-Commit"


# -- outcomes of one attempt, raised on the loop and classified on the caller's side ----------------


class _Rejected(Exception):
    """The server refused the append as a whole: nothing of it was stored by this attempt."""

    def __init__(self, code: int | None, description: str) -> None:
        super().__init__(f"{description} (err {code})")
        self.code = code


class _Duplicate(Exception):
    """The server answered with a duplicate ack: a message with our msg id is already stored."""


class _Transient(Exception):
    """NATS did not answer usefully (down, restarting, timed out): the outcome is unknown."""


def _classify(e: BaseException) -> BaseException:
    """nats-py's exceptions → our attempt outcomes (anything else is a bug and propagates)."""
    if isinstance(e, nats.js.errors.APIError):
        code, err_code = e.code, e.err_code
        if err_code in (ERR_WRONG_LAST_SEQUENCE, ERR_BATCH_DUPLICATE_MSG_ID):
            return _Rejected(err_code, e.description or "")
        batch_trouble = "batch" in (e.description or "")  # incomplete/unknown/abandoned after a restart
        if code in _TRANSIENT_CODES or err_code in _TRANSIENT_ERR_CODES or batch_trouble:
            return _Transient(f"JetStream: {e.description} (code {code}, err {err_code})")
        return e
    if isinstance(e, (nats.errors.Error, TimeoutError, OSError)):
        return _Transient(f"{type(e).__name__}: {e}")
    return e


@dataclass
class _Out:
    """One message to publish."""

    subject: str
    data: bytes
    headers: dict[str, str]
    originator_key: str
    version: int


@dataclass
class _Group:
    """The events of one aggregate within one append."""

    originator_id: UUID | str
    key: str
    first_version: int
    last_version: int
    indexes: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class _Head:
    """The last stored event of an aggregate."""

    seq: int
    version: int
    append_id: str = ""
    chain_hash: str = ""  # the event's Stratus-Chain-Hash ("" for events written before chaining)
    # (version, seq) of the heads seen before this one, newest first: a copy cached at one of those
    # versions catches up from its position even after newer heads were seen (another writer's).
    earlier: tuple[tuple[int, int], ...] = ()

    def after(self, earlier: tuple[tuple[int, int], ...]) -> _Head:
        """This head with ``earlier`` (``dataclasses.replace``, without its cost on every append)."""
        return _Head(self.seq, self.version, self.append_id, self.chain_hash, earlier)

    def seq_of(self, version: int) -> int | None:
        """Where ``version`` is stored, if this head or one seen before it says."""
        if version == self.version:
            return self.seq
        return next((seq for v, seq in self.earlier if v == version), None)


class _Wakeups:
    """Threads waiting for new commits: woken by a core-NATS message after each commit, and by a poll."""

    def __init__(self) -> None:
        self._events: set[threading.Event] = set()
        self._lock = threading.Lock()

    def add(self, event: threading.Event) -> None:
        with self._lock:
            self._events.add(event)

    def discard(self, event: threading.Event) -> None:
        with self._lock:
            self._events.discard(event)

    def wake_all(self) -> None:
        with self._lock:
            events = list(self._events)
        for e in events:
            e.set()

    def __bool__(self) -> bool:
        return bool(self._events)


class JetStreamAggregateRecorder(AggregateRecorder):
    """Events of aggregates on one JetStream stream (``insert_events`` returns None).

    ``bridge``: a started (or startable) ``NatsBridge``. ``stream``/``subject_prefix``: the stream
    and its subjects (``<prefix>.>``). ``source``: CloudEvents ``source``. ``timeout``: how long an
    append or a read keeps retrying while NATS is unreachable before raising
    ``EventStoreUnavailable``; ``attempt_timeout``: how long one request may take.
    """

    def __init__(
        self,
        bridge: NatsBridge,
        *,
        stream: str,
        subject_prefix: str,
        source: str = "/stratus/stratus",
        replicas: int = 1,
        duplicate_window: float = 120.0,
        timeout: float = 30.0,
        attempt_timeout: float = 2.0,
        context: Callable[[], CommandContext] = current,
        cache_size: int = 100_000,
        signer: Signer | None = None,
        trust: Verifier | None = None,
    ) -> None:
        self.bridge = bridge
        self.signer = signer
        # With the deployment's registry, every event a load reads is checked before the aggregate
        # is folded from it (docs/trust.md): a refused one raises ``UntrustedEvent``.
        self.trust = (
            LoadCheck(
                trust,
                keep=cache_size,
                history=self.server_history,
                confirm=self.leaders_server_history,
                excluded=self.excluded_positions,
            )
            if trust is not None
            else None
        )
        self.stream = stream
        self.layout = SubjectLayout(subject_prefix)
        self.source = source
        self.replicas = replicas
        self.duplicate_window = duplicate_window
        self.timeout = timeout
        self.attempt_timeout = attempt_timeout
        self._context = context
        self._direct_subject = f"$JS.API.DIRECT.GET.{stream}"
        # Last (sequence, version) seen per aggregate; a hint for the expected-sequence header,
        # corrected by the server whenever it is stale.
        self._heads: OrderedDict[str, _Head] = OrderedDict()
        self._heads_lock = threading.Lock()
        self._cache_size = cache_size
        self._prefetch = threading.local()  # heads read ahead for this thread's next loads
        # Multiplexed inbox for batch direct gets (created on the loop).
        self._mux_prefix: str | None = None
        self._mux_pending: dict[str, tuple[list[Msg], asyncio.Future[Msg]]] = {}
        self._mux_lock: asyncio.Lock | None = None
        self._wake_timer_set = False  # a flush of pending wake-ups is due (``_announce``)
        # Acknowledgements of appends, on one inbox subscription (created on the loop).
        self._ack_prefix: str | None = None
        self._acks: dict[str, asyncio.Future[Msg]] = {}
        self._ack_tokens = itertools.count()
        # How appends went: "appended", "unknown_outcome" (timeouts, disconnects), "rejected" (stale
        # head or duplicate), "recovered" (an unknown outcome turned out stored), "conflicts".
        self.stats: Counter[str] = Counter()

    @classmethod
    def from_settings(cls, bridge: NatsBridge, settings: Settings, **kwargs: Any) -> Any:
        kwargs.setdefault("source", f"/stratus/{settings.cloud_name}")
        if settings.nats_seed_file is not None:
            kwargs.setdefault("signer", Signer.from_seed_file(settings.nats_seed_file))
        return cls(
            bridge,
            stream=settings.stream,
            subject_prefix=settings.subject_prefix,
            replicas=settings.stream_replicas,
            **kwargs,
        )

    # -- the stream --------------------------------------------------------------------------

    def stream_config(self) -> StreamConfig:
        """The stream as Stratus needs it: file storage, kept forever, direct gets, atomic batches."""
        return StreamConfig(
            name=self.stream,
            description="Stratus event log (CloudEvents, one message per event)",
            subjects=[self.layout.all],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            discard=DiscardPolicy.NEW,
            max_msgs=-1,
            max_bytes=-1,
            max_age=0,
            max_msgs_per_subject=-1,
            num_replicas=self.replicas,
            duplicate_window=self.duplicate_window,
            allow_direct=True,
            allow_atomic=True,
            deny_delete=True,
            deny_purge=True,
        )

    def ensure_stream(self) -> None:
        """Create the stream, or update it to ``stream_config()``; safe to call from every process."""
        wanted = self.stream_config()

        async def ensure() -> None:
            jsm = self.bridge.js
            try:
                info = await jsm.stream_info(self.stream)
            except nats.js.errors.NotFoundError:
                try:
                    await jsm.add_stream(wanted)
                    return
                except nats.js.errors.BadRequestError:
                    info = await jsm.stream_info(self.stream)  # created meanwhile by another process
            if self._stream_differs(info.config, wanted):
                await self._update_stream(wanted)

        self._retrying(ensure, what="ensure the stream")

    def _stream_differs(self, have: StreamConfig, wanted: StreamConfig) -> bool:
        """Whether the stream as it is needs updating into ``stream_config()``."""
        return (
            have.subjects != wanted.subjects
            or have.num_replicas != wanted.num_replicas
            or not have.allow_direct
            or not have.allow_atomic
            or have.duplicate_window != wanted.duplicate_window
            or have.deny_delete != wanted.deny_delete
            or have.deny_purge != wanted.deny_purge
        )

    async def _update_stream(self, wanted: StreamConfig) -> None:
        await self.bridge.js.update_stream(wanted)

    def delete_stream(self) -> None:
        """Delete the stream and everything on it (tests and tooling only)."""

        async def delete() -> None:
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await self.bridge.js.delete_stream(self.stream)

        self._retrying(delete, what="delete the stream")

    # -- appending -----------------------------------------------------------------------------

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        self.append(stored_events)
        return None

    def append(self, stored_events: Sequence[StoredEvent], *, append_id: str | None = None) -> list[int]:
        """Append atomically; return the positions (stream sequences) of the events, in order.

        Raises ``IntegrityError`` (``ConcurrentAppendError``) if any aggregate already has one of the
        versions, ``TooManyEventsError`` over 1000 events, ``EventStoreUnavailable`` when NATS did
        not answer before ``timeout`` (nothing was acknowledged; appending the same events again is
        safe: either they are appended once or the append conflicts).

        ``append_id``: an idempotency key for the whole append (e.g. derived from a client's request
        id). Appending the same events again with the same key returns the original positions
        instead of raising ``IntegrityError`` (costs one extra read per append).
        """
        if not stored_events:
            return []
        if len(stored_events) > MAX_EVENTS_PER_APPEND:
            raise TooManyEventsError(
                f"{len(stored_events)} events in one append; a NATS atomic batch carries at most "
                f"{MAX_EVENTS_PER_APPEND}, and splitting it would break atomicity"
            )
        groups = self._group(stored_events)
        context = self._context()  # in the caller's thread: the context is a contextvar
        per_event = event_contexts() or {}
        given = append_id is not None
        append_id = append_id if append_id is not None else uuid.uuid4().hex
        outs = []
        for e in stored_events:
            key = str(e.originator_id)
            ctx = per_event.get((key, e.originator_version), context) if per_event else context
            headers = env.build_headers(e, ctx, source=self.source, append_id=append_id)
            subject = self.layout.subject(e.originator_id, e.topic)
            outs.append(_Out(subject, e.state, headers, key, e.originator_version))
        timer = metrics.Timer()
        try:
            positions = self._append(outs, groups, append_id, check_first=given)
        except ConcurrentAppendError:
            metrics.LOG_APPENDS.labels("conflict").inc()
            raise
        except EventStoreUnavailable:
            metrics.LOG_APPENDS.labels("error").inc()
            raise
        metrics.LOG_APPEND_LATENCY.observe(timer.elapsed())
        metrics.LOG_APPENDS.labels("ok").inc()
        metrics.LOG_APPENDED_EVENTS.inc(len(outs))
        return positions

    def _group(self, stored_events: Sequence[StoredEvent]) -> dict[str, _Group]:
        groups: dict[str, _Group] = {}
        for i, e in enumerate(stored_events):
            key = str(e.originator_id)
            g = groups.get(key)
            if g is None:
                groups[key] = _Group(e.originator_id, key, e.originator_version, e.originator_version, [i])
                continue
            if e.originator_version <= g.last_version:
                raise IntegrityError(
                    f"versions of {key} must increase within one append "
                    f"({e.originator_version} after {g.last_version})"
                )
            g.last_version = e.originator_version
            g.indexes.append(i)
        return groups

    def _append(
        self, outs: list[_Out], groups: dict[str, _Group], append_id: str, *, check_first: bool = False
    ) -> list[int]:
        deadline = time.monotonic() + self.timeout
        maybe_stored = check_first  # an earlier attempt of this append may have been stored
        must_check = check_first  # read the aggregates back before the next attempt
        delay = 0.02
        last_error: BaseException | None = None
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EventStoreUnavailable(
                    f"append of {len(outs)} event(s) not acknowledged within {self.timeout}s: {last_error}"
                ) from last_error
            attempt_timeout = min(self.attempt_timeout, remaining)
            if must_check:
                try:
                    found = self._resolve(outs, groups, append_id, deep=maybe_stored, timeout=attempt_timeout)
                except _Transient as e:
                    last_error = e
                    time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                    delay = min(delay * 2, 0.5)
                    continue
                if found is not None:
                    self.stats["recovered"] += 1
                    self._forget(groups)  # which attempt's chain hashes were stored is not known here
                    return found
                must_check = False
            try:
                self._set_expectations(outs, groups)
            except ConcurrentAppendError:
                self.stats["conflicts"] += 1
                raise
            try:
                seqs = self._run(lambda: self._publish(outs), attempt_timeout)
            except (_Rejected, _Duplicate) as e:
                # Message ids are aggregate:version, so a duplicate id says that someone stored that
                # version: this append only if an earlier attempt of it may have been stored
                # (``maybe_stored`` is already set then); otherwise another writer won the race, and
                # the heads are refreshed without searching the aggregates for this append.
                self.stats["rejected"] += 1
                last_error = e
                must_check = True
                continue
            except _Transient as e:
                self.stats["unknown_outcome"] += 1
                last_error = e
                must_check = maybe_stored = True
                log.info("append attempt failed (%s); checking and retrying", e)
                time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                delay = min(delay * 2, 0.5)
                continue
            self.stats["appended"] += 1
            self._remember(outs, groups, seqs)
            return seqs

    def _set_expectations(self, outs: list[_Out], groups: dict[str, _Group]) -> None:
        """Put the expected-last-sequence check on each aggregate's first message (or fail now), and
        chain each message's hash to the aggregate's previous event (the head the check names)."""
        for g in groups.values():
            with self._heads_lock:
                head = self._heads.get(g.key)
            if head is not None and g.first_version <= head.version:
                raise ConcurrentAppendError(
                    f"{g.key} is at version {head.version}; cannot append version {g.first_version}"
                )
            first = outs[g.indexes[0]]
            first.headers[_EXPECTED_SEQ] = str(head.seq if head is not None else 0)
            first.headers[_EXPECTED_SEQ_SUBJECT] = self.layout.aggregate_filter(g.originator_id)
            prev = (head.chain_hash or chain.GENESIS) if head is not None else chain.GENESIS
            for i in g.indexes:
                out = outs[i]
                out.headers.pop(chain.CHAIN_HASH, None)
                out.headers[chain.CHAIN_PREV] = prev
                prev = chain.event_hash(out.headers, out.data)
                out.headers[chain.CHAIN_HASH] = prev
                if self.signer is not None:
                    self.signer.sign(out.headers)

    async def _publish(self, outs: list[_Out]) -> list[int]:
        """One attempt: a plain publish for one event, an atomic batch for several (bounded by the
        caller's timeout on the bridge)."""
        n = len(outs)
        if n == 1:
            out = outs[0]
            ack = await self._acked(out.subject, out.data, out.headers)
            if ack.get("duplicate"):
                raise _Duplicate(f"duplicate ack at {ack['seq']}")
            seqs = [int(ack["seq"])]
        else:
            nc, batch_id = self.bridge.nc, uuid.uuid4().hex
            for i, out in enumerate(outs[:-1], 1):
                await nc.publish(
                    out.subject, out.data, headers={**out.headers, _BATCH_ID: batch_id, _BATCH_SEQ: str(i)}
                )
            last = outs[-1]
            commit = {**last.headers, _BATCH_ID: batch_id, _BATCH_SEQ: str(n), _BATCH_COMMIT: "1"}
            ack = await self._acked(last.subject, last.data, commit)
            if ack.get("count", n) != n:
                raise RuntimeError(f"atomic batch of {n} acknowledged with size {ack['count']}")
            seq = int(ack["seq"])
            seqs = list(range(seq - n + 1, seq + 1))
        self._announce(seqs[-1])
        return seqs

    def _announce(self, position: int) -> None:
        """Wake subscribers (here and in other processes) with a commit's last position: fire and
        forget, sent with the connection's next write (usually the next append's) or ``_WAKE_DELAY``
        later, whichever comes first. Sent on its own, each wake-up was a socket write and a
        wake-up of nats-server that every append paid; a subscriber now hears of a commit at most
        ``_WAKE_DELAY`` later when nothing else is written. (At 1 ms the timer's own firings, about
        one per two appends in a stream of them, still cost what the wake-ups had; at 2 ms they
        no longer show: docs/performance.md.)"""
        nc = self.bridge.nc
        nc.publish_with_next_write(self.wake_subject, str(position).encode())
        if not self._wake_timer_set:
            self._wake_timer_set = True
            asyncio.get_running_loop().call_later(_WAKE_DELAY, self._wake_due)

    def _wake_due(self) -> None:
        self._wake_timer_set = False
        with contextlib.suppress(EventStoreUnavailable):  # the bridge closed meanwhile
            self.bridge.nc.flush_soon()

    async def _acked(self, subject: str, data: bytes, headers: dict[str, str]) -> dict[str, Any]:
        """Publish one message to the stream and return JetStream's acknowledgement (``seq``, and
        ``duplicate`` or a batch's ``count``); a refusal raises nats-py's ``APIError``, as
        ``js.publish`` does. The reply comes to one inbox subscription of this recorder and is awaited
        as it lands, within the caller's timeout: ``js.publish`` (``nc.request``) would add a timer
        and a future of its own, a pass of the loop per append (docs/performance.md)."""
        prefix = await self._ensure_acks()
        token = str(next(self._ack_tokens))
        answer: asyncio.Future[Msg] = asyncio.get_running_loop().create_future()
        self._acks[token] = answer
        try:
            await self.bridge.nc.publish_now(subject, data, reply=f"{prefix}.{token}", headers=headers)
            msg = await answer
        finally:
            self._acks.pop(token, None)
        if msg.headers and msg.headers.get("Status") == "503":
            raise nats.errors.NoRespondersError  # no stream on the subject (yet): a transient
        ack: dict[str, Any] = orjson.loads(msg.data)
        if "error" in ack:
            raise nats.js.errors.APIError.from_error(ack["error"])
        return ack

    async def _ensure_acks(self) -> str:
        if self._ack_prefix is None:
            prefix = self.bridge.nc.new_inbox()
            sub = await self.bridge.nc.subscribe_direct(f"{prefix}.*", self._on_ack)
            if self._ack_prefix is None:
                self._ack_prefix = prefix
            else:  # another append subscribed meanwhile (both awaited their SUB): keep the first
                await sub.unsubscribe()
        return self._ack_prefix

    def _on_ack(self, msg: Msg) -> None:
        answer = self._acks.get(msg.subject.rsplit(".", 1)[-1])
        if answer is not None and not answer.done():
            answer.set_result(msg)

    def _resolve(
        self, outs: list[_Out], groups: dict[str, _Group], append_id: str, *, deep: bool, timeout: float
    ) -> list[int] | None:
        """After a rejection or an unknown outcome: was this append stored? Refreshes the heads."""
        heads = self._run(lambda: self._fetch_heads(list(groups.values()), timeout), timeout)
        for g in groups.values():
            head = heads.get(g.key)
            if head is None:
                continue
            self._update_head(g.key, head)
            if head.append_id == append_id:
                return self._positions(outs, g, head.seq, head.version)
        if not deep:
            return None
        # Ours may be stored with later events on top: look for it by version.
        for g in groups.values():
            head = heads.get(g.key)
            if head is None or head.version < g.first_version:
                continue
            found = self._run(lambda g=g: self._find_append(g, append_id, timeout), timeout)  # type: ignore[misc]
            if found is not None:
                return self._positions(outs, g, *found)
        return None

    def _positions(self, outs: list[_Out], g: _Group, seq: int, version: int) -> list[int]:
        # The messages of one append are contiguous on the stream (one publish, or one atomic batch).
        index = next(i for i in g.indexes if outs[i].version == version)
        return [seq - index + i for i in range(len(outs))]

    async def _last_messages(self, subjects: Sequence[str], timeout: float) -> list[Msg | None]:
        """The last message on each subject filter (None: none), all requested at once."""
        gets = (self.last_message(s, timeout) for s in subjects)
        return list(await asyncio.gather(*gets))

    async def _fetch_heads(self, groups: list[_Group], timeout: float) -> dict[str, _Head | None]:
        subjects = [self.layout.aggregate_filter(g.originator_id) for g in groups]
        msgs = await self._last_messages(subjects, timeout)
        out: dict[str, _Head | None] = {}
        for g, msg in zip(groups, msgs, strict=True):
            out[g.key] = _head_of(msg) if msg is not None else None
        return out

    async def _find_append(self, g: _Group, append_id: str, timeout: float) -> tuple[int, int] | None:
        msgs = await self._direct_scan(self.layout.aggregate_filter(g.originator_id), 1, None, None, timeout)
        for m in msgs:
            h = m.headers or {}
            if h.get(env.APPEND_ID) == append_id:
                return int(h[env.NATS_SEQUENCE]), int(h[env.CE_ORIGINATORVERSION])
        return None

    def _remember(self, outs: list[_Out], groups: dict[str, _Group], seqs: list[int]) -> None:
        for g in groups.values():
            i = g.indexes[-1]
            self._update_head(g.key, _Head(seqs[i], outs[i].version, "", outs[i].headers[chain.CHAIN_HASH]))

    @contextlib.contextmanager
    def prefetched(self, originator_ids: Iterable[UUID | str]) -> Iterator[None]:
        """Read the last event of each aggregate in one round trip, for the loads inside (in this
        thread) to start from: a command that loads several aggregates pays one hop for their heads
        instead of one each. Each prefetched head serves the first load of its aggregate only."""
        subjects = [self.layout.aggregate_filter(i) for i in originator_ids]
        found = self._retrying(lambda: self._last_messages(subjects, self.attempt_timeout))
        self._prefetch.heads = dict(zip(subjects, found, strict=True))
        try:
            yield
        finally:
            self._prefetch.heads = {}

    def _take_prefetched(self, subject: str) -> tuple[Msg | None] | None:
        heads: dict[str, Msg | None] = getattr(self._prefetch, "heads", {})
        if subject not in heads:
            return None
        return (heads.pop(subject),)

    def known_version(self, originator_id: UUID | str) -> int | None:
        """The aggregate's version as last seen stored (a hint; None: not seen)."""
        head = self._seen(originator_id)
        return head.version if head is not None else None

    def _seen(self, originator_id: UUID | str) -> _Head | None:
        with self._heads_lock:
            return self._heads.get(str(originator_id))

    def observe(self, msg: Msg) -> None:
        """Note a stored event read off a consumer or a direct get as its aggregate's head, if it is
        the newest seen: an append that follows it then needs no read to know what to expect."""
        h = msg.headers or {}
        key = h.get(env.CE_SUBJECT)
        if key is None or env.CE_ORIGINATORVERSION not in h:
            return
        if env.NATS_SEQUENCE in h:
            self._update_head(key, _head_of(msg))
        elif msg.reply:  # a consumer's message: the stream sequence is in its metadata
            self._update_head(key, _head_of(msg, seq=int(msg.metadata.sequence.stream)))

    def _forget(self, groups: dict[str, _Group]) -> None:
        with self._heads_lock:
            for key in groups:
                self._heads.pop(key, None)

    def _update_head(self, key: str, head: _Head) -> None:
        with self._heads_lock:
            old = self._heads.get(key)
            if old is None or head.seq > old.seq:
                if old is not None:
                    head = head.after(((old.version, old.seq), *old.earlier)[:_EARLIER_HEADS])
                self._heads[key] = head
            elif head.seq == old.seq:  # the same event, perhaps read back with more of its headers
                self._heads[key] = head.after(old.earlier)
            self._heads.move_to_end(key)
            while len(self._heads) > self._cache_size:
                self._heads.popitem(last=False)

    # -- reading -------------------------------------------------------------------------------

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        subject = self.layout.aggregate_filter(originator_id)
        # Direct gets are answered by any replica of the stream, and a follower may not have stored
        # the newest events yet (one restarting after a node failure lags for seconds): a read that
        # answers less than this recorder has seen stored (its own append, a consumer's delivery) is
        # asked again, so a worker never acts on a server's state from before the event it consumed.
        seen = self._seen(originator_id)
        floor = seen.seq if seen is not None else None
        if desc and limit == 1 and lte is None:
            msg = self._retrying(lambda: _current(self.last_message(subject, self.attempt_timeout), floor))
            msgs = [msg] if msg is not None else []
        elif lte is None:
            prefetched = self._take_prefetched(subject)
            if prefetched is not None and floor is not None and _seq_of(prefetched[0]) < floor:
                prefetched = None  # read ahead from a replica behind what was seen since
            # A prefetched head often answers alone (no such aggregate, nothing after ``gt``, or only
            # the head itself): then there is nothing to ask the server, and no hop to the loop.
            answered = _answered_by_head(prefetched[0], gt) if prefetched is not None else None
            if answered is not None:
                msgs = answered
            else:
                # where version ``gt`` is stored, if it was seen (the head, or one seen before it)
                from_seq = seen.seq_of(gt) if seen is not None and gt is not None else None
                msgs = self._retrying(
                    lambda: self._aggregate_messages(
                        subject, after=gt, head=prefetched, from_seq=from_seq, floor=floor
                    ),
                    long=True,
                )
        else:
            msgs = self._retrying(lambda: self._aggregate_messages(subject, floor=floor), long=True)
        excluded = self._check_loaded(originator_id, msgs, floor)
        if msgs and lte is None:
            self._update_head(str(originator_id), _head_of(msgs[-1]))
        events: list[StoredEvent] = []
        for m in msgs:
            n = env.decode_notification(m)
            v = n.originator_version
            if (gt is not None and v <= gt) or (lte is not None and v > lte):
                continue
            events.append(_stored(n, excluded=bool(excluded) and _seq_of(m) in excluded))
        if desc:
            events.reverse()
        if limit is not None:
            events = events[:limit]
        return events

    # -- anchors: naming a stored event for a snapshot (stratus.eventstore.snapshots) ---------------

    def anchor(self, originator_id: UUID | str, version: int) -> str | None:
        """``<stream sequence>:<chain hash>`` of the aggregate's event at ``version``, if this recorder
        saw where it is stored (it appended or read it); the hash is empty when not known."""
        head = self._seen(originator_id)
        if head is None:
            return None
        if head.version == version:
            return f"{head.seq}:{head.chain_hash}"
        seq = head.seq_of(version)
        return f"{seq}:" if seq is not None else None

    def select_events_after(
        self, originator_id: UUID | str, version: int, anchor: str
    ) -> Sequence[StoredEvent] | None:
        """The events after ``version``, read from the anchored event's position on (the aggregate's
        last message, then exactly the messages from the anchor to it: two gets whatever the history);
        None when the message at the anchor's position is not this aggregate's event at ``version``
        with the anchor's chain hash (the log was restored, replaced or is another one)."""
        seq_text, _, chain_hash = anchor.partition(":")
        try:
            seq = int(seq_text)
        except ValueError:
            return None
        subject = self.layout.aggregate_filter(originator_id)
        prefetched = self._take_prefetched(subject)

        async def read() -> list[Msg] | None:
            last = (
                prefetched[0]
                if prefetched is not None
                else await self.last_message(subject, self.attempt_timeout)
            )
            if last is None:
                return None
            newest = _head_of(last)
            if newest.version < version or newest.seq < seq:
                return None
            if newest.seq == seq:
                msgs = [last]
            else:
                count = newest.version - version + 1
                msgs = await self._direct_scan(subject, seq, count, newest.seq, self.attempt_timeout)
            return msgs

        msgs = self._retrying(read, long=True)
        if not msgs:
            return None
        first = _head_of(msgs[0])
        if first.seq != seq or first.version != version or (chain_hash and first.chain_hash != chain_hash):
            return None
        excluded = self._check_loaded(originator_id, msgs, None)
        self._update_head(str(originator_id), _head_of(msgs[-1]))
        events: list[StoredEvent] = []
        expected = version + 1
        for m in msgs[1:]:
            n = env.decode_notification(m)
            if n.originator_version != expected:
                return None  # a gap: not the log the anchor was taken on
            expected += 1
            events.append(_stored(n, excluded=_seq_of(m) in excluded))
        return events

    def server_history(self, server_id: str) -> list[Loaded]:
        """One server's stored events (``instance.<server>.*``), for the trust check of the events
        of other aggregates that name it (``signing.ServerPlaces``)."""
        subject = f"{self.layout.prefix}.{INSTANCE_KIND}.{encode_token(server_id)}.*"
        msgs = self._retrying(lambda: self._aggregate_messages(subject), long=True)
        return [_loaded(m) for m in msgs]

    def leaders_server_history(self, server_id: str) -> list[Loaded]:
        """``server_history`` as the stream's leader answers it (one message a request, never from a
        replica behind): the confirmation of a refusal, rare."""
        subject = f"{self.layout.prefix}.{INSTANCE_KIND}.{encode_token(server_id)}.*"

        async def read() -> list[Loaded]:
            out: list[Loaded] = []
            seq = 1
            while True:
                try:
                    raw = await self.bridge.js.get_msg(self.stream, seq=seq, subject=subject, next=True)
                except nats.js.errors.NotFoundError:
                    return out
                headers = dict(raw.headers or {})
                version = int(headers.get(env.CE_ORIGINATORVERSION, 0))
                out.append((version, int(raw.seq or 0), headers, raw.data or b""))
                seq = int(raw.seq or 0) + 1

        result: list[Loaded] = self._retrying(read, long=True)
        return result

    def excluded_positions(self) -> frozenset[int]:
        """The positions of the refused events the operator excluded (``signing.exclusions``), read
        afresh: a load asks only when it meets a refused event."""
        if self.trust is None:
            return frozenset()
        subject = self.layout.aggregate_filter(EXCLUSIONS_ID)
        msgs = self._retrying(lambda: self._aggregate_messages(subject), long=True)
        return exclusions(self.trust.verifier, ((_seq_of(m), m.headers or {}, bytes(m.data)) for m in msgs))

    def _check_loaded(self, originator_id: UUID | str, msgs: Sequence[Msg], floor: int | None) -> set[int]:
        """Raise ``UntrustedEvent`` if an event of ``msgs`` (one aggregate's, as a load read them) is
        one its signer may not have appended (``trust``) and the operator did not exclude; the
        positions of those excluded (to fold as ``Excluded``). A server's events after a version
        whose place is not kept are checked with its history: its events from the first are read
        again."""
        excluded: set[int] = set()
        if self.trust is None or not msgs:
            return excluded
        key = str(originator_id)
        if self.trust.check(key, [_loaded(m) for m in msgs], excluded):
            return excluded
        subject = self.layout.aggregate_filter(originator_id)
        whole = self._retrying(lambda: self._aggregate_messages(subject, floor=floor), long=True)
        self.trust.check(key, [_loaded(m) for m in whole], excluded)
        return excluded

    async def _aggregate_messages(
        self,
        subject: str,
        *,
        after: int | None = None,
        head: tuple[Msg | None] | None = None,
        from_seq: int | None = None,
        floor: int | None = None,
    ) -> list[Msg]:
        """One aggregate's messages (those after version ``after``: a cached aggregate catching up).
        Its versions run 1..N, so after finding the last message we ask for exactly N up to its
        sequence: the server stops there instead of scanning the rest of the stream for more matches
        (which made loads slower as the log grew). A cached aggregate that is current costs one get.
        (``floor``: the stream sequence of the newest event of it seen stored; a replica that answers
        an older head, or stops short of the head it answered, is behind: ``_Transient``, ask again.)"""
        if head is not None:  # its last message, read ahead (``prefetched``)
            last = head[0]
        else:
            last = await _current(self.last_message(subject, self.attempt_timeout), floor)
        answered = _answered_by_head(last, after)
        if answered is not None or last is None:  # (a missing head is answered: no events)
            return answered or []
        newest = _head_of(last)
        if after is not None and from_seq is not None:  # only what follows version ``after``
            count = newest.version - after
            msgs = await self._direct_scan(subject, from_seq + 1, count, newest.seq, self.attempt_timeout)
        else:
            msgs = await self._direct_scan(subject, 1, newest.version, newest.seq, self.attempt_timeout)
        if not msgs or _seq_of(msgs[-1]) != newest.seq:
            raise _Transient(f"{_BEHIND} answered {subject} up to {newest.seq} only in part")
        return msgs

    def read_messages(
        self, start: int, limit: int, *, stop: int | None = None, subject_filter: str | None = None
    ) -> list[Msg]:
        """Raw stored messages from position ``start`` (inclusive): batch direct gets."""
        filt = subject_filter or self.layout.all
        return self._retrying(
            lambda: self._direct_scan(filt, max(start, 1), limit, stop, self.attempt_timeout)
        )

    def read_envelopes(self, start: int, limit: int, subject_filter: str | None = None) -> list[env.Envelope]:
        """Events from position ``start`` (inclusive) as CloudEvents envelopes, at most ``limit``.

        ``subject_filter``: a NATS subject filter under the prefix (``layout.kind_filter("instance")``,
        ``layout.aggregate_filter(id)``); default: everything.
        """
        msgs = self.read_messages(start, limit, subject_filter=subject_filter)
        return [env.decode_message(m)[1] for m in msgs]

    # -- NATS plumbing (run on the bridge's loop) ------------------------------------------------

    @property
    def wake_subject(self) -> str:
        """Core NATS subject (outside the stream) announcing each commit's last position."""
        return f"_STRATUS.WAKE.{self.stream}"

    def _run(self, factory: Callable[[], Any], timeout: float) -> Any:
        if self.bridge.closed:
            raise EventStoreUnavailable("the NATS bridge is closed")
        try:
            return self.bridge.run(factory, timeout)
        except (_Rejected, _Duplicate, _Transient):
            raise
        except BaseException as e:
            c = _classify(e)
            if c is e:
                raise
            raise c from e

    def _retrying(
        self, factory: Callable[[], Any], *, what: str = "read from the event log", long: bool = False
    ) -> Any:
        """Run an idempotent operation, retrying through NATS outages until ``timeout``.

        ``long``: an aggregate's whole history, as many requests as it takes: the attempt is bounded by
        each of its requests' ``attempt_timeout`` (a NATS that stops answering is noticed as fast), not
        as a whole (a host with 100,000 events reads for longer than one request may take)."""
        deadline = time.monotonic() + self.timeout
        delay = 0.02
        while True:
            remaining = deadline - time.monotonic()
            try:
                if long:
                    return self._run(factory, _LONG_READ)
                return self._run(factory, max(0.001, min(self.attempt_timeout, remaining)))
            except (_Transient, _Rejected) as e:
                if _BEHIND in str(e) and delay == 0.02:  # once per read (docs/reliability.md, finding 2)
                    log.info("%s; asking again", e)
                if time.monotonic() + delay >= deadline:
                    raise EventStoreUnavailable(f"could not {what} within {self.timeout}s: {e}") from e
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    async def last_message(self, subject_filter: str, timeout: float) -> Msg | None:
        """The newest stored message on ``subject_filter`` (None: none yet): one direct get, awaited
        on the bridge's loop (a follower finding how far it has to read)."""
        request = orjson.dumps({"last_by_subj": subject_filter})
        msg = await self.bridge.nc.request(self._direct_subject, request, timeout=timeout)
        status = (msg.headers or {}).get("Status")
        if status == "404":
            return None
        if status is not None:
            raise _Transient(f"direct get answered status {status}")
        return msg

    async def _ensure_mux(self) -> str:
        if self._mux_prefix is None:
            if self._mux_lock is None:
                self._mux_lock = asyncio.Lock()
            async with self._mux_lock:
                if self._mux_prefix is None:
                    nc = self.bridge.nc
                    prefix = nc.new_inbox()
                    await nc.subscribe_direct(f"{prefix}.*", self._on_mux)
                    self._mux_prefix = prefix
        return self._mux_prefix

    def _on_mux(self, msg: Msg) -> None:
        token = msg.subject.rsplit(".", 1)[-1]
        pending = self._mux_pending.get(token)
        if pending is None:
            return
        msgs, done = pending
        if msg.headers and "Status" in msg.headers:
            if not done.done():
                done.set_result(msg)
        else:
            msgs.append(msg)

    async def _direct_batch(self, request: dict[str, Any], timeout: float) -> tuple[list[Msg], Msg]:
        """One batch direct get: the messages, and the closing status message (204 EOB or 404)."""
        prefix = await self._ensure_mux()
        token = uuid.uuid4().hex
        msgs: list[Msg] = []
        done: asyncio.Future[Msg] = asyncio.get_running_loop().create_future()
        self._mux_pending[token] = (msgs, done)
        try:
            await self.bridge.nc.publish(
                self._direct_subject, orjson.dumps(request), reply=f"{prefix}.{token}"
            )
            end = await asyncio.wait_for(done, timeout)
        finally:
            self._mux_pending.pop(token, None)
        return msgs, end

    async def _direct_scan(
        self,
        subject: str,
        start: int,
        limit: int | None,
        stop: int | None,
        timeout: float,
        accept: Callable[[Msg], bool] | None = None,
    ) -> list[Msg]:
        """Messages on ``subject`` (a filter) from sequence ``start``, at most ``limit``, up to ``stop``."""
        out: list[Msg] = []
        seq = max(start, 1)
        while limit is None or len(out) < limit:
            want = _READ_BATCH if limit is None else min(_READ_BATCH, limit - len(out))
            if accept is not None:
                want = _READ_BATCH
            if stop is not None:
                if stop < seq:
                    break
                want = min(want, stop - seq + 1)
            request: dict[str, Any] = {"seq": seq, "batch": want}
            if subject != self.layout.all:
                # A batch answers how many messages remain: for a filter, nats-server counts them
                # by matching every subject of the stream (O(subjects) per request); for the whole
                # stream (the stream holds only ``layout.all``) it subtracts two sequences.
                request["next_by_subj"] = subject
            msgs, end = await self._direct_batch(request, timeout)
            status = (end.headers or {}).get("Status")
            if status not in ("204", "404"):
                raise _Transient(f"direct get answered status {status}")
            for m in msgs:
                if stop is not None and int((m.headers or {})[env.NATS_SEQUENCE]) > stop:
                    return out
                if accept is None or accept(m):
                    out.append(m)
                    if limit is not None and len(out) >= limit:
                        break
            if not msgs:
                break
            seq = int((msgs[-1].headers or {})[env.NATS_SEQUENCE]) + 1
            if (end.headers or {}).get("Nats-Num-Pending") == "0":
                break
        return out


def _answered_by_head(last: Msg | None, after: int | None) -> list[Msg] | None:
    """An aggregate's messages after version ``after`` (None: all), when its last message ``last``
    (None: it has none) is all there is to read; None when the ones before it must be read too."""
    if last is None:
        return []
    version = int((last.headers or {})[env.CE_ORIGINATORVERSION])
    if after is not None and version <= after:
        return []
    if version <= 1 or (after is not None and version == after + 1):
        return [last]
    return None


async def _current(last: Awaitable[Msg | None], floor: int | None) -> Msg | None:
    """An aggregate's last message as a direct get answered it, if the replica that answered has
    stored the newest event of it seen (``floor``: its stream sequence); ``_Transient`` otherwise."""
    msg = await last
    if floor is not None and (msg is None or _seq_of(msg) < floor):
        have = _seq_of(msg) if msg is not None else 0
        raise _Transient(f"{_BEHIND} answered (its head at {have}, seen stored at {floor})")
    return msg


def _loaded(msg: Msg) -> Loaded:
    """A stored message as the trust check of a load takes it: (version, position, headers, body)."""
    headers = msg.headers or {}
    return int(headers[env.CE_ORIGINATORVERSION]), _seq_of(msg), headers, bytes(msg.data)


def _seq_of(msg: Msg | None) -> int:
    """The stream sequence a direct get's message carries (0 for none)."""
    return int((msg.headers or {})[env.NATS_SEQUENCE]) if msg is not None else 0


def _head_of(msg: Msg, *, seq: int | None = None) -> _Head:
    """The head a stored message makes (``seq``: its stream sequence, when no header carries it)."""
    h = msg.headers or {}
    return _Head(
        int(h[env.NATS_SEQUENCE]) if seq is None else seq,
        int(h[env.CE_ORIGINATORVERSION]),
        h.get(env.APPEND_ID, ""),
        h.get(chain.CHAIN_HASH, ""),
    )


class JetStreamApplicationRecorder(JetStreamAggregateRecorder, ApplicationRecorder):
    """The application sequence is the stream: notification id = stream sequence."""

    def __init__(self, bridge: NatsBridge, *, poll_interval: float = 1.0, **kwargs: Any) -> None:
        super().__init__(bridge, **kwargs)
        self.poll_interval = poll_interval
        self._wakeups = _Wakeups()
        self._wake_started = False
        self._wake_lock = threading.Lock()
        # The newest position a commit announced (wake-ups carry their commit's last position).
        self._announced = 0

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        return self.append(stored_events)

    def select_notifications(
        self,
        start: int | None,
        limit: int,
        stop: int | None = None,
        topics: Sequence[str] = (),
        *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        first = (start or 1) if inclusive_of_start else (start or 0) + 1
        if limit <= 0 or (stop is not None and stop < first):
            return []
        if not topics:
            msgs = self.read_messages(first, limit, stop=stop)
        else:
            msgs = self._retrying(lambda: self._scan_topics(topics, first, limit, stop))
        return [env.decode_notification(m) for m in msgs]

    async def _scan_topics(
        self, topics: Sequence[str], first: int, limit: int, stop: int | None
    ) -> list[Msg]:
        # One filtered scan per topic (subjects carry kind and type), merged by position. Nested topics
        # are lowercased in subjects, so the exact topic is checked on the header.
        wanted = set(topics)

        def accept(m: Msg) -> bool:
            return (m.headers or {}).get(env.CE_TOPIC) in wanted

        filters = sorted({self.layout.topic_filter(t) for t in topics})
        results = await asyncio.gather(
            *(self._direct_scan(f, first, limit, stop, self.attempt_timeout, accept) for f in filters)
        )
        merged = sorted(
            (m for r in results for m in r), key=lambda m: int((m.headers or {})[env.NATS_SEQUENCE])
        )
        return merged[:limit]

    def max_notification_id(self) -> int | None:
        # The stream's own last sequence: O(1) on the server, where a last-by-subject get over
        # `<prefix>.>` walks every subject (0.6 ms on an empty stream, 11 ms at 50k events).
        async def last_seq() -> int:
            info = await self.bridge.js.stream_info(self.stream)
            return int(info.state.last_seq)

        seq = self._retrying(last_seq)
        return seq or None

    def subscribe(self, gt: int | None = None, topics: Sequence[str] = ()) -> JetStreamSubscription:
        return JetStreamSubscription(self, gt=gt, topics=topics)

    def wait_for_position(self, gt: int, timeout: float, cancel: threading.Event | None = None) -> int:
        """Block until the log's last position is > ``gt`` or ``timeout`` passes; return the last position.

        The result is ≤ ``gt`` only on timeout, or once ``cancel`` is set (checked when woken:
        set it, then ``wake_waiters``). Woken by commits (this process's or any other's).
        """
        deadline = time.monotonic() + timeout
        woken = threading.Event()
        self.register_wakeup(woken)
        # Commits announce their last position, so a caller that has read up to the last
        # announcement waits for the next one without asking the server. The stream's state is read
        # when nothing was announced yet (commits before this process subscribed) and after each
        # wake-up that announced nothing new (the poll, which catches commits nobody announced:
        # other writers, wake-ups lost while NATS was away).
        ask = self._announced == 0
        try:
            while True:
                woken.clear()
                position = self._announced
                if position <= gt and ask:
                    position = max(position, self.max_notification_id() or 0)
                ask = True
                remaining = deadline - time.monotonic()
                if position > gt or remaining <= 0 or (cancel is not None and cancel.is_set()):
                    return position
                woken.wait(min(remaining, self.poll_interval))
                if self._announced > gt:
                    return self._announced
        finally:
            self.unregister_wakeup(woken)

    # -- wake-ups --------------------------------------------------------------------------------

    def register_wakeup(self, event: threading.Event) -> None:
        """``event`` is set after every commit to the stream (and every ``poll_interval`` seconds)."""
        self._start_wakeups()
        self._wakeups.add(event)

    def unregister_wakeup(self, event: threading.Event) -> None:
        self._wakeups.discard(event)

    def wake_waiters(self) -> None:
        """Every thread in ``wait_for_position`` rechecks now (a server stopping its streams)."""
        self._wakeups.wake_all()

    def _start_wakeups(self) -> None:
        with self._wake_lock:
            if self._wake_started:
                return

            async def subscribe() -> None:
                await self.bridge.nc.subscribe(self.wake_subject, cb=self._on_wake)

            self._retrying(subscribe, what="subscribe to commit wake-ups")
            self.bridge.spawn(self._poll)
            self._wake_started = True

    async def _on_wake(self, msg: Msg) -> None:
        with contextlib.suppress(ValueError):
            self._announced = max(self._announced, int(msg.data))
        self._wakeups.wake_all()

    async def _poll(self) -> None:
        # Fallback for commits that announce nothing (other writers, lost wake-ups).
        while True:
            await asyncio.sleep(self.poll_interval)
            if self._wakeups:
                self._wakeups.wake_all()


class JetStreamSubscription(ListenNotifySubscription[JetStreamApplicationRecorder]):
    """Notifications after ``gt``, blocking for new ones; woken by commit announcements."""

    def __init__(
        self, recorder: JetStreamApplicationRecorder, gt: int | None = None, topics: Sequence[str] = ()
    ) -> None:
        super().__init__(recorder=recorder, gt=gt, topics=topics)
        try:
            recorder.register_wakeup(self._has_been_notified)
        except BaseException:
            self.stop()
            self._pull_thread.join()
            raise
        # The base class's pull thread already made its first read; a commit that landed before the
        # registration above would otherwise wait for the next poll.
        self._has_been_notified.set()

    def stop(self) -> None:
        self._recorder.unregister_wakeup(self._has_been_notified)
        super().stop()


def iter_notifications(
    recorder: JetStreamApplicationRecorder, start: int, *, batch: int = 500
) -> Iterable[Notification]:
    """All notifications from ``start`` (inclusive) to the current end, read in batches."""
    while True:
        page = recorder.select_notifications(start, batch)
        yield from page
        if len(page) < batch:
            return
        start = page[-1].id + 1


def _stored(n: Notification, *, excluded: bool = False) -> StoredEvent:
    """The stored event a notification read from the log carries (without its position); one the
    operator excluded as ``signing.Excluded`` (folded as nothing)."""
    topic = EXCLUDED_TOPIC if excluded else n.topic
    return StoredEvent(
        originator_id=n.originator_id, originator_version=n.originator_version, topic=topic, state=n.state
    )
