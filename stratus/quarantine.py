"""Quarantined events: what a part following the log skipped because it could not take it.

Every part that follows the log (the projector, the notifier, the scheduler, the hypervisor
workers) must survive any event that got into it. An event whose decoding or applying fails
deterministically (a NUL that PostgreSQL refuses, a garbled payload, an unknown event type, an
upcaster's error) would otherwise stop the part at every restart. Instead the part records it here,
logs one ERROR line naming the position and the reason, and goes on after it.

The records live on JetStream, in a stream of their own (``<STRATUS_STREAM>_QUARANTINE``, one
subject per part: ``<stream>_QUARANTINE.<part>``), because every part can reach it: the workers hold
no database access and the projector's failure may be PostgreSQL itself. A record carries the
position, the topic, the originator id, the part's name, the error's class and the first line of
its message (at most ``REASON_CHARS`` characters), never the payload. Each record's message id is
``<part>/<position>``, so recording the same event again (a restart before the skip was kept) is
dropped by the stream's duplicate window, and ``list`` shows each (part, position) once.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import nats.errors
import nats.js.errors
import orjson
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig

from stratus.eventstore.bridge import NatsBridge
from stratus.eventstore.envelope import CE_SUBJECT, CE_TOPIC, NATS_SEQUENCE, NATS_SUBJECT
from stratus.eventstore.errors import EventStoreUnavailable
from stratus.eventstore.subjects import encode_token

log = logging.getLogger("stratus.quarantine")

REASON_CHARS = 200
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
T = TypeVar("T")
_AWAY: tuple[type[Exception], ...] = (
    nats.js.errors.ServiceUnavailableError,
    nats.errors.NoRespondersError,
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.TimeoutError,
    TimeoutError,
)


def stream_name(log_stream: str) -> str:
    """The quarantine stream beside the log stream ``log_stream``."""
    return f"{log_stream}_QUARANTINE"


def reason(error: BaseException) -> str:
    """The first line of an error's message, shortened: enough to recognise it, no payload.

    PostgreSQL's errors put the offending value in their DETAIL line, which is dropped (their first
    line names the failure and the constraint, never a value). Python's own errors quote the value
    they choked on (``invalid literal for int() with base 10: 'x'``): quoted text is elided."""
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    if not type(error).__module__.startswith("psycopg"):
        first = _QUOTED.sub("'…'", first)
    return first[:REASON_CHARS]


def position_of(msg: Any) -> int:
    """The log position of a stored message (a direct get's header, or a consumer's metadata)."""
    seq = (msg.headers or {}).get(NATS_SEQUENCE)
    return int(seq) if seq is not None else int(msg.metadata.sequence.stream)


def described(msg: Any) -> tuple[int, str, str]:
    """(position, topic, originator id) of a stored message whose envelope may not decode: what its
    headers say, the subject standing in for a missing topic."""
    headers = msg.headers or {}
    subject = headers.get(NATS_SUBJECT) or str(getattr(msg, "subject", "") or "")
    return position_of(msg), headers.get(CE_TOPIC) or f"subject {subject}", headers.get(CE_SUBJECT, "?")


@dataclass(frozen=True)
class Quarantined:
    """One event a part skipped: where it is in the log, what it was, and why it could not be taken."""

    part: str
    position: int
    topic: str
    originator_id: str
    error: str  # the exception's class name
    reason: str  # the first line of its message, at most REASON_CHARS characters
    at: str  # when it was quarantined (RFC 3339, UTC)

    def to_json(self) -> bytes:
        return orjson.dumps(asdict(self))

    @classmethod
    def from_json(cls, data: bytes) -> Quarantined:
        d = orjson.loads(data)
        return cls(**{k: d.get(k, "") for k in cls.__dataclass_fields__})  # type: ignore[arg-type]


class Quarantine:
    """The quarantine stream of one log stream, seen through the NATS bridge (synchronous)."""

    def __init__(
        self, bridge: NatsBridge, *, log_stream: str, replicas: int = 1, timeout: float = 10.0
    ) -> None:
        self._bridge = bridge
        self.stream = stream_name(log_stream)
        self._log_stream = log_stream
        self._replicas = replicas
        self._timeout = timeout
        self._ensured = False

    def subject(self, part: str) -> str:
        return f"{self.stream}.{encode_token(part)}"

    def stream_config(self, replicas: int | None = None) -> StreamConfig:
        return StreamConfig(
            name=self.stream,
            description="Events the parts following the Stratus log quarantined (skipped)",
            subjects=[f"{self.stream}.>"],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            discard=DiscardPolicy.OLD,
            num_replicas=replicas or self._replicas,
            allow_direct=True,
        )

    def ensure(self) -> None:
        """Create the stream if it does not exist yet (idempotent)."""
        if self._ensured:
            return

        async def ensure() -> None:
            js = self._bridge.js
            try:
                await js.stream_info(self.stream)
            except nats.js.errors.NotFoundError:
                replicas = None  # as many as the log's own stream has
                with contextlib.suppress(nats.js.errors.NotFoundError):
                    replicas = (await js.stream_info(self._log_stream)).config.num_replicas
                with contextlib.suppress(nats.js.errors.BadRequestError):
                    await js.add_stream(self.stream_config(replicas))

        self._run(ensure, "create the quarantine stream")
        self._ensured = True

    def record(
        self, part: str, *, position: int, topic: str, originator_id: str, error: BaseException
    ) -> Quarantined:
        """Record that ``part`` skips the event at ``position`` because of ``error``, and alert.

        Raises ``EventStoreUnavailable`` if JetStream cannot take the record: the caller must then
        not skip the event (it retries later, as for any temporary failure)."""
        self.ensure()
        entry = Quarantined(
            part=part,
            position=position,
            topic=topic,
            originator_id=originator_id,
            error=type(error).__name__,
            reason=reason(error),
            at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        )

        async def publish() -> None:
            await self._bridge.js.publish(
                self.subject(part),
                entry.to_json(),
                stream=self.stream,
                headers={"Nats-Msg-Id": f"{part}/{position}"},
            )

        self._run(publish, "record a quarantined event")
        log.error(
            "%s: event at position %d quarantined (skipped): %s: %s [topic %s, originator %s]",
            part, position, entry.error, entry.reason, topic, originator_id,
        )  # fmt: skip
        return entry

    def record_message(self, part: str, msg: Any, error: BaseException) -> Quarantined:
        """``record`` for a stored message as read from the log (its envelope need not decode)."""
        position, topic, originator = described(msg)
        return self.record(part, position=position, topic=topic, originator_id=originator, error=error)

    def list(self, part: str | None = None) -> list[Quarantined]:
        """Every record (of ``part``, or of every part) in log order, each (part, position) once."""
        self.ensure()
        subject = self.subject(part) if part is not None else f"{self.stream}.>"

        async def read() -> list[bytes]:
            js = self._bridge.js
            out: list[bytes] = []
            seq = 1
            while True:
                try:
                    msg = await js.get_msg(self.stream, seq, subject=subject, next=True)
                except nats.js.errors.NotFoundError:
                    return out
                out.append(bytes(msg.data or b""))
                seq = int(msg.seq or seq) + 1

        seen: dict[tuple[str, int], Quarantined] = {}
        for data in self._run(read, "read the quarantine"):
            q = Quarantined.from_json(data)
            seen.setdefault((q.part, q.position), q)
        return sorted(seen.values(), key=lambda q: (q.position, q.part))

    def last_position(self, part: str) -> int:
        """The log position of the last event ``part`` quarantined (0: none)."""
        self.ensure()

        async def last() -> int:
            try:
                msg = await self._bridge.js.get_last_msg(self.stream, self.subject(part), direct=True)
            except nats.js.errors.NotFoundError:
                return 0
            return int(Quarantined.from_json(bytes(msg.data or b"")).position)

        return int(self._run(last, "read the quarantine"))

    def _run(self, factory: Callable[[], Coroutine[Any, Any, T]], what: str) -> T:
        try:
            return self._bridge.run(factory, self._timeout)
        except _AWAY as e:
            raise EventStoreUnavailable(f"could not {what}: JetStream away ({type(e).__name__})") from e
