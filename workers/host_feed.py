"""Feeds the scheduler's host view from the log: an ordered consumer on every Host event.

``catch_up()`` asks the stream for the position of the newest Host event, then folds every Host
event up to it into the view, so a decision never starts from a view older than the moment it was
asked for (it may still be overtaken by a concurrent claim; the Host aggregate catches that).

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

import logging
from typing import Any

import nats.errors
from eventsourcing.application import Application
from eventsourcing.domain import CanMutateAggregate
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy

from stratus.eventstore.bridge import NatsBridge
from stratus.eventstore.envelope import NATS_SEQUENCE, decode_message
from stratus.eventstore.errors import EventStoreUnavailable
from stratus.eventstore.recorder import JetStreamAggregateRecorder
from stratus.eventstore.signing import ServerPlaces, UntrustedEvent, Verdict, Verifier
from stratus.quarantine import Quarantine, position_of, reason
from workers.host_view import HostView

log = logging.getLogger(__name__)


PART = "host-feed"


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
    ) -> None:
        self._bridge = bridge
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
        # Taken off the subscription on the loop thread, folded into the view on the caller's.
        self._received = 0  # the stream sequence of the last one
        self._pending: list[Msg] = []
        self.part = PART
        self.quarantine = Quarantine(bridge, log_stream=stream, timeout=timeout)
        self._known: set[int] | None = None  # positions quarantined already, read at the first poison

    def open(self) -> HostFeed:
        async def subscribe() -> Any:
            return await self._bridge.js.subscribe(
                self._filter, stream=self._stream, ordered_consumer=True, deliver_policy=DeliverPolicy.ALL
            )

        self._sub = self._bridge.run(subscribe, self._timeout)
        return self

    def catch_up(self) -> None:
        if self._sub is None:
            self.open()  # a restart after a stall failed to subscribe; try again
        try:
            self._bridge.run(self._receive_to_end, self._timeout)
        except _Stalled:
            # The ordered consumer stopped delivering (e.g. it expired while NATS was away):
            # start over from the beginning of the log with an empty view.
            log.warning("host feed stalled; rebuilding the host view")
            self._pending = []
            self.close()
            self._received = 0
            self._view.clear()
            self.open()
            raise
        finally:
            msgs, self._pending = self._pending, []
            for msg in msgs:
                self._fold(msg)

    def _fold(self, msg: Msg) -> None:
        refused = self._refusal(msg)
        if refused is not None:
            self._quarantine(msg, refused)
            return
        try:
            self._recorder.observe(msg)  # the event store's head hints
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
        sub = self._sub
        last = await self._recorder.last_message(self._filter, self._timeout / 2)
        end = int((last.headers or {})[NATS_SEQUENCE]) if last is not None else 0  # 0: no host yet
        while self._received < end:
            try:
                msg = await sub.next_msg(timeout=self._timeout / 2)
            except TimeoutError as e:  # nats.errors.TimeoutError is one
                raise _Stalled(f"host events up to {end} did not arrive in time") from e
            self._pending.append(msg)
            self._received = int(msg.metadata.sequence.stream)

    def close(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None and not self._bridge.closed:
            try:
                self._bridge.run(sub.unsubscribe, self._timeout)
            except (EventStoreUnavailable, TimeoutError, nats.errors.Error) as e:
                # Closing anyway: the ordered consumer is ephemeral and expires on its own.
                log.info("closing the host feed: %s", e)
