"""The log as a rebuild replays it: read below nats-py, with the protocol reader the audit uses.

Why: a rebuild reads the whole log once, and reading it through nats-py cost 25-27 us of our
process's CPU per event (its message path and header parse), about half of the rebuild's
(docs/performance.md, "Read models: rebuild"). ``stratus.audit.rawreader.RawReader`` reads the log on
a blocking socket. ``RawLog`` puts it behind the projector's ``EventLog``: its ``read_messages``
hands back messages shaped as nats-py's (``headers`` answering what the bridge's parser makes of the
block, ``HeaderBlock``; ``data``; ``subject``), so the projector decodes, checks and applies them as
it does today; everything else (the log's head, a filtered read of the trust check) is the
recorder's.

The replay is delivered by an ordered push consumer (``RawReader.pushed``), each message's block as a
direct get returns it: serving batch direct gets cost nats-server ~24 us of CPU per event, a push
consumer ~5, and with our process and PostgreSQL on the same two cores that was the replay's limit
(docs/performance.md, "the replay on an ordered push consumer"). Where the server will not create
the consumer (a part without the right to), the replay reads batch direct gets (``RawReader.frames``)
instead, saying so in a warning.

The raw reader has no reconnects; it speaks TLS as the bridge does (``tls://``, verified against the
same CAs). ``replay_log`` reads through nats-py instead when a URL is neither ``nats://`` nor
``tls://`` or the reader cannot connect (a wrong CA included: it never reads unverified), and
``RawLog`` goes on through nats-py (which rides out NATS restarts) if its connection is lost
mid-replay; each says why in a warning (slower, not wrong: the same messages, decoded the same way).
The live projector catches up after downtime through ``replay_log`` too (``projections.runner``).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from eventsourcing.persistence import Notification

from stratus.audit.rawreader import ConsumerRefused, RawReader, RawReaderError, position_of, subject_of
from stratus.eventstore import JetStreamApplicationRecorder
from stratus.eventstore.bridge import Client, redacted
from stratus.eventstore.envelope import (
    CE_ORIGINATORVERSION,
    CE_SUBJECT,
    CE_TOPIC,
    ID_TYPE,
    NATS_SEQUENCE,
    decode_notification,
    notification_of,
)

if TYPE_CHECKING:  # the projector reads its messages (``Projector._entry``): imported at run time there
    from projections.projector import EventLog

logger = logging.getLogger("stratus.rebuild")

_STATUS_LINE = len(b"NATS/1.0\r\n")  # what nats-py strips before parsing a header block's lines
# Direct gets per request (where no consumer can be made): the server also caps a reply's bytes, and
# the reader asks again for the rest.
_BATCH = 1000
_MISSING = object()
_TOKEN = re.compile(r"[!-9;-~]+")  # a header name as the parser keeps it: ASCII, no whitespace, no colon


@functools.lru_cache(maxsize=64)
def _name_key(name: str) -> tuple[bytes, bytes, int] | None:
    """``name`` as bytes, the start of its line (``\r\nname:``) and where its value starts in it;
    None when only the parser's rules can say (a name with whitespace or a colon, or not ASCII)."""
    if _TOKEN.fullmatch(name) is None:
        return None
    key = name.encode()
    return key, b"\r\n" + key + b":", len(key) + 1


class HeaderBlock(Mapping[str, str]):
    """A data message's raw header block (``NATS/1.0\r\n...``) read as the dict nats-py makes of it.

    Parsing a stored event's 29 headers costs ~12 us, and the projector's decode reads five of them
    (``envelope.decode_notification``). A name looked up alone is found in the block: where its last
    occurrence starts a line (``\r\nname:``), that line is the last naming it, and its value is
    stripped and decoded as the bridge's parser does (``Client._parse_header_lines``). Where the last
    occurrence is anywhere else, a later line may name it with padding the parser strips
    (``" ce-topic :"``), so the block is parsed after all; so it is by anything that iterates (a trust
    check, ``dict()``). Either way the answer is the parser's (tests/unit/test_header_block.py).
    """

    __slots__ = ("_block", "_parsed")

    def __init__(self, block: bytes) -> None:
        self._block = block
        self._parsed: dict[str, str] | None = None

    def get(self, name: str, default: Any = None) -> Any:
        if self._parsed is None and (found := _name_key(name)) is not None:
            key, line, value_at = found
            block = self._block
            at = block.rfind(key)
            if at < 0:  # no line can name it, padded or not
                return default
            # (from at < 2, a start before 0 counts from the end: too close to it to match the line)
            if block.startswith(line, at - 2):
                at += value_at
                end = block.find(b"\r\n", at)
                return block[at : end if end >= 0 else len(block)].strip().decode("utf-8", "replace")
        return self._all().get(name, default)

    def _all(self) -> dict[str, str]:
        if self._parsed is None:
            self._parsed = Client._parse_header_lines(self._block[_STATUS_LINE:])
        return self._parsed

    def __getitem__(self, name: str) -> str:
        value = self.get(name, _MISSING)
        if value is _MISSING:
            raise KeyError(name)
        return value  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __bool__(self) -> bool:
        return True  # ``msg.headers or {}`` without a parse: an empty block answers as {} does


# The headers a Notification is made of (``envelope.decode_notification``), in the order
# ``StoredMessage.notification`` reads them: each name, the start of its line, where its value starts.
_NOTIFICATION_HEADERS = tuple(
    (name.encode(), b"\r\n" + name.encode() + b":", len(name) + 1)
    for name in (NATS_SEQUENCE, CE_SUBJECT, ID_TYPE, CE_ORIGINATORVERSION, CE_TOPIC)
)


class StoredMessage(HeaderBlock):
    """A message read by ``RawReader``, as the projector reads nats-py's: ``headers`` (what nats-py's
    message has, by the same parser: ``HeaderBlock``), ``data``, ``subject``.

    The message is its own header block, so that reading one makes one object, not two: each is one
    more for the garbage collector to walk while the batch lives (two batches' worth at a time), and
    the collector was a tenth of the replay's CPU. Made from the reader's (header block, body) alone:
    the subject is read from the block when asked for (the projector asks only of a message it
    quarantines)."""

    __slots__ = ("data",)

    def __init__(self, block: bytes, data: bytes) -> None:  # HeaderBlock's, inlined: one per event
        self._block = block
        self._parsed = None
        self.data = data

    @property
    def headers(self) -> HeaderBlock:
        return self

    @property
    def subject(self) -> str:
        """The subject the message was stored on (its ``Nats-Subject`` header, as the reader reads it)."""
        return subject_of(self._block)

    def notification(self) -> Notification:
        """``decode_notification(self)``, its five headers found in one method: where each one's last
        occurrence starts a line (``HeaderBlock.get``'s rule), ends with one and the numbers read as
        numbers from the bytes, the values are read there; otherwise ``decode_notification`` answers
        (the parser's values, the same errors). tests/unit/test_stored_message_decoding.py and
        tests/integration/test_replay_decoding.py compare the two."""
        block = self._block
        rfind, startswith, index = block.rfind, block.startswith, block.index
        values = []
        try:
            for key, line, value_at in _NOTIFICATION_HEADERS:
                at = rfind(key)
                # (at < 2: the name is missing, or too close to the start to begin a line)
                if at < 2 or not startswith(line, at - 2):
                    return decode_notification(self)
                values.append(block[at + value_at : index(b"\r\n", at)])
            seq, raw_id, id_type, version, topic = values
            # int() of bytes takes what int() of their text takes, less: an ASCII number, spaces around
            position, originator_version = int(seq), int(version)
        except ValueError:  # no line end, or a number int() reads from text only (other digits, spaces)
            return decode_notification(self)
        return notification_of(
            raw_id.strip().decode("utf-8", "replace"),
            id_type.strip() == b"uuid",
            originator_version,
            topic.strip().decode("utf-8", "replace"),
            self.data,
            position,
        )


class RawLog:
    """``log`` (the event store's recorder) with its whole-log reads made by ``reader`` (on a push
    consumer, by direct gets once the server refuses one); ``part``: who replays (in the warnings)."""

    def __init__(self, log: JetStreamApplicationRecorder, reader: RawReader, part: str = "rebuild") -> None:
        self.log = log
        self.part = part
        self.layout = log.layout
        self._reader: RawReader | None = reader
        self._messages: Iterator[tuple[bytes, bytes]] | None = None  # the open read's (header block, body)
        self._next = 0  # the position the open read continues from
        self._pushed = True  # read on a push consumer (False: the server refused one, direct gets)

    def read_messages(
        self, start: int, limit: int, *, stop: int | None = None, subject_filter: str | None = None
    ) -> list[Any]:
        if self._reader is None or stop is not None or subject_filter not in (None, self.layout.all):
            return list(self.log.read_messages(start, limit, stop=stop, subject_filter=subject_filter))
        try:
            if self._messages is None or start != self._next:
                self._end_read()
                self._messages = self._read(self._reader, start)
            try:
                frames = list(itertools.islice(self._messages, limit))
            except ConsumerRefused as e:  # nothing of this call's read was kept: read it again
                logger.warning("%s: the raw reader reads by direct gets: %s", self.part, e)
                self._pushed = False
                self._messages = self._read(self._reader, start)
                frames = list(itertools.islice(self._messages, limit))
        except (RawReaderError, OSError) as e:  # its socket's reads are translated, its writes are not
            logger.warning("%s: the raw reader failed (%s); reading on through nats-py", self.part, e)
            self.close()
            return list(self.log.read_messages(start, limit))
        if len(frames) < limit:  # the log's end: the read is over (a later call starts a new one)
            self._messages = None
        self._next = position_of(frames[-1][0]) + 1 if frames else start
        return list(itertools.starmap(StoredMessage, frames))

    def _read(self, reader: RawReader, start: int) -> Iterator[tuple[bytes, bytes]]:
        if self._pushed:
            return reader.pushed(self.layout.all, start)
        return reader.frames(self.layout.all, start, batch=_BATCH)

    def max_notification_id(self) -> int | None:
        return self.log.max_notification_id()

    def wait_for_position(self, gt: int, timeout: float) -> int:
        return self.log.wait_for_position(gt, timeout)

    def _end_read(self) -> None:
        if self._messages is not None:
            messages, self._messages = self._messages, None
            messages.close()  # type: ignore[attr-defined]  # its consumer deleted, or its replies read

    def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            with contextlib.suppress(RawReaderError, OSError):
                self._end_read()
            self._messages = None
            reader.close()


@contextlib.contextmanager
def replay_log(log: EventLog, *, raw: bool = True, part: str = "rebuild") -> Iterator[EventLog]:
    """``log`` read through ``RawReader`` for a replay when it can be (``raw`` and an event store on
    NATS whose URLs are all ``nats://`` or ``tls://``), else ``log`` itself (nats-py), saying why in
    the log (``part``: who replays, in the message)."""
    if not raw or not isinstance(log, JetStreamApplicationRecorder):
        yield log
        return
    urls = log.bridge.urls
    other = [u for u in urls if urlsplit(u if "://" in u else f"nats://{u}").scheme not in ("nats", "tls")]
    if other:  # websockets: the raw reader speaks the plain protocol only, over TCP or TLS
        logger.warning(
            "%s: reading the log through nats-py: the raw reader speaks nats:// and tls:// only (%s)",
            part,
            ", ".join(map(redacted, other)),
        )
        yield log
        return
    try:
        reader = RawReader(urls, log.stream, seed_file=log.bridge.seed_file)
    except (RawReaderError, OSError) as e:
        logger.warning("%s: reading the log through nats-py: the raw reader cannot connect (%s)", part, e)
        yield log
        return
    raw_log = RawLog(log, reader, part)
    try:
        yield raw_log
    finally:
        raw_log.close()
