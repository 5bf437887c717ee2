"""Snapshots on JetStream: a stream of their own beside the log, one message per aggregate.

See ``stratus.eventstore.snapshots`` for what a snapshot is and how a load uses one, and
docs/eventstore.md, "Snapshots", for the stream and why snapshots are not events.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any
from uuid import UUID

import nats.js.errors
from eventsourcing.persistence import StoredEvent
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig

from stratus.eventstore.errors import EventStoreUnavailable
from stratus.eventstore.recorder import JetStreamAggregateRecorder, _Rejected, _Transient
from stratus.eventstore.signing import snapshot_refusal, snapshot_writer_refusal
from stratus.eventstore.subjects import decode_token, encode_token
from stratus.trust.registry import Identity

__all__ = ["SNAPSHOT_SHA256", "JetStreamSnapshotRecorder"]

log = logging.getLogger(__name__)

SNAPSHOT_VERSION = "Stratus-Snapshot-Version"
SNAPSHOT_TOPIC = "Stratus-Snapshot-Topic"
SNAPSHOT_SHA256 = "Stratus-Snapshot-Sha256"
SNAPSHOT_ID_TYPE = "Stratus-Id-Type"


def _digest(key: str, version: int, topic: str, state: bytes) -> str:
    h = hashlib.sha256()
    h.update(f"{key}\x00{version}\x00{topic}\x00".encode())
    h.update(state)
    return h.hexdigest()


def _kind(topic: str) -> str:
    """The subject kind of the aggregate class ``topic`` names (``commands.host:Host`` -> ``host``),
    as the log's subjects name its events (``subjects.kind_and_type``)."""
    return encode_token(topic.rpartition(":")[2].rpartition(".")[2].lower())


class JetStreamSnapshotRecorder(JetStreamAggregateRecorder):
    """Snapshots on a stream of their own: ``<stream>_SNAPSHOTS``, subjects
    ``_STRATUS.SNAPSHOT.<stream>.<aggregate id>``, at most one message per subject (the newest).

    Outside the log's subjects, so nothing that reads the log (projections, integrators' consumers,
    the audit chain and its verifiers, exports) ever sees one. Writes are plain publishes, last one
    wins: two processes snapshotting one aggregate at once leave one of the two, and either is a
    correct start. Each message carries the SHA-256 of what it says (aggregate, version, topic,
    state): a snapshot whose bytes do not match is not returned (the load replays).

    Signed by the writer's key (``signer``: ``Trust-Key``/``Trust-Signature`` over that digest);
    with the deployment's registry (``trust``), a snapshot is returned only if its signer may have
    written it (``signing.snapshot_refusal``: unsigned, unknown, retired, or a host's snapshot of
    anything but its own host's aggregates is not): a planted snapshot costs a replay, never a
    wrong aggregate (docs/trust.md). A part does not write the snapshots no part would use (a
    host's of a server): each would replace, as its aggregate's one message, one that is used.
    """

    def __init__(self, bridge: Any, *, stream: str, replicas: int = 1, **kwargs: Any) -> None:
        kwargs.pop("subject_prefix", None)
        trust = kwargs.pop("trust", None)
        super().__init__(
            bridge,
            stream=f"{stream}_SNAPSHOTS",
            subject_prefix=f"_STRATUS.SNAPSHOT.{stream}",
            replicas=replicas,
            **kwargs,
        )
        self.prefix = f"_STRATUS.SNAPSHOT.{stream}"
        self.verifier = trust  # checks snapshots' signers (the event loads' ``trust`` stays None)

    def _once(self, factory: Callable[[], Any], *, what: str) -> Any:
        """One attempt, never the log's retrying through outages: a snapshot is not worth a wait (the
        load replays, the command's events are stored already)."""
        try:
            return self._run(factory, self.attempt_timeout)
        except (_Transient, _Rejected) as e:
            raise EventStoreUnavailable(f"could not {what}: {e}") from e

    def subject(self, originator_id: UUID | str) -> str:
        return f"{self.prefix}.{encode_token(str(originator_id))}"

    @contextlib.contextmanager
    def prefetched(self, originator_ids: Iterable[UUID | str]) -> Iterator[None]:
        """Read the snapshot of each aggregate in one round trip, for the loads inside (in this
        thread): a process loading every host at its start pays one hop for a batch of snapshots."""
        subjects = [self.subject(i) for i in originator_ids]
        found = self._once(lambda: self._last_messages(subjects, self.attempt_timeout), what="read snapshots")
        self._prefetch.heads = dict(zip(subjects, found, strict=True))
        try:
            yield
        finally:
            self._prefetch.heads = {}

    def stream_config(self) -> StreamConfig:
        return StreamConfig(
            name=self.stream,
            description="Stratus aggregate snapshots (a cache beside the log, not events)",
            subjects=[f"{self.prefix}.>"],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            discard=DiscardPolicy.OLD,
            max_msgs=-1,
            max_bytes=-1,
            max_age=0,
            max_msgs_per_subject=1,
            num_replicas=self.replicas,
            allow_direct=True,
            deny_delete=False,
            deny_purge=False,
        )

    def _stream_differs(self, have: StreamConfig, wanted: StreamConfig) -> bool:
        return not (
            have.subjects == wanted.subjects
            and have.max_msgs_per_subject == 1
            and have.num_replicas == wanted.num_replicas
            and have.allow_direct
            and not have.deny_purge
        )

    async def _update_stream(self, wanted: StreamConfig) -> None:
        """Update the stream; a cache, so one that cannot be updated into shape (an earlier layout's,
        whose deny-delete cannot be cleared) is deleted and created afresh."""
        jsm = self.bridge.js
        try:
            await jsm.update_stream(wanted)
        except nats.js.errors.APIError as e:  # e.g. err 10052: deny-delete cannot be cleared
            if e.code is not None and e.code >= 503:
                raise
            log.info("snapshot stream %s recreated (update refused: %s)", self.stream, e.description)
            await jsm.delete_stream(self.stream)
            await jsm.add_stream(wanted)

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """Store each snapshot as its aggregate's one message (replacing the one before)."""
        outs = []
        writer = self._writer()
        for s in stored_events:
            key = str(s.originator_id)
            if writer is not None and snapshot_writer_refusal(writer, _kind(s.topic), key):
                self.stats["not_written"] += 1  # no part would use it, and it would replace one they do
                continue
            headers = {
                SNAPSHOT_VERSION: str(s.originator_version),
                SNAPSHOT_TOPIC: s.topic,
                SNAPSHOT_ID_TYPE: "uuid" if isinstance(s.originator_id, UUID) else "str",
                SNAPSHOT_SHA256: _digest(key, s.originator_version, s.topic, s.state),
            }
            if self.signer is not None:
                self.signer.sign_snapshot(headers[SNAPSHOT_SHA256], headers)
            outs.append((self.subject(s.originator_id), s.state, headers))

        async def publish() -> None:
            for subject, data, headers in outs:
                await self.bridge.js.publish(subject, data, timeout=self.attempt_timeout, headers=headers)

        self._once(publish, what="store a snapshot")
        return None

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        """The aggregate's snapshot (the newest; there is one at most), if within ``gt``/``lte``."""
        subject = self.subject(originator_id)
        prefetched = self._take_prefetched(subject)
        if prefetched is not None:
            msg = prefetched[0]
        else:
            msg = self._once(lambda: self.last_message(subject, self.attempt_timeout), what="read a snapshot")
        if msg is None or limit == 0:
            return []
        h = msg.headers or {}
        key = str(originator_id)
        try:
            version = int(h[SNAPSHOT_VERSION])
            topic = h[SNAPSHOT_TOPIC]
            ok = h[SNAPSHOT_SHA256] == _digest(key, version, topic, msg.data)
        except (KeyError, ValueError):
            ok = False
        if not ok:
            self.stats["corrupt"] += 1
            log.warning("snapshot of %s on %s does not match its digest: ignored", key, self.stream)
            return []
        if self.verifier is not None:
            refused = snapshot_refusal(self.verifier, h, h[SNAPSHOT_SHA256], _kind(topic), key)
            if refused:
                self.stats["untrusted"] += 1
                log.warning("snapshot of %s on %s not used: %s", key, self.stream, refused)
                return []
        if (gt is not None and version <= gt) or (lte is not None and version > lte):
            return []
        oid: UUID | str = UUID(key) if h.get(SNAPSHOT_ID_TYPE) == "uuid" else key
        return [StoredEvent(originator_id=oid, originator_version=version, topic=topic, state=msg.data)]

    def _writer(self) -> Identity | None:
        """The identity this recorder signs as, if the registry knows it (None: write every snapshot)."""
        if self.verifier is None or self.signer is None:
            return None
        return self.verifier.registry.by_key(self.signer.key_id)

    def decode_subject(self, subject: str) -> str:
        """The aggregate id a snapshot subject names."""
        return decode_token(subject.rsplit(".", 1)[-1])

    def purge(self) -> None:
        """Drop every snapshot (loads replay until new ones are taken)."""

        async def purge() -> None:
            await self.bridge.js.purge_stream(self.stream)

        self._retrying(purge, what="purge the snapshot stream")
