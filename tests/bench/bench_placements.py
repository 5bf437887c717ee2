"""The start-up read of where servers are (the trust check's placement tracker) at N servers.

Run: ``python -m tests.bench.bench_placements [--servers 10000] [--rounds 3]``. It starts its own
nats-server and appends, per server, the events of a boot signed as the parts sign them (the API's
``Requested``, the scheduler's ``Scheduled`` on one of 20 hosts, the host's ``Spawned``), in
atomic appends of 1000 servers. Then in each round:

- **raw read (floor)**: the ``Scheduled`` events alone, one filtered read of
  ``instance.*.scheduled``, nothing decoded: what the tracker cannot do with less;
- **placing reads**: ``projections.projector.placing_events``, the eight filtered reads of
  ``signing.PLACING`` a projector makes when it starts from its tracking position;
- **tracker build**: those reads and the fold (``InOrder`` over them: each event's signature
  checked and its server placed), as a projector started at the log's head does before its first
  batch.

Rates are placing events per second; the ratios are to the floor in the same round.
"""

from __future__ import annotations

import argparse
from uuid import uuid4

import orjson
from eventsourcing.persistence import StoredEvent

from projections.projector import placing_events
from stratus.eventstore import JetStreamApplicationRecorder, NatsBridge
from stratus.eventstore.signing import InOrder, Signer, Verdict, Verifier
from stratus.trust.nkeys import KeyPair
from stratus.trust.registry import Identity, Registry
from tests.bench.harness import Bench, CpuMeter, machine_lines, nats_server
from tests.fixtures.nats import unique_settings

HOSTS = [f"compute-{i}" for i in range(20)]
BATCH = 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--servers", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    api, scheduler, host = KeyPair.generate(), KeyPair.generate(), KeyPair.generate()
    registry = Registry(
        (
            Identity("api", "api", api.public_key, (">",)),
            Identity("scheduler", "scheduler", scheduler.public_key, ("instance.>",)),
            Identity("simulator", "host", host.public_key, ("instance.>",), tuple(HOSTS)),
        ),
        signed_from=1,
    )
    verifier = Verifier(registry)
    with nats_server() as server:
        settings = unique_settings(server.url)
        with NatsBridge(settings.nats_urls, name="bench-placements").start() as bridge:
            log = JetStreamApplicationRecorder.from_settings(bridge, settings)
            log.ensure_stream()
            ids = [uuid4() for _ in range(args.servers)]
            steps = (
                (
                    api,
                    "commands.instance:Instance.Requested",
                    lambda i: {"name": f"vm-{i}", "project_id": "p1"},
                ),
                (
                    scheduler,
                    "commands.instance:Instance.Scheduled",
                    lambda i: {"host": HOSTS[i % len(HOSTS)]},
                ),
                (host, "commands.instance:Instance.Spawned", lambda i: {"power_state": 1}),
            )
            for start in range(0, args.servers, BATCH):
                chunk = range(start, min(start + BATCH, args.servers))
                for version, (key, topic, body) in enumerate(steps, start=1):
                    log.signer = Signer(key)
                    log.append([StoredEvent(ids[i], version, topic, orjson.dumps(body(i))) for i in chunk])
            head = log.max_notification_id() or 0
            print(f"appended {head} signed events for {args.servers} servers")
            bench = Bench(CpuMeter(server.pid))
            floor = "raw read of the Scheduled events (floor)"
            for _ in range(args.rounds):

                def raw() -> int:
                    subject, start, n = f"{settings.subject_prefix}.instance.*.scheduled", 1, 0
                    while msgs := log.read_messages(start, 1000, stop=head, subject_filter=subject):
                        n += len(msgs)
                        start = int(msgs[-1].headers["Nats-Sequence"]) + 1
                    return n

                def reads() -> int:
                    return len(placing_events(log, 0, head))

                def build() -> int:
                    tracker = InOrder(verifier, lambda after, upto: placing_events(log, after, upto))
                    tracker.check({}, b"", head + 1)  # a projector's first event after the head
                    placed = sum(1 for i in ids[:100] if tracker.servers.permits(HOSTS, str(i)))
                    assert placed == 100 and tracker.position == head + 1
                    return args.servers

                bench.measure(floor, "events/s", raw)
                bench.measure("placing reads (8 filtered reads)", "events/s", reads, floor=floor)
                bench.measure("tracker build (reads, signatures, fold)", "events/s", build, floor=floor)
            assert InOrder(verifier).check({}, b"", 1).verdict is Verdict.REFUSED  # unsigned after cut-over
        print("\n".join(machine_lines()))
        print(bench.table(f"Placement tracker at start-up, {args.servers} servers ({head} events)"))


if __name__ == "__main__":
    main()
