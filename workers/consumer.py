"""JetStream consumers for the workers, seen from synchronous code through the NATS bridge.

``DurableConsumer`` is a durable pull consumer with explicit acknowledgement; ``serve`` is the
control loop shared by the workers: fetch a message, decode it, let the worker's handler act, then
acknowledge (``Done``) or ask for it again later (``RetryLater``). A message is acknowledged only
after the handler returned, i.e. after its outcome was appended to the log; a crash in between
means a redelivery, which every handler treats as harmless.

Failures are classified here for what the event store can throw: an unavailable or slow NATS is
temporary (the message comes back later). Anything else a message's decoding or its handler raises
is taken for that event's fault (a garbled payload, a type no code knows, an upcaster's error, a
server whose history holds such an event): the event is quarantined (``stratus.quarantine``, part =
the durable consumer's name), logged at ERROR, and acknowledged, so that one bad event never stops a
worker nor holds up the events behind it. A quarantine that cannot be recorded (JetStream away)
leaves the message unacknowledged: it comes back later.

With the deployment's trust registry (``trust``), a consumer checks each event's signer as the
projector does (docs/trust.md): an event whose signer may not append it (or unsigned after the
cut-over) is quarantined as ``UntrustedEvent`` like one that cannot be decoded, and never handed to
the worker, nor settled (it is not the server's fault; a forger must not be able to fail servers).
The same holds for an event the worker's load of its server refuses (the recorder's ``trust``: a
refused event in the server's history): the delivery is quarantined as ``UntrustedEvent``, not
acted on, not settled.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

import nats.errors
import nats.js.errors
from eventsourcing.persistence import Notification
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from stratus.context import Actor, CommandContext, acting
from stratus.eventstore.bridge import NatsBridge
from stratus.eventstore.envelope import Envelope, decode_message
from stratus.eventstore.errors import EventStoreUnavailable
from stratus.eventstore.signing import UntrustedEvent, Verifier
from stratus.quarantine import Quarantine, position_of, reason
from workers.outcome import Done, Outcome, RetryLater

log = logging.getLogger(__name__)
T = TypeVar("T")

# What the event store raises when NATS does not answer in time: retry later.
STORE_TEMPORARY: tuple[type[Exception], ...] = (EventStoreUnavailable, TimeoutError)
_CLOSE_ERRORS: tuple[type[Exception], ...] = (*STORE_TEMPORARY, nats.errors.Error)
_STORE_RETRY_DELAY = 2.0
# Fetches failed in a row before the consumer is bound anew: after a cluster's leader was killed
# twice, fetches on the old binding were answered "no responders" for minutes while appends worked
# (docs/reliability.md, finding 2); binding again asks the cluster for the consumer's current leader.
_REBIND_AFTER_FAILURES = 3
# A binding given nothing for this long asks whether its consumer holds messages no one was given;
# if so, the binding is deaf (a fault campaign saw a hypervisor's bindings answer every fetch with
# nothing for 90 s after a stream leader's fault, an action waiting): it is bound anew. One binding of
# a process asks per consumer and interval (a host's worker has STRATUS_HOST_CONCURRENCY bindings):
# 1,000 idle hosts cost ~33 consumer-info requests a second to the cluster's JetStream API.
_IDLE_CHECK_SECONDS = 30.0

# What a worker does for the instance of a delivery it quarantined (e.g. record a fault), so that the
# instance is not left waiting for a step that will never come; best effort, after the record.
Settle = Callable[["Delivery", Exception], None]


# What NATS raises while JetStream is away (a restart, a cluster electing a leader): try again later.
_NATS_AWAY: tuple[type[Exception], ...] = (
    nats.js.errors.ServiceUnavailableError,
    nats.errors.NoRespondersError,
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionReconnectingError,
)


@contextlib.contextmanager
def _unavailable(what: str) -> Iterator[None]:
    """NATS's errors for a JetStream that is away, as the event store's own: temporary."""
    try:
        yield
    except _NATS_AWAY as e:
        raise EventStoreUnavailable(f"{what}: JetStream unavailable ({type(e).__name__})") from e


# Seconds between attempts to open a consumer while JetStream does not answer (a part started while
# the cluster elects leaders): then every few seconds.
_OPEN_DELAYS = (0.5, 1.0, 2.0, 5.0)


def when_ready(what: str, attempt: Callable[[], T], stop: threading.Event) -> T | None:
    """``attempt()`` (opening a consumer or a feed), tried again while JetStream is away or slow to
    answer, until it succeeds or ``stop`` is set (then None). A part started while the cluster elects
    its leaders waits for them instead of exiting (docs/reliability.md, finding 4)."""
    tries = 0
    while not stop.is_set():
        try:
            with _unavailable(what):
                return attempt()
        except STORE_TEMPORARY as e:
            delay = _OPEN_DELAYS[min(tries, len(_OPEN_DELAYS) - 1)]
            log.warning("%s: JetStream not ready, trying again in %.1fs: %r", what, delay, e)
            tries += 1
            stop.wait(delay)
    return None


# What this code sets on a durable consumer, each as (field, normalised value): the fields a
# release may change and JetStream updates in place (a consumer's delivery and ack policies cannot be).
def _wanted(config: ConsumerConfig) -> dict[str, object]:
    filters = list(config.filter_subjects or ([config.filter_subject] if config.filter_subject else []))
    return {
        "filter subjects": sorted(filters),
        "ack wait": config.ack_wait,
        "max deliver": config.max_deliver,
        "description": config.description,
    }


class ConsumerMismatch(Exception):
    """A durable consumer exists with a configuration that cannot be changed in place."""


async def reconcile(js: Any, stream: str, config: ConsumerConfig) -> None:
    """Create the durable consumer ``config`` names, or bring an existing one to ``config`` in place.

    A release may change what a part consumes (a new event type to act on, a new ack wait): the
    durable made by the previous release is updated, not deleted, so it keeps its position (its ack
    floor and what it delivered): the events after it are delivered once, those before it are not
    delivered again. (An event of a newly filtered type that is before the position is not delivered:
    the previous release had no use for it.) JetStream updates a durable in place when asked to create
    it with a changed configuration; its delivery and ack policies cannot change, and a consumer that
    differs there is refused here rather than deleted (docs/upgrades.md)."""
    name = config.durable_name or ""
    try:
        info = await js.consumer_info(stream, name)
    except nats.js.errors.NotFoundError:
        await js.add_consumer(stream, config=config)
        return
    fixed = [
        f"{field} {getattr(info.config, field)} (wanted {getattr(config, field)})"
        for field in ("deliver_policy", "ack_policy", "deliver_subject")
        if getattr(info.config, field) != getattr(config, field)
    ]
    if fixed:
        raise ConsumerMismatch(
            f"durable consumer {name} on {stream} cannot be updated in place: {', '.join(fixed)}; "
            "delete it (nats consumer rm) to have it made again from the start of the log"
        )
    had, want = _wanted(info.config), _wanted(config)
    changed = {k: (had[k], want[k]) for k in want if had[k] != want[k]}
    if not changed:
        return
    updated = await js.add_consumer(stream, config=config)  # an existing durable: updated in place
    if _wanted(updated.config) != want:
        raise ConsumerMismatch(f"JetStream did not update durable consumer {name} on {stream}: {changed}")
    log.warning(
        "durable consumer %s on %s updated in place at position %d: %s",
        name, stream, updated.ack_floor.stream_seq,
        "; ".join(f"{k} {old} -> {new}" for k, (old, new) in changed.items()),
    )  # fmt: skip


@dataclass(frozen=True)
class Delivery:
    """One consumed event, with how many times it has been delivered (1 = first time)."""

    notification: Notification
    envelope: Envelope
    attempt: int
    message: Msg | None = field(default=None, compare=False, repr=False)  # as delivered

    @property
    def originator_id(self) -> str:
        return str(self.envelope.originator_id)

    @property
    def event_type(self) -> str:
        """The event's type, e.g. ``scheduled`` for ``stratus.instance.scheduled``."""
        return self.envelope.type.rsplit(".", 1)[-1]

    def context(self, actor: Actor) -> CommandContext:
        """The context of the work done in reaction to this event (it records the causation)."""
        return CommandContext(actor=actor).caused_by(self.envelope.id, self.envelope.correlationid or None)


@runtime_checkable
class StoredHeads(Protocol):
    """Where a consumer notes each delivered event as its aggregate's newest seen stored (the JetStream
    recorder): the worker's next load of that aggregate then waits for a replica that has stored it,
    instead of acting on the state from before it (direct gets may be answered by a lagging follower)."""

    def observe(self, msg: Msg) -> None: ...


class DurableConsumer:
    """A durable JetStream pull consumer on ``stream``, created (or found) on ``open``."""

    # (stream, durable) -> when a binding of this process last asked what the consumer holds
    _asked: ClassVar[dict[tuple[str, str], float]] = {}
    _asked_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        bridge: NatsBridge,
        *,
        stream: str,
        durable: str,
        filter_subjects: Sequence[str],
        ack_wait: float = 60.0,
        call_timeout: float = 10.0,
        heads: StoredHeads | None = None,
        trust: Verifier | None = None,
    ) -> None:
        self._bridge = bridge
        self._heads = heads
        self._trust = trust
        self.stream = stream
        self.durable = durable
        self._config = ConsumerConfig(
            durable_name=durable,
            description="stratus worker",
            deliver_policy=DeliverPolicy.ALL,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=ack_wait,
            # Unbounded: the handlers bound their own retries and then record a fault.
            max_deliver=-1,
            filter_subjects=list(filter_subjects),
        )
        self._timeout = call_timeout
        self._sub: Any = None
        self._failed_fetches = 0
        self._given = time.monotonic()  # when a fetch last brought something (or the check last ran)
        self.quarantine = Quarantine(bridge, log_stream=stream, timeout=call_timeout)

    def open(self) -> DurableConsumer:
        async def subscribe() -> Any:
            js = self._bridge.js
            await reconcile(js, self.stream, self._config)
            return await js.pull_subscribe_bind(durable=self.durable, stream=self.stream)

        self._sub = self._bridge.run(subscribe, self._timeout)
        return self

    def fetch(self, batch: int, wait: float) -> list[Msg]:
        """Up to ``batch`` messages, waiting at most ``wait`` seconds for the first."""
        sub = self._sub
        if sub is None:
            raise RuntimeError("DurableConsumer.fetch before open")

        async def fetch() -> list[Msg]:
            try:
                msgs: list[Msg] = await sub.fetch(batch, timeout=wait)
            except TimeoutError:
                # Nothing came within ``wait``: nats-py raises its own TimeoutError when the server
                # said so (408) and asyncio's when its deadline came first (the pull request expires
                # at the server at the same moment; a message it still takes lands in this
                # subscription's queue, where the next fetch looks first). Neither means JetStream is
                # away: fetching again at once, not after a pause and not on a new binding (a fetch
                # that waited 2 s after each of those made a step wait for seconds on a busy machine).
                return []
            return msgs

        try:
            with _unavailable(f"fetching from {self.durable}"):
                msgs = self._bridge.run(fetch, wait + self._timeout)
        except STORE_TEMPORARY:
            self._failed_fetches += 1
            if self._failed_fetches >= _REBIND_AFTER_FAILURES:
                self._rebind()
            raise
        self._failed_fetches = 0
        if msgs:
            self._given = time.monotonic()
        elif time.monotonic() - self._given >= _IDLE_CHECK_SECONDS and self._turn_to_ask():
            self._given = time.monotonic()
            waiting = self._undelivered()
            if waiting:
                self._rebind(f"{waiting} messages wait, none given here for {_IDLE_CHECK_SECONDS:.0f} s")
        return msgs

    def _turn_to_ask(self) -> bool:
        """Whether no other binding of this process asked about this consumer within the interval."""
        now, key = time.monotonic(), (self.stream, self.durable)
        with self._asked_lock:
            if now - self._asked.get(key, float("-inf")) < _IDLE_CHECK_SECONDS:
                return False
            self._asked[key] = now
            return True

    def _undelivered(self) -> int:
        """How many messages the consumer holds that it has given no one (0 when it cannot say)."""

        async def info() -> int:
            return int((await self._bridge.js.consumer_info(self.stream, self.durable)).num_pending or 0)

        try:
            with _unavailable(f"asking {self.durable} what it holds"):
                return self._bridge.run(info, self._timeout)
        except _CLOSE_ERRORS as e:
            log.info("consumer %s: could not ask what it holds: %s", self.durable, e)
            return 0

    def _rebind(self, why: str = f"{_REBIND_AFTER_FAILURES} failed fetches") -> None:
        """Bind to the consumer anew (best effort: while JetStream is away, the next failures retry)."""
        self._failed_fetches = 0
        old = self._sub
        try:
            with _unavailable(f"binding to {self.durable} again"):
                self.open()
        except STORE_TEMPORARY as e:
            log.warning("consumer %s: binding again failed, retrying later: %s", self.durable, e)
            return
        log.warning("consumer %s: bound again after %s", self.durable, why)
        if old is not None:
            try:
                self._bridge.run(old.unsubscribe, self._timeout)
            except (*_CLOSE_ERRORS, *STORE_TEMPORARY) as e:
                log.info("consumer %s: leaving the old binding: %s", self.durable, e)

    def delivery(self, msg: Msg) -> Delivery:
        """``msg`` decoded (raises what decoding raises: the event's own fault), noted as seen stored.
        Raises ``UntrustedEvent`` for an event whose signer may not append it (``trust``)."""
        if self._trust is not None:
            refused = self._trust.refusal(msg.headers or {}, bytes(msg.data), position_of(msg))
            if refused is not None:
                raise refused
        d = _delivery(msg)
        if self._heads is not None:
            self._heads.observe(msg)
        return d

    def ack(self, msg: Msg) -> None:
        with _unavailable(f"acknowledging to {self.durable}"):
            self._bridge.run(msg.ack, self._timeout)

    def ack_all(self, msgs: Sequence[Msg]) -> None:
        """Acknowledge several messages in one hop to the loop (each ack is one publish)."""
        if not msgs:
            return

        async def ack() -> None:
            for m in msgs:
                await m.ack()

        with _unavailable(f"acknowledging to {self.durable}"):
            self._bridge.run(ack, self._timeout)

    def release(self, msgs: Sequence[Msg]) -> None:
        """Hand back messages taken but not handled (the part is stopping): they are redelivered at
        once to whoever consumes next, not after the ack wait (two minutes for a hypervisor), so a
        rolling restart delays no step. Best effort: if JetStream is away they come back after the
        ack wait anyway."""
        if not msgs:
            return

        async def nak() -> None:
            for m in msgs:
                await m.nak()

        try:
            with _unavailable(f"handing messages back to {self.durable}"):
                self._bridge.run(nak, self._timeout)
        except _CLOSE_ERRORS as e:
            log.info(
                "consumer %s: %d message(s) come back after the ack wait: %s", self.durable, len(msgs), e
            )

    def nak(self, msg: Msg, delay: float) -> None:
        with _unavailable(f"returning a message to {self.durable}"):
            self._bridge.run(lambda: msg.nak(delay=delay), self._timeout)

    def close(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None and not self._bridge.closed:
            try:
                self._bridge.run(sub.unsubscribe, self._timeout)
            except _CLOSE_ERRORS as e:
                log.info("closing consumer %s: %s", self.durable, e)

    def quarantine_and_ack(self, msg: Msg, error: Exception, then: Callable[[], None] | None = None) -> bool:
        """Record ``msg`` as quarantined by this consumer, call ``then`` (which must not raise), and
        acknowledge it (it is skipped): a crash before the acknowledgement redelivers it, and both
        the record and ``then`` are done again (the record is deduplicated).

        If the record or the acknowledgement cannot be made now (JetStream away), the message is
        left to come back; False then."""
        position = position_of(msg)
        try:
            self.quarantine.record_message(self.durable, msg, error)
            if then is not None:
                then()
            self.ack(msg)
        except STORE_TEMPORARY as e:
            log.warning("consumer %s: could not quarantine position %d, retrying later: %s",
                        self.durable, position, e)  # fmt: skip
            return False
        return True


def serve(
    consumer: DurableConsumer,
    handle: Callable[[Delivery], Outcome],
    stop: threading.Event,
    *,
    actor: Actor,
    batch: int = 1,
    poll: float = 1.0,
    settle: Settle | None = None,
) -> None:
    """Consume until ``stop`` is set, one message at a time, in stream order (``settle``: see
    ``Settle``).

    Every handler call runs in a command context caused by the consumed event, so the events it
    appends record their causation and the conversation's correlation id.
    """
    while not stop.is_set():
        msgs = _fetch(consumer, batch, poll, stop)
        for i, msg in enumerate(msgs):
            if stop.is_set():
                consumer.release(msgs[i:])  # redelivered at once to whoever runs next
                break
            _process(consumer, handle, msg, actor, settle)


def _fetch(consumer: DurableConsumer, batch: int, poll: float, stop: threading.Event) -> list[Msg]:
    """What is waiting (up to ``batch``); nothing, after a pause, while the event store is away."""
    try:
        return consumer.fetch(batch, poll)
    except STORE_TEMPORARY as e:
        log.warning("consumer %s: fetching failed, retrying: %r", consumer.durable, e)
        stop.wait(_STORE_RETRY_DELAY)
        return []


def serve_batches(
    consumer: DurableConsumer,
    handle: Callable[[list[Delivery]], list[Outcome]],
    stop: threading.Event,
    *,
    actor: Actor,
    batch: int,
    poll: float = 1.0,
    settle: Settle | None = None,
    idle: Callable[[], object] | None = None,
) -> None:
    """``serve``, handing the handler every message waiting (up to ``batch``) at once, in stream
    order; it answers with one outcome per delivery. The handler sets each delivery's command
    context itself (``Delivery.context``), since one append may carry the work of several.
    ``idle`` is called, on this thread, after each poll that brought nothing."""
    while not stop.is_set():
        msgs = _fetch(consumer, batch, poll, stop)
        if stop.is_set():
            consumer.release(msgs)  # redelivered at once to whoever runs next
            continue
        if not msgs:
            if idle is not None:
                try:
                    idle()
                except Exception:  # the next poll's idle, or the next batch, tries again
                    log.exception("consumer %s: the idle step failed", consumer.durable)
            continue
        deliveries = _deliveries(consumer, msgs)
        if not deliveries:
            continue
        outcomes: list[Outcome | Quarantined]
        try:
            outcomes = list(handle(deliveries))
        except STORE_TEMPORARY as e:
            outcomes = [RetryLater(_STORE_RETRY_DELAY, f"event store unavailable: {e}")] * len(deliveries)
        except Exception:  # one of them is at fault: each alone, to quarantine only that one
            log.warning("consumer %s: a batch of %d failed; handling its events one by one",
                        consumer.durable, len(deliveries))  # fmt: skip
            outcomes = [_alone(consumer, handle, d, actor, settle) for d in deliveries]
        done = [d.message for d, o in zip(deliveries, outcomes, strict=True) if isinstance(o, Done)]
        try:
            consumer.ack_all([m for m in done if m is not None])
            for d, outcome in zip(deliveries, outcomes, strict=True):
                if isinstance(outcome, RetryLater):
                    _retry_later(consumer, d, outcome)
        except STORE_TEMPORARY as e:
            log.warning("consumer %s: could not settle a batch: %s", consumer.durable, e)


@dataclass(frozen=True)
class Quarantined:
    """The outcome of a delivery quarantined (and acknowledged) already: nothing more to settle."""


def _deliveries(consumer: DurableConsumer, msgs: list[Msg]) -> list[Delivery]:
    """The messages as deliveries; one whose envelope cannot be decoded is quarantined."""
    out: list[Delivery] = []
    for msg in msgs:
        try:
            out.append(consumer.delivery(msg))
        except Exception as e:  # decoding is pure: the failure is this event's own
            consumer.quarantine_and_ack(msg, e)
    return out


def _alone(
    consumer: DurableConsumer,
    handle: Callable[[list[Delivery]], list[Outcome]],
    d: Delivery,
    actor: Actor,
    settle: Settle | None,
) -> Outcome | Quarantined:
    try:
        return handle([d])[0]
    except STORE_TEMPORARY as e:
        return RetryLater(_STORE_RETRY_DELAY, f"event store unavailable: {e}")
    except Exception as e:  # this event is at fault
        assert d.message is not None
        consumer.quarantine_and_ack(d.message, e, functools.partial(_settle, consumer, settle, d, e, actor))
        return Quarantined()


def _settle(
    consumer: DurableConsumer, settle: Settle | None, d: Delivery, error: Exception, actor: Actor
) -> None:
    """Let the worker settle the instance of a delivery it quarantined (best effort: the record is
    what counts; an instance left waiting is the operator's, see docs/operations.md). An event
    refused by the trust check (its own signer, or one in its server's history) settles nothing: a
    forger must not be able to fail servers."""
    if settle is None or isinstance(error, UntrustedEvent):
        return
    try:
        with acting(d.context(actor)):
            settle(d, error)
    except STORE_TEMPORARY as e:
        log.warning("consumer %s: could not settle %s %s after quarantining it: %s",
                    consumer.durable, d.event_type, d.originator_id, e)  # fmt: skip
    except Exception as e:  # the event stays quarantined; the instance is the operator's now
        log.warning("consumer %s: could not settle %s %s after quarantining it: %s: %s",
                    consumer.durable, d.event_type, d.originator_id, type(e).__name__, reason(e))  # fmt: skip


class PerServer:
    """One step at a time per server (Nova's lock on the instance uuid), any number of servers at once."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, tuple[threading.Lock, list[int]]] = {}

    @contextlib.contextmanager
    def held(self, key: str) -> Iterator[None]:
        with self._guard:
            lock, users = self._locks.setdefault(key, (threading.Lock(), [0]))
            users[0] += 1
        try:
            with lock:
                yield
        finally:
            with self._guard:
                users[0] -= 1
                if users[0] == 0:
                    del self._locks[key]


def serve_concurrently(
    open_consumer: Callable[[], DurableConsumer | None],
    handle: Callable[[Delivery], Outcome],
    stop: threading.Event,
    *,
    actor: Actor,
    threads: int,
    poll: float = 1.0,
    name: str = "consumer",
    settle: Settle | None = None,
) -> None:
    """``serve`` from ``threads`` threads, each with its own pull subscription on the same durable
    consumer (``open_consumer``: None when stopped before it could open), so that a slow step (a real
    guest's boot) does not hold up the others; the steps of one server still run one at a time
    (``PerServer``), and each re-reads its server's state first."""
    per_server = PerServer()

    def guarded(d: Delivery) -> Outcome:
        with per_server.held(d.originator_id):
            return handle(d)

    def one() -> None:
        consumer = open_consumer()
        if consumer is None:  # stopped before JetStream answered
            return
        try:
            serve(consumer, guarded, stop, actor=actor, poll=poll, settle=settle)
        finally:
            consumer.close()

    workers = [threading.Thread(target=one, name=f"{name}-{i}", daemon=True) for i in range(max(1, threads))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def _process(
    consumer: DurableConsumer,
    handle: Callable[[Delivery], Outcome],
    msg: Msg,
    actor: Actor,
    settle: Settle | None = None,
) -> None:
    try:
        delivery = consumer.delivery(msg)
    except Exception as e:  # decoding is pure: the failure is this event's own
        consumer.quarantine_and_ack(msg, e)
        return
    envelope = delivery.envelope
    outcome: Outcome
    try:
        with acting(delivery.context(actor)):
            outcome = handle(delivery)
    except STORE_TEMPORARY as e:
        outcome = RetryLater(_STORE_RETRY_DELAY, f"event store unavailable: {e}")
    except Exception as e:  # the handlers classify their own failures: what escapes is this event's
        consumer.quarantine_and_ack(msg, e, functools.partial(_settle, consumer, settle, delivery, e, actor))
        return
    try:
        if isinstance(outcome, Done):
            consumer.ack(msg)
        else:
            _retry_later(consumer, delivery, outcome)
    except STORE_TEMPORARY as e:
        # JetStream redelivers an unacknowledged message after ack_wait: the step will be re-checked.
        log.warning("consumer %s: could not settle message %s: %s", consumer.durable, envelope.id, e)


def _delivery(msg: Msg) -> Delivery:
    notification, envelope = decode_message(msg)
    return Delivery(notification, envelope, attempt=int(msg.metadata.num_delivered), message=msg)


def _retry_later(consumer: DurableConsumer, delivery: Delivery, outcome: Outcome) -> None:
    assert isinstance(outcome, RetryLater) and delivery.message is not None
    log.info(
        "%s %s: retry in %.1fs (attempt %d): %s",
        delivery.event_type,
        delivery.originator_id,
        outcome.delay,
        delivery.attempt,
        outcome.reason,
    )
    consumer.nak(delivery.message, outcome.delay)


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[threading.Event]:
    """Set ``stop`` on SIGTERM or SIGINT while inside; restore the old handlers after.

    Only the main thread may install signal handlers; elsewhere (a test's thread) this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum: int, _frame: object) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
