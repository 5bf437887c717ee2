"""Appends per second through the event store, against raw nats-py publishes of the same messages.

Run: ``python -m tests.bench.bench_eventstore [--events N] [--rounds R]`` (a few minutes at most).
It starts its own nats-server (temporary store, free port) and, in each of R rounds:

- raw floors, each one coroutine on the bridge's event loop with prebuilt messages:
  sequential ``await js.publish`` of the payload alone, then of the same message our recorder sends
  (payload, CloudEvents headers, msg id, expected-last-sequence check on the aggregate);
- ``recorder.append([one event])`` from synchronous code: new aggregates, then version 2 of each,
  beside the same publishes made from synchronous code (one ``NatsBridge.run`` hop each);
- atomic appends of 10 events (10 new aggregates, one NATS atomic batch) against the raw atomic
  batch and against 10 raw publishes pipelined with ``publish_async`` (not atomic);
- the command path: ``Handlers.create_flavor`` against one publish of a flavor's event, and
  ``Handlers.create_server`` (load flavor, quota and usage, decide, append) against its atomic
  append prebuilt: one batch of 2 messages on 2 subjects (the project's usage charged under its
  expected-last-sequence check, the server requested), its ratio to one publish in a column too;
- diagnostics: an empty ``NatsBridge.run`` hop per second, and all N raw publishes pipelined.

A floor and the paths compared with it run in alternating chunks (25 events, 5 creates, one atomic
batch), each path timed over its chunks (``interleaved``): on a shared machine they see the same
load. Rates are medians over rounds; ratios are taken within a round, then the median.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from uuid import UUID, uuid4

from eventsourcing.domain import Aggregate
from eventsourcing.persistence import Mapper, StoredEvent

from commands.app import Stratus
from commands.flavor import Flavor
from commands.flavors.create import CreateFlavor
from commands.instance import Instance
from commands.servers.create import CreateServer
from commands.usage import ProjectUsage
from stratus.config import Settings
from stratus.context import CommandContext
from stratus.eventstore import Factory, JetStreamApplicationRecorder, NatsBridge
from stratus.eventstore import envelope as env
from tests.bench.harness import Bench, CpuMeter, Sample, loadavg, machine_lines, nats_server
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.facades.operations import Operations

Message = tuple[str, bytes, dict[str, str]]

EXPECTED_SEQ = "Nats-Expected-Last-Subject-Sequence"
EXPECTED_SEQ_SUBJECT = "Nats-Expected-Last-Subject-Sequence-Subject"
BARE = "raw js.publish, payload only"
ONE_PUBLISH = "raw js.publish, same message (new aggregate)"
NEXT_PUBLISH = "raw js.publish, same message (version n+1)"
HOPPED = "raw js.publish, same message, one NatsBridge.run each"
FLAVOR_FLOOR = "raw js.publish, a flavor's message"
CREATE_FLOOR = "raw atomic batch of 2: a create's charge and request"
CHUNK = 25  # units of each path in turn (``interleaved``)
CREATE_CHUNK = 5  # a create's atomic batch costs milliseconds
FLAVOR = {
    "id": "m1.small",
    "name": "m1.small",
    "vcpus": 1,
    "ram": 2048,
    "disk": 20,
    "ephemeral": 0,
    "swap": 0,
}


# -- events and messages --------------------------------------------------------------------------
def new_instances(n: int, tag: str) -> list[Instance]:
    return [
        Instance.request(
            uuid4(),
            name=f"{tag}-{i}",
            project_id=f"project-{i % 13}",
            user_id="bench-user",
            flavor=dict(FLAVOR),
            image_ref="cirros-0.6.2-x86_64",
            metadata={"role": "web", "tier": str(i % 3)},
            availability_zone=None,
            request_key=None,
        )
        for i in range(n)
    ]


def new_flavor(flavorid: str, i: int) -> CreateFlavor:
    return CreateFlavor(flavorid=flavorid, name=f"flavor {i}", vcpus=1, ram=512, disk=1)


def stored(mapper: Mapper[UUID], aggregates: Sequence[Aggregate]) -> list[StoredEvent]:
    """The pending event of each aggregate (exactly one each), as the recorder receives it."""
    out = []
    for inst in aggregates:
        (event,) = inst.collect_events()
        out.append(mapper.to_stored_event(event))
    return out


def raw_message(recorder: JetStreamApplicationRecorder, e: StoredEvent, expected_seq: int) -> Message:
    """The message our recorder would send for ``e`` as the first event of its aggregate in an append."""
    headers = env.build_headers(e, CommandContext(), source=recorder.source, append_id=uuid.uuid4().hex)
    headers[EXPECTED_SEQ] = str(expected_seq)
    headers[EXPECTED_SEQ_SUBJECT] = recorder.layout.aggregate_filter(e.originator_id)
    return recorder.layout.subject(e.originator_id, e.topic), e.state, headers


def create_batches(
    bridge: NatsBridge, recorder: JetStreamApplicationRecorder, mapper: Mapper[UUID], k: int, tag: str
) -> tuple[list[list[Message]], list[int]]:
    """The atomic appends of ``k`` creates in one project, prebuilt: each charges the project's usage
    (under the check of its last sequence) and requests one server, in that order, as
    ``commands.servers.create`` appends them; and the sequence of the usage's last event (its
    opening, appended here unmeasured), which ``publish_creates`` carries from one append to the next."""
    usage = ProjectUsage.open(f"floor-{tag}")
    (opened,) = (mapper.to_stored_event(e) for e in usage.collect_events())
    last = bridge.run(lambda: publish_sequential(bridge, [raw_message(recorder, opened, 0)]), 10.0)
    out = []
    for inst in new_instances(k, tag):
        usage.charge([str(inst.id)], 1, 2048, {"instances": -1, "cores": -1, "ram": -1})
        (charged,) = (mapper.to_stored_event(e) for e in usage.collect_events())
        (requested,) = stored(mapper, [inst])
        out.append([raw_message(recorder, charged, 0), raw_message(recorder, requested, 0)])
    return [batched(msgs, len(msgs))[0] for msgs in out], last


# -- raw floors (coroutines on the bridge's loop) -------------------------------------------------
async def publish_sequential(bridge: NatsBridge, msgs: Sequence[Message], *, bare: bool = False) -> list[int]:
    js = bridge.js
    seqs = []
    for subject, data, headers in msgs:
        ack = await js.publish(subject, data, headers=None if bare else headers)
        seqs.append(ack.seq)
    return seqs


async def publish_atomic(bridge: NatsBridge, batches: Sequence[Sequence[Message]]) -> int:
    """Each batch as one NATS atomic batch: core publishes, then the commit with ``js.publish``."""
    js, nc = bridge.js, bridge.nc
    for batch in batches:
        for subject, data, headers in batch[:-1]:
            await nc.publish(subject, data, headers=headers)
        subject, data, headers = batch[-1]
        ack = await js.publish(subject, data, headers=headers)
        if ack.batch_size != len(batch):
            raise RuntimeError(f"atomic batch of {len(batch)} acknowledged as {ack.batch_size}")
    return sum(len(b) for b in batches)


async def publish_creates(bridge: NatsBridge, batches: Sequence[Sequence[Message]], last: list[int]) -> int:
    """``publish_atomic`` for ``create_batches``: each charge expects the usage's last sequence
    (``last[0]``, the previous charge: other appends land in between when the bench interleaves)."""
    js, nc = bridge.js, bridge.nc
    for (charge_subject, charge, charge_headers), (subject, data, headers) in batches:
        await nc.publish(charge_subject, charge, headers={**charge_headers, EXPECTED_SEQ: str(last[0])})
        ack = await js.publish(subject, data, headers=headers)
        last[0] = ack.seq - 1
    return len(batches)


async def publish_pipelined(bridge: NatsBridge, groups: Sequence[Sequence[Message]]) -> int:
    """Each group's messages with ``publish_async``, then wait for the group's acks (not atomic)."""
    js = bridge.js
    for group in groups:
        futures = [await js.publish_async(s, d, headers=h) for s, d, h in group]
        await asyncio.gather(*futures)
    return sum(len(g) for g in groups)


def batched(msgs: list[Message], size: int) -> list[list[Message]]:
    """Split into atomic batches, with the batch headers already set (prebuilt: a floor builds nothing)."""
    out = []
    for start in range(0, len(msgs), size):
        chunk, batch_id = msgs[start : start + size], uuid.uuid4().hex
        batch = []
        for i, (s, d, h) in enumerate(chunk, 1):
            headers = {**h, "Nats-Batch-Id": batch_id, "Nats-Batch-Sequence": str(i)}
            if i == len(chunk):
                headers["Nats-Batch-Commit"] = "1"
            batch.append((s, d, headers))
        out.append(batch)
    return out


# -- one round ------------------------------------------------------------------------------------
@dataclasses.dataclass
class Env:
    bridge: NatsBridge
    recorder: JetStreamApplicationRecorder
    mapper: Mapper[UUID]
    handlers: Handlers


Chunk = Callable[[int, int], int]  # does units [start, stop) of a path, returns how many it did


def interleaved(
    bench: Bench, unit: str, paths: Sequence[tuple[str, str | None, Chunk]], n: int, chunk: int
) -> None:
    """Measure ``paths`` (name, floor, what does a chunk) alternately, ``chunk`` units of each in turn,
    and record each path's time over its chunks as its sample of this round: a floor and the path
    compared with it see the same moments of a shared machine's load, not two stretches of it. The
    CPU shown is the block's (all its paths)."""
    seconds = dict.fromkeys((name for name, _, _ in paths), 0.0)
    counts = dict.fromkeys(seconds, 0)
    with bench.meter.measure() as cpu:
        for start in range(0, n, chunk):
            for name, _, fn in paths:
                started = time.perf_counter()
                counts[name] += fn(start, min(n, start + chunk))
                seconds[name] += time.perf_counter() - started
    for name, floor, _ in paths:
        sample = Sample(counts[name], seconds[name], cpu[0])
        bench.path(name, unit, floor).samples.append(sample)
        print(f"  {name}: {sample.count} {unit} in {sample.seconds:.2f} s = {sample.rate:,.0f}/s")


def run_round(bench: Bench, e: Env, n: int, batch: int, r: int) -> None:
    bridge, recorder, mapper = e.bridge, e.recorder, e.mapper
    long = 600.0

    def raw(msgs: Sequence[Message], seqs: list[int] | None = None) -> Chunk:
        """Sequential js.publish of ``msgs[start:stop]`` in one coroutine (one hop per chunk)."""

        def run(start: int, stop: int) -> int:
            acked = bridge.run(lambda: publish_sequential(bridge, msgs[start:stop]), long)
            if seqs is not None:
                seqs.extend(acked)
            return len(acked)

        return run

    def ours(events: Sequence[StoredEvent], size: int = 1) -> Chunk:
        """``recorder.append`` of ``events[start:stop]``, ``size`` events per append."""

        def run(start: int, stop: int) -> int:
            for i in range(start, stop, size):
                recorder.append(events[i : i + size])
            return stop - start

        return run

    # (a) the payload alone (a baseline column), then the same message as ours, new aggregates.
    bare = [raw_message(recorder, s, 0) for s in stored(mapper, new_instances(n, f"bare{r}"))]
    bench.measure(BARE, "events", lambda: raw(bare)(0, n))
    raw_instances, ours_instances = new_instances(n, f"raw{r}"), new_instances(n, f"ours{r}")
    same = [raw_message(recorder, s, 0) for s in stored(mapper, raw_instances)]
    # The same, but from synchronous code: one NatsBridge.run (a thread hop each way) per publish.
    hopped = [raw_message(recorder, s, 0) for s in stored(mapper, new_instances(n, f"hop{r}"))]

    def hop_each(start: int, stop: int) -> int:
        for msg in hopped[start:stop]:
            bridge.run(lambda msg=msg: publish_sequential(bridge, [msg]), 10.0)  # type: ignore[misc]
        return stop - start

    seqs: list[int] = []
    interleaved(
        bench,
        "events",
        [
            (ONE_PUBLISH, None, raw(same, seqs)),
            (HOPPED, ONE_PUBLISH, hop_each),
            ("recorder.append, 1 event, new aggregate", ONE_PUBLISH, ours(stored(mapper, ours_instances))),
        ],
        n,
        CHUNK,
    )

    # (b) version 2 of each aggregate: the check is against the aggregate's last sequence.
    for inst in raw_instances + ours_instances:
        inst.schedule(f"compute-{r}")
    next_raw = [raw_message(recorder, s, q) for s, q in zip(stored(mapper, raw_instances), seqs, strict=True)]
    interleaved(
        bench,
        "events",
        [
            (NEXT_PUBLISH, None, raw(next_raw)),
            ("recorder.append, 1 event, version n+1", NEXT_PUBLISH, ours(stored(mapper, ours_instances))),
        ],
        n,
        CHUNK,
    )

    # (c) atomic multi-event appends, a batch of each in turn.
    m = max(batch, (n // 4) // batch * batch)  # fewer: a commit costs milliseconds
    raw_b = batched([raw_message(recorder, s, 0) for s in stored(mapper, new_instances(m, f"rb{r}"))], batch)
    raw_p = [raw_message(recorder, s, 0) for s in stored(mapper, new_instances(m, f"rp{r}"))]

    def atomic(start: int, stop: int) -> int:
        return int(bridge.run(lambda: publish_atomic(bridge, raw_b[start // batch : stop // batch]), long))

    def pipelined(start: int, stop: int) -> int:
        return int(bridge.run(lambda: publish_pipelined(bridge, [raw_p[start:stop]]), long))

    atomic_floor = f"raw atomic batch of {batch}"
    interleaved(
        bench,
        "events",
        [
            (atomic_floor, None, atomic),
            (f"raw publish_async, {batch} pipelined (not atomic)", atomic_floor, pipelined),
            (
                f"recorder.append, {batch} events (atomic)",
                atomic_floor,
                ours(stored(mapper, new_instances(m, f"ob{r}")), batch),
            ),
        ],
        m,
        batch,
    )

    # (d) the command path. A create's floor is its atomic append (the project's usage charged,
    # the server requested), prebuilt; a flavor's, one publish.
    k = max(1, n // 2)
    flavor_floor = [
        raw_message(recorder, s, 0)
        for s in stored(mapper, [Flavor.create(**vars(new_flavor(f"ff{r}-{i}", i))) for i in range(k)])
    ]

    def create_flavors(start: int, stop: int) -> int:
        for i in range(start, stop):
            e.handlers.create_flavor(new_flavor(f"f{r}-{i}", i))
        return stop - start

    interleaved(
        bench,
        "commands",
        [(FLAVOR_FLOOR, None, raw(flavor_floor)), ("Handlers.create_flavor", FLAVOR_FLOOR, create_flavors)],
        k,
        CHUNK,
    )
    create_floor, usage_last = create_batches(bridge, recorder, mapper, k, f"cf{r}")

    def raw_creates(start: int, stop: int) -> int:
        return int(bridge.run(lambda: publish_creates(bridge, create_floor[start:stop], usage_last), long))

    def create_servers(start: int, stop: int) -> int:
        for i in range(start, stop):
            e.handlers.create_server(
                CreateServer(name=f"vm-{r}-{i}", project_id="p1", user_id="u1", flavor_ref="m1.small")
            )
        return stop - start

    interleaved(
        bench,
        "commands",
        [(CREATE_FLOOR, None, raw_creates), ("Handlers.create_server", CREATE_FLOOR, create_servers)],
        k,
        CREATE_CHUNK,
    )

    # Diagnostics: the sync -> async hop alone, and the connection's pipelined ceiling.
    async def noop() -> None:
        return None

    def hops() -> int:
        for _ in range(n):
            bridge.run(noop, 10.0)
        return n

    bench.measure("NatsBridge.run hop, empty coroutine", "hops", hops)
    ceiling = [raw_message(recorder, s, 0) for s in stored(mapper, new_instances(n, f"all{r}"))]
    bench.measure(
        "raw publish_async, all pipelined (not atomic)",
        "events",
        lambda: bridge.run(lambda: publish_pipelined(bridge, [ceiling]), long),
        floor=ONE_PUBLISH,
    )


def read_latencies(e: Env, samples: int = 100) -> str:
    """A markdown row: medians (ms) of reads whose server-side cost may grow with the stream."""

    async def info() -> int:
        return (await e.bridge.js.stream_info(e.recorder.stream)).state.messages

    def median_ms(fn: Callable[[], object]) -> float:
        times = []
        for _ in range(samples):
            started = time.perf_counter()
            fn()
            times.append(time.perf_counter() - started)
        return 1000 * statistics.median(times)

    messages = e.bridge.run(info, 10.0)
    load = median_ms(lambda: e.handlers.flavor("m1.small"))
    head = median_ms(e.recorder.max_notification_id)
    stream_info = median_ms(lambda: e.bridge.run(info, 10.0))
    return f"| {messages} | {load:.2f} | {head:.2f} | {stream_info:.2f} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_eventstore", description=__doc__)
    parser.add_argument("--events", type=int, default=1500, help="events per path per round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--batch", type=int, default=10, help="events per atomic append")
    args = parser.parse_args(argv)

    with nats_server() as server:
        settings = dataclasses.replace(
            Settings(), nats_urls=(server.url,), stream="BENCH", subject_prefix="bench.ev"
        )
        bridge = NatsBridge(settings.nats_urls, name="bench").start()
        try:
            factory = Factory(bridge=bridge, settings=settings)
            recorder = factory.application_recorder()
            app = Stratus(factory)
            handlers = Handlers(app)
            # Nova's default quota (10 instances) would refuse the bench's creates after the tenth.
            Operations(app).set_quota("p1", {"instances": -1, "cores": -1, "ram": -1}, {})
            handlers.create_flavor(
                CreateFlavor(flavorid="m1.small", name="m1.small", vcpus=1, ram=2048, disk=20)
            )
            sample = stored(app.mapper, new_instances(1, "size"))[0]
            _, _, headers = raw_message(recorder, sample, 0)
            header_bytes = sum(len(k) + len(v) + 4 for k, v in headers.items())
            print(
                "\n".join(
                    machine_lines({"message": f"{len(sample.state)} B payload + ~{header_bytes} B headers"})
                )
            )
            bench = Bench(CpuMeter(server.pid))
            e = Env(bridge, recorder, app.mapper, handlers)
            reads = [read_latencies(e)]
            for r in range(args.rounds):
                print(f"round {r + 1}/{args.rounds} (load {loadavg()})")
                run_round(bench, e, args.events, args.batch, r)
                reads.append(read_latencies(e))
                print(f"  reads: {reads[-1]}")
            print(f"load average at end: {loadavg()}; recorder stats: {dict(recorder.stats)}")
            print()
            print(
                bench.table(
                    f"Event store appends ({args.events} events per path per round, {args.rounds} rounds)",
                    baselines=[
                        ("payload-only publish", BARE),
                        ("one hop per publish", HOPPED),
                        ("one publish (new aggregate)", ONE_PUBLISH),
                    ],
                )
            )
            print()
            print("### Reads as the stream grows (median ms of 100 each)")
            print()
            print(
                "| events in stream (most on a subject of their own) "
                "| load a 1-event aggregate (`Handlers.flavor`) "
                "| `max_notification_id` | `js.stream_info` |"
            )
            print("|---:|---:|---:|---:|")
            print("\n".join(reads))
        finally:
            bridge.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
