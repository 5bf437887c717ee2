"""A part's probe server over real HTTP, and the consumers' pending messages read from JetStream at
scrape time (stratus/health.py, docs/operations.md "Health and metrics")."""

from __future__ import annotations

from commands.app import Stratus
from stratus.config import Settings
from stratus.eventstore import NatsBridge
from stratus.health import Check, Probes, ProbeServer, consumer_pending
from tests.fixtures.projections import populate
from tests.fixtures.telemetry import get
from workers.consumer import DurableConsumer


def _sample(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_a_probe_server_answers_and_counts_what_a_consumer_has_yet_to_deliver(
    app: Stratus, bridge: NatsBridge, settings: Settings
) -> None:
    populate(app, instances=3, hosts=1)  # a flavor, a host, three servers: 5 appends, more events
    consumer = DurableConsumer(bridge, stream=settings.stream, durable="probed", filter_subjects=[">"]).open()
    ready = [Check("jetstream", True, "log head at 5")]
    probes = Probes(lambda: ready, [consumer_pending(bridge, settings.stream, ["probed", "missing"])])
    try:
        with ProbeServer("127.0.0.1:0", probes) as server:
            base = f"http://{server.address}"
            assert get(base + "/healthz") == (200, '{"status":"alive"}')
            assert get(base + "/readyz")[0] == 200
            ready.append(Check("postgresql", False, "away"))
            status, body = get(base + "/readyz")
            assert status == 503 and '"postgresql":{"ok":false,"detail":"away"}' in body

            status, text = get(base + "/metrics")
            assert status == 200
            pending = _sample(text, 'stratus_consumer_pending{durable="probed"}')
            assert pending is not None and pending == app.recorder.max_notification_id()
            assert 'durable="missing"' not in text  # a consumer JetStream does not know is left out
            consumer.ack_all(consumer.fetch(2, 2.0))
            text = get(base + "/metrics")[1]
            assert _sample(text, 'stratus_consumer_pending{durable="probed"}') == pending - 2
            assert _sample(text, 'stratus_consumer_ack_pending{durable="probed"}') == 0
            assert get(base + "/nowhere")[0] == 404
    finally:
        consumer.close()
