"""Poison events: one event a part cannot process never stops it.

Every part that follows the log (the projector, the notifier, the scheduler, the hypervisor
workers, the event stream) tells apart what fails for a while (NATS or PostgreSQL away: retried
with backoff) from what fails every time for one event (a payload it cannot decode, a value the
read model refuses, a bug in the code applying that event type). The second kind is
*quarantined*: the part records which event it skipped and why, says so in an ERROR log line, and
goes on after it, so a restart resumes instead of dying on the same event again.

The records live on JetStream, beside the log, in the stream ``<log stream>_QUARANTINE`` (subject
``quarantine.<log stream>.<part>.<position>``): every part can write there, the workers included
(they have no database), and an operator lists them with ``stratus quarantine list``. A record holds
the event's position, subject, type and aggregate id, the part, the error's class and a clipped
message: never the payload, which may be large or hold what the event carries; read the event itself
with ``stratus audit history`` or an export. Recording is idempotent: each part records a position
once (``Nats-Expected-Last-Subject-Sequence: 0`` on its subject), so a part that crashed between
recording and moving on records nothing twice.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from dataclasses import asdict, dataclass

import nats.errors
import nats.js.errors
import orjson
from nats.js.api import StorageType, StreamConfig

from stratus.eventstore.bridge import NatsBridge

log = logging.getLogger("stratus.quarantine")

_MESSAGE_CHARS = 500
_WRONG_LAST_SEQUENCE = 10071


@dataclass(frozen=True)
class Quarantined:
    """One skipped event: where it is on the log, who skipped it and why (no payload)."""

    part: str
    position: int
    subject: str
    event_type: str
    originator_id: str
    error: str
    message: str
    at: str


def stream_name(log_stream: str) -> str:
    return f"{log_stream}_QUARANTINE"


def _subject(log_stream: str, part: str, position: str) -> str:
    return f"quarantine.{log_stream}.{part}.{position}"


class QuarantineLog:
    """Records and lists the events the parts of one deployment skipped."""

    def __init__(self, bridge: NatsBridge, log_stream: str, *, timeout: float = 10.0) -> None:
        self._bridge = bridge
        self._log_stream = log_stream
        self.stream = stream_name(log_stream)
        self._timeout = timeout
        self._ensured = False

    def record(
        self,
        part: str,
        position: int,
        error: BaseException,
        *,
        subject: str = "",
        event_type: str = "",
        originator_id: str = "",
    ) -> Quarantined:
        """Record that ``part`` skipped the event at ``position`` because of ``error``; log it."""
        entry = Quarantined(
            part=part,
            position=position,
            subject=subject,
            event_type=event_type,
            originator_id=originator_id,
            error=f"{type(error).__module__}.{type(error).__qualname__}",
            message=str(error)[:_MESSAGE_CHARS],
            at=dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z"),
        )
        log.error(
            "QUARANTINED event at position %d (%s %s) by %s: %s: %s",
            position, event_type or subject, originator_id, part, entry.error, entry.message,
        )  # fmt: skip
        self._ensure()
        data = orjson.dumps(asdict(entry))
        headers = {"Nats-Expected-Last-Subject-Sequence": "0"}

        async def publish() -> None:
            try:
                await self._bridge.js.publish(
                    _subject(self._log_stream, part, str(position)), data, stream=self.stream, headers=headers
                )
            except nats.js.errors.BadRequestError as e:
                if e.err_code != _WRONG_LAST_SEQUENCE:
                    raise  # recorded before (a restart after recording): nothing to add

        self._bridge.run(publish, self._timeout)
        return entry

    def entries(self, part: str | None = None) -> list[Quarantined]:
        """Every record (of ``part``, or of all parts), oldest first."""
        self._ensure()

        async def read() -> list[Quarantined]:
            js = self._bridge.js
            total = (await js.stream_info(self.stream)).state.messages
            out: list[Quarantined] = []
            if not total:
                return out
            every = f"quarantine.{self._log_stream}.>"
            sub = await js.subscribe(every, stream=self.stream, ordered_consumer=True)
            try:
                for _ in range(total):
                    msg = await sub.next_msg(timeout=self._timeout)
                    out.append(Quarantined(**orjson.loads(msg.data)))
            finally:
                with contextlib.suppress(nats.errors.Error):
                    await sub.unsubscribe()
            return out

        found = list(self._bridge.run(read, self._timeout * 2))
        return [q for q in found if part is None or q.part == part]

    def _ensure(self) -> None:
        if self._ensured:
            return
        config = StreamConfig(
            name=self.stream,
            subjects=[f"quarantine.{self._log_stream}.>"],
            storage=StorageType.FILE,
            description="Events the parts of Stratus skipped as poison (stratus/quarantine.py)",
        )

        async def ensure() -> None:
            js = self._bridge.js
            try:
                await js.stream_info(self.stream)
            except nats.js.errors.NotFoundError:
                with contextlib.suppress(nats.js.errors.BadRequestError):  # made meanwhile by another part
                    await js.add_stream(config)

        self._bridge.run(ensure, self._timeout)
        self._ensured = True
