"""Feeds the scheduler's host view from the log: an ordered consumer on every Host event.

``open()`` starts the view from the hosts' snapshots (``<stream>_SNAPSHOTS``), not from the log's
first event, so that a scheduler's start-up costs per host, not per event of the log
(docs/performance.md, "Growth"):

1. every host's id, from the subjects of the hosts' first events (one stream-info request);
2. every host's newest snapshot (500 a hop), each the host at its anchor, the stored event it was
   taken at;
3. the consumer then delivers the Host events from the oldest of those anchors on: an event a host's
   snapshot holds already is passed over on its headers, undecoded, and each host's anchor is checked
   when the feed reaches it (the log's event there must be the one the snapshot names, by position,
   version and chain hash; otherwise the snapshot is not of this log and the host is read afresh).

A host is snapshotted every 50 of its events, so a busy host's anchor is recent; a host whose
snapshot is older than ``window_per_host`` positions a host (an idle one), or that has none, is
loaded alone as any cold load reads it (its snapshot and the events after it, or its history), so
that it does not drag the feed's start back. A log shorter than that window is folded whole, as are
all logs with snapshots off (``IS_SNAPSHOTTING_ENABLED=n``).

``catch_up()`` asks the stream for the position of the newest Host event, then folds every Host
event up to it into the view, so a decision never starts from a view older than the moment it was
asked for (it may still be overtaken by a concurrent claim; the Host aggregate catches that).
The subscription's callback hands each Host event over whole as it arrives (on the NATS loop's
thread; ``catch_up`` folds them on its caller's), so a catch-up cut short by its deadline (the first
one over a long log folded whole) leaves what arrived to be folded and the next one goes on from
there: nothing is half taken when the deadline cancels it. (It used ``sub.next_msg``, and a
cancellation there could drop the message just taken off the subscription's queue: a gap in that
host's versions, repaired by reading the host whole, or, the last one lost, a stall.)

A Host event that cannot be decoded or folded is quarantined (``stratus.quarantine``, part
``host-feed``) and left out of the view: the view's host stays as it was before it (a claim on it
is still checked by the Host aggregate at decision time).

With the deployment's trust registry (``trust``), each Host event is checked before it is folded,
as the projector checks it (docs/trust.md): its signer may append it (checks 1 to 5), and a host's
move return on another host is held to where the server it names was then (check 6, from that
server's history: ``signing.ServerPlaces``). A refused one is quarantined as ``UntrustedEvent`` and
left out of the view: compute-2's key on compute-1's inventory or claims changes nothing the
scheduler ranks hosts by.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter, deque
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from typing import Any
from uuid import UUID

import nats.errors
import orjson
from eventsourcing.application import Application
from eventsourcing.domain import CanMutateAggregate
from eventsourcing.utils import get_topic
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy

from commands.host import Host
from stratus.eventstore.bridge import NatsBridge
from stratus.eventstore.chain import CHAIN_HASH
from stratus.eventstore.envelope import CE_ORIGINATORVERSION, CE_SUBJECT, NATS_SEQUENCE, decode_message
from stratus.eventstore.errors import EventStoreUnavailable
from stratus.eventstore.recorder import JetStreamAggregateRecorder
from stratus.eventstore.signing import ServerPlaces, UntrustedEvent, Verdict, Verifier
from stratus.eventstore.snapshot_stream import JetStreamSnapshotRecorder
from stratus.eventstore.snapshots import Snapshot, SnapshottingRepository
from stratus.eventstore.subjects import decode_token
from stratus.quarantine import Quarantine, position_of, reason
from workers.host_view import HostView

log = logging.getLogger(__name__)


PART = "host-feed"
# Hosts whose heads (and snapshots) are read in one hop when the view starts.
_LOAD_BATCH = 500
# How far back (log positions per host) a host's snapshot may be for the feed to follow the host from
# there; a host snapshotted earlier (an idle one) is loaded on its own. A busy host is snapshotted
# every 50 of its events, so its snapshot is within its last 50 events: the feed reads at most about
# this many positions per host, whatever the length of the log.
WINDOW_PER_HOST = 10 * 50


@dataclass(frozen=True)
class _Anchored:
    """A host as its snapshot has it, and the stored event the snapshot was taken at."""

    host: Host
    position: int
    version: int
    chain_hash: str

    @classmethod
    def of(cls, host: object, snapshot: Snapshot) -> _Anchored | None:
        seq, _, chain_hash = snapshot.anchor.partition(":")
        if not isinstance(host, Host) or not seq.isdigit():
            return None
        return cls(host, int(seq), snapshot.originator_version, chain_hash)


class _Stalled(EventStoreUnavailable):
    """Host events known to exist did not arrive on the subscription."""


class HostFeed:
    """An ordered consumer of every Host event, folding them into the scheduler's ``HostView``."""

    def __init__(
        self,
        bridge: NatsBridge,
        app: Application[Any],
        view: HostView,
        *,
        stream: str,
        subject_filter: str,
        timeout: float = 10.0,
        trust: Verifier | None = None,
        window_per_host: int = WINDOW_PER_HOST,
    ) -> None:
        """``window_per_host``: how far back (log positions per host) a host's snapshot may be for the
        feed to follow the host from it; a host snapshotted earlier is loaded on its own."""
        self._bridge = bridge
        self._window = window_per_host
        self._app = app
        recorder = app.recorder
        if not isinstance(recorder, JetStreamAggregateRecorder):
            raise TypeError(f"the host feed reads a JetStream event store, not {type(recorder).__name__}")
        self._recorder = recorder
        self._trust = trust
        self._places = (
            ServerPlaces(trust, recorder.server_history, confirm=recorder.leaders_server_history)
            if trust is not None
            else None
        )
        self._view = view
        self._stream = stream
        self._filter = subject_filter
        self._timeout = timeout
        self._sub: Any = None
        # Handed over by the subscription's callback on the loop thread, folded into the view on the
        # caller's: a deque (appends and pops are atomic), so that no message is ever in flight between
        # the two (a catch-up cancelled at its deadline inside ``sub.next_msg`` dropped the message it
        # had just taken off the subscription's queue).
        self._arrived: deque[Msg] = deque()
        self._received = 0  # the stream sequence of the last one handed over
        self._more = asyncio.Event()  # set by the callback (on the loop), waited on by the catch-up
        self._subscription = 0  # which subscription is current: a closed one's callback hands nothing
        self._handover = threading.Lock()  # the callback's hand-over against a restart's reset
        self.part = PART
        self.quarantine = Quarantine(bridge, log_stream=stream, timeout=timeout)
        self._known: set[int] | None = None  # positions quarantined already, read at the first poison
        # How the view's hosts were read when it last started: from a snapshot the feed follows on,
        # or loaded each on its own.
        self.started: Counter[str] = Counter()
        # Hosts started from a snapshot whose anchor the feed has not reached yet.
        self._anchors: dict[UUID, _Anchored] = {}

    def open(self) -> HostFeed:
        """Start the view from the hosts as loaded (or from the log's beginning when snapshots are
        off) and subscribe to the Host events after."""
        start = self._start()

        if start == 0:
            config = ConsumerConfig(deliver_policy=DeliverPolicy.ALL)
        else:
            config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start + 1)

        with self._handover:
            self._subscription += 1
            current = self._subscription

        async def arrived(msg: Msg) -> None:
            with self._handover:
                if current != self._subscription:
                    return  # a subscription closed since (the feed started over): not this view's
                self._arrived.append(msg)
                self._received = int(msg.metadata.sequence.stream)
            self._more.set()

        async def subscribe() -> Any:
            return await self._bridge.js.subscribe(
                self._filter, stream=self._stream, ordered_consumer=True, config=config, cb=arrived
            )

        self._sub = self._bridge.run(subscribe, self._timeout)
        return self

    def _start(self) -> int:
        """Load every host into the view; the log position its feed goes on from (0: the beginning)."""
        self._anchors = {}
        repository = self._app.repository
        if self._app.snapshots is None or not isinstance(repository, SnapshottingRepository):
            return 0
        last = self._bridge.run(
            lambda: self._recorder.last_message(self._filter, self._timeout / 2), self._timeout
        )
        if last is None:
            return 0  # no host yet
        head = int((last.headers or {})[NATS_SEQUENCE])
        ids = self._host_ids()
        if head <= self._window * len(ids):
            return 0  # a short log: folding it whole reads no more than following the snapshots would
        snapshots = self._snapshots(repository, ids)
        # Hosts snapshotted within the window are followed from their snapshots by the feed itself;
        # the others (no snapshot, or one taken long ago: an idle host) are each loaded whole.
        recent = {i: a for i, a in snapshots.items() if a.position > head - self._window * len(ids)}
        start = min((a.position for a in recent.values()), default=head + 1) - 1
        self._view.start((a.host for a in recent.values()), start)
        loaded = self._load_alone([i for i in ids if i not in recent])
        self._anchors = recent
        self.started = Counter(snapshot=len(recent), loaded=loaded)
        log.info(
            "host view started: %d hosts from their snapshots, %d loaded alone; following the log from "
            "position %d (its Host events end at %d)",
            len(recent),
            loaded,
            start + 1,
            head,
        )
        self._received = start
        return start

    def _snapshots(self, repository: SnapshottingRepository, ids: list[UUID]) -> dict[UUID, _Anchored]:
        """Each host's usable snapshot (``_LOAD_BATCH`` snapshots a hop), as a host and its anchor."""
        recorder = self._app.snapshots.recorder if self._app.snapshots is not None else None
        out: dict[UUID, _Anchored] = {}
        for i in range(0, len(ids), _LOAD_BATCH):
            batch = ids[i : i + _LOAD_BATCH]
            ahead = (
                recorder.prefetched(batch)
                if isinstance(recorder, JetStreamSnapshotRecorder)
                else nullcontext()
            )
            with ahead:
                for host_id in batch:
                    found = repository.usable_snapshot(host_id)
                    anchored = _Anchored.of(*found) if found is not None else None
                    if anchored is not None:
                        out[host_id] = anchored
        return out

    def _load_alone(self, ids: list[UUID]) -> int:
        """Read each host into the view as a cold load reads it (its snapshot and the events after, or
        its history; the heads of ``_LOAD_BATCH`` hosts a hop), as the view reads a host after a gap (a
        host whose history the trust check refuses is left out); how many are in the view."""
        loaded = 0
        for i in range(0, len(ids), _LOAD_BATCH):
            batch = ids[i : i + _LOAD_BATCH]
            with self._recorder.prefetched(batch):
                loaded += sum(self._view.reload(host_id) for host_id in batch)
        return loaded

    def _host_ids(self) -> list[UUID]:
        """Every host's id, from the subjects of the hosts' first events (one per host, whatever the
        length of their histories): JetStream's stream info, a page of subjects at a time."""
        registered = self._recorder.layout.topic_filter(get_topic(Host.Registered))  # type: ignore[attr-defined]

        async def page(offset: int) -> dict[str, Any]:
            request = orjson.dumps({"subjects_filter": registered, "offset": offset})
            reply = await self._bridge.nc.request(
                f"$JS.API.STREAM.INFO.{self._stream}", request, self._timeout / 2
            )
            answer: dict[str, Any] = orjson.loads(reply.data)
            if "error" in answer:
                raise EventStoreUnavailable(f"stream info of {self._stream}: {answer['error']}")
            return answer

        ids: list[UUID] = []
        while True:
            answer = self._bridge.run(partial(page, len(ids)), self._timeout)
            subjects = (answer.get("state") or {}).get("subjects") or {}
            ids.extend(UUID(decode_token(subject.split(".")[-2])) for subject in subjects)
            if not subjects or len(ids) >= int(answer.get("total") or 0):
                return ids

    def catch_up(self) -> None:
        if self._sub is None:
            self.open()  # a restart after a stall failed to subscribe; try again
        try:
            self._bridge.run(self._receive_to_end, self._timeout)
        except _Stalled:
            # The ordered consumer stopped delivering (e.g. it expired while NATS was away):
            # start over from the beginning of the log with an empty view.
            log.warning("host feed stalled; rebuilding the host view")
            self.close()
            with self._handover:
                self._arrived.clear()
                self._received = 0
            self._view.clear()
            self.open()
            raise
        finally:
            # What arrived, up to the end or to where the deadline cut the catch-up short: the next
            # one goes on from there.
            while self._arrived:
                self._fold(self._arrived.popleft())

    def fold_arrived(self) -> int:
        """Fold what the subscription has handed over so far, without asking the stream where its end
        is (no request): called while the scheduler waits for work, so that Host events arriving
        between its decisions (releases, other schedulers' claims) are folded as they come instead of
        piling up in the hand-over for as long as it is idle. How many it folded."""
        folded = 0
        while self._arrived:
            self._fold(self._arrived.popleft())
            folded += 1
        return folded

    def _fold(self, msg: Msg) -> None:
        try:
            self._recorder.observe(msg)  # the event store's head hints
            if self._anchors and self._held(msg):
                return  # its host's snapshot (signed, checked when read) holds it already
        except (KeyError, ValueError) as e:  # headers that do not name a host's event
            self._quarantine(msg, e)
            return
        refused = self._refusal(msg)
        if refused is not None:
            self._quarantine(msg, refused)
            return
        try:
            notification, _envelope = decode_message(msg)
            event = self._app.mapper.to_domain_event(notification)
            if isinstance(event, CanMutateAggregate):
                self._view.apply(event, notification.id)
        except Exception as e:  # decoding and folding are pure: the failure is this event's own
            self._quarantine(msg, e)

    def _refusal(self, msg: Msg) -> UntrustedEvent | None:
        """Why the Host event ``msg`` may not be folded (``trust``), or None."""
        if self._trust is None or self._places is None:
            return None
        headers, body, position = msg.headers or {}, bytes(msg.data), position_of(msg)
        c = self._trust.check(headers, body, position)
        reason = (
            c.reason if c.verdict is Verdict.REFUSED else self._places.refusal(c, headers, body, position)
        )
        return UntrustedEvent(reason) if reason else None

    def _held(self, msg: Msg) -> bool:
        """While the feed reads the hosts' snapshots' window: whether the view's host holds this
        event already (it started from a later snapshot), told from its headers without decoding it;
        and a host's snapshot checked when the feed reaches the event it was taken at."""
        h = msg.headers or {}
        host_id, version, position = UUID(h[CE_SUBJECT]), int(h[CE_ORIGINATORVERSION]), position_of(msg)
        anchored = self._anchors.get(host_id)
        if anchored is not None and position >= anchored.position:
            del self._anchors[host_id]
            if (position, version) != (anchored.position, anchored.version) or (
                anchored.chain_hash and h.get(CHAIN_HASH, "") != anchored.chain_hash
            ):
                # Not the event the snapshot was taken at: the snapshot is not of this log (it was
                # restored from an older backup, or replaced), so the host is read afresh.
                log.warning("host view: the snapshot of host %s is not of this log; reading it", host_id)
                self._view.reload(host_id)
        return self._view.skip_held(host_id, version, position)

    def _quarantine(self, msg: Msg, error: Exception) -> None:
        position = position_of(msg)
        try:
            if self._known is None:  # each start reads every Host event again: alert once per event
                self._known = {r.position for r in self.quarantine.list(self.part)}
            if position in self._known:
                log.info("%s: event at position %d skipped (quarantined already)", self.part, position)
                return
            self.quarantine.record_message(self.part, msg, error)
            self._known.add(position)
        except (EventStoreUnavailable, TimeoutError) as e:  # the ERROR line is the record then
            log.error("%s: event at position %d skipped (%s: %s); its quarantine record failed: %s",
                      self.part, position, type(error).__name__, reason(error), e)  # fmt: skip

    async def _receive_to_end(self) -> None:
        """Wait until every Host event up to the newest has arrived; cancelled at the catch-up's
        deadline, it leaves nothing half taken (the callback hands each message over whole)."""
        last = await self._recorder.last_message(self._filter, self._timeout / 2)
        end = int((last.headers or {})[NATS_SEQUENCE]) if last is not None else 0  # 0: no host yet
        while self._received < end:
            self._more.clear()
            try:
                async with asyncio.timeout(self._timeout / 2):
                    await self._more.wait()
            except TimeoutError as e:
                raise _Stalled(f"host events up to {end} did not arrive in time") from e

    def close(self) -> None:
        sub, self._sub = self._sub, None
        with self._handover:
            self._subscription += 1  # its callback hands nothing over from now on
        if sub is not None and not self._bridge.closed:
            try:
                self._bridge.run(sub.unsubscribe, self._timeout)
            except (EventStoreUnavailable, TimeoutError, nats.errors.Error) as e:
                # Closing anyway: the ordered consumer is ephemeral and expires on its own.
                log.info("closing the host feed: %s", e)
