"""An acknowledged append survives a NATS restart or crash, exactly once.

Writers append (single events and atomic batches) while the test stops the server (SIGTERM) or kills
it (SIGKILL) and starts it again on the same store and port. Appends in flight at that moment have an
unknown outcome; the recorder resolves it by reading the log back. Afterwards every acknowledged
event is on the log once, at the position it was acknowledged with, and nothing else is.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from uuid import UUID, uuid4

import orjson
import pytest
from eventsourcing.persistence import StoredEvent

from stratus.eventstore import JetStreamApplicationRecorder, NatsBridge
from stratus.eventstore.recorder import iter_notifications
from stratus.natsserver import NatsServer
from tests.fixtures.nats import unique_settings

WRITERS = 4


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_appends_survive_server_restarts_exactly_once(own_nats_server: NatsServer, kill: bool) -> None:
    settings = unique_settings(own_nats_server.url)
    bridge = NatsBridge(settings.nats_urls).start()
    try:
        recorder = JetStreamApplicationRecorder.from_settings(
            bridge, settings, timeout=20.0, attempt_timeout=0.5
        )
        recorder.ensure_stream()
        acked: dict[tuple[UUID, int], int] = {}
        acked_lock = threading.Lock()
        errors: list[BaseException] = []
        stop = threading.Event()

        def write(k: int) -> None:
            oid, version, n_appends = uuid4(), 0, 0
            try:
                while not stop.is_set():
                    n = 3 if n_appends % 3 == k % 3 else 1  # single publishes and atomic batches
                    events = [
                        StoredEvent(
                            oid,
                            version + i,
                            "tests:Thing.Happened",
                            orjson.dumps({"timestamp": "2026-01-01T00:00:00Z", "i": version + i}),
                        )
                        for i in range(1, n + 1)
                    ]
                    positions = recorder.append(events)
                    with acked_lock:
                        for e, p in zip(events, positions, strict=True):
                            acked[(oid, e.originator_version)] = p
                    version += n
                    n_appends += 1
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=write, args=(k,)) for k in range(WRITERS)]
        for t in threads:
            t.start()
        for _ in range(2):
            time.sleep(0.3)
            before = len(acked)
            own_nats_server.restart(kill=kill)
            time.sleep(0.3)
        stop.set()
        for t in threads:
            t.join(30)
        assert not errors, errors
        print(dict(recorder.stats))
        if kill:  # a SIGKILL catches appends in flight; a graceful stop may drain them all first
            assert recorder.stats["unknown_outcome"] > 0
        assert len(acked) > before > 0

        stored = list(iter_notifications(recorder, 1))
        keys = [(n.originator_id, n.originator_version) for n in stored]
        duplicates = [k for k, c in Counter(keys).items() if c > 1]
        assert not duplicates
        positions = {(n.originator_id, n.originator_version): n.id for n in stored}
        assert positions == acked  # every acknowledged event, at its acknowledged position, nothing else
        for oid in {k[0] for k in keys}:
            versions = [e.originator_version for e in recorder.select_events(oid)]
            assert versions == list(range(1, len(versions) + 1))
    finally:
        bridge.close()


def test_calls_wait_for_a_server_that_is_down(own_nats_server: NatsServer) -> None:
    settings = unique_settings(own_nats_server.url)
    bridge = NatsBridge(settings.nats_urls).start()
    try:
        recorder = JetStreamApplicationRecorder.from_settings(
            bridge, settings, timeout=10.0, attempt_timeout=0.3
        )
        recorder.ensure_stream()
        own_nats_server.stop()
        restarter = threading.Timer(0.7, own_nats_server.start)
        restarter.start()
        started = time.monotonic()
        oid = uuid4()
        assert recorder.append([StoredEvent(oid, 1, "tests:Thing.Happened", b"{}")]) == [1]
        assert time.monotonic() - started >= 0.5
        assert recorder.max_notification_id() == 1
        restarter.join()
    finally:
        bridge.close()
