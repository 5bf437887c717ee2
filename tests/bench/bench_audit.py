"""Verification speed of the hash chain (``stratus audit verify``) against the raw read floor.

Run: ``python -m tests.bench.bench_audit [--events 100000] [--rounds 3]``. It starts its own
nats-server, appends N real chained events through the recorder (atomic appends of 1000 events over
1000 aggregates, bodies shaped like Stratus's events), then in each round reads the whole stream with
the raw reader alone (the floor: batch direct gets, no parsing) and verifies it (parse, hash, chain).
Then it stops the server and, in rounds again, reads the stream's block files alone (the store's
floor: records parsed, nothing hashed) and verifies them (``verify --store``) with 1 and 2 worker
processes.
"""

from __future__ import annotations

import argparse
import time
from uuid import uuid4

import orjson
from eventsourcing.persistence import StoredEvent

from stratus.audit import filestore, verify
from stratus.audit.rawreader import RawReader
from stratus.eventstore import NatsBridge
from tests.bench.harness import Bench, CpuMeter, machine_lines, nats_server
from tests.fixtures.nats import unique_settings

TOPICS = [
    "commands.instance:Instance.Requested",
    "commands.instance:Instance.Scheduled",
    "commands.instance:Instance.Spawned",
]


def body(i: int) -> bytes:
    return orjson.dumps(
        {
            "timestamp": "2026-11-22T08:00:00.123456Z",
            "name": f"vm-{i}",
            "project_id": "p1",
            "user_id": "u1",
            "flavor": {"id": "m1.tiny", "name": "m1.tiny", "vcpus": 1, "ram": 512, "disk": 1, "ephemeral": 0},
            "image_ref": "cirros",
            "metadata": {},
            "availability_zone": None,
            "request_key": None,
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with nats_server() as server:
        settings = unique_settings(server.url)
        from stratus.eventstore import JetStreamApplicationRecorder

        with NatsBridge(settings.nats_urls, name="bench-audit").start() as bridge:
            recorder = JetStreamApplicationRecorder.from_settings(bridge, settings)
            recorder.ensure_stream()
            ids = [uuid4() for _ in range(1000)]
            t = time.perf_counter()
            n = 0
            version = 0
            while n < args.events:
                version += 1
                k = min(1000, args.events - n)
                topic = TOPICS[(version - 1) % len(TOPICS)]
                recorder.append([StoredEvent(ids[j], version, topic, body(n + j)) for j in range(k)])
                n += k
            print(f"appended {n} chained events in {time.perf_counter() - t:.1f}s")
            bench = Bench(CpuMeter(server.pid))
            for _ in range(args.rounds):

                def floor() -> int:
                    with RawReader(settings.nats_urls, settings.stream) as r:
                        return sum(1 for _ in r.messages(f"{settings.subject_prefix}.>"))

                def check() -> int:
                    report = verify.verify(settings.nats_urls, settings.stream, settings.subject_prefix)
                    assert report.ok, report.first_break
                    return report.checked

                bench.measure("raw read (floor)", "events/s", floor)
                bench.measure("verify (read+parse+hash+chain)", "events/s", check, floor="raw read (floor)")
        # the same log from the store's files, no server in the path: stop it (as a backup is taken)
        server.stop()
        copy = server.store_dir
        for _ in range(args.rounds):

            def store_floor() -> int:
                stream = filestore.stream_dir(copy, settings.stream)
                return sum(1 for b in filestore.blocks(stream) for _ in filestore.read_block(b))

            def store_check(processes: int) -> int:
                prefix = settings.subject_prefix
                report = verify.verify_store(copy, settings.stream, prefix, processes=processes)
                assert report.ok, report.first_break
                return report.checked

            floor_name = "store read (floor: records parsed, nothing hashed)"
            bench.measure(floor_name, "events/s", store_floor)
            for processes in (1, 2):
                bench.measure(
                    f"verify --store, {processes} process{'es' if processes > 1 else ''}", "events/s",
                    lambda processes=processes: store_check(processes), floor=floor_name,  # type: ignore[misc]
                )  # fmt: skip
        print("\n".join(machine_lines()))
        print(bench.table(f"Chain verification, {n} events"))


if __name__ == "__main__":
    main()
