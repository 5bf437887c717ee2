"""Snapshots: loading a host costs the same after 1,000,000 claims as after 1,000.

One host on a real nats-server is claimed on and released (a rolling set of ``--live`` instances, as
a busy hypervisor's is), its history written fast in atomic appends of 1000 events through the
application (which snapshots it every ``SNAPSHOT_INTERVAL`` events, as in production). At each size
the bench leaves the host ``SNAPSHOT_INTERVAL - 1`` events past its last snapshot (the worst case a
load meets) and times cold loads (a process with no aggregate cache): from the snapshot, and by
replaying every event (snapshots off), in interleaved rounds. A second part measures what chose the
interval: a cold load with k events after the snapshot, and what taking a snapshot costs.

    python -m tests.bench.bench_snapshots [--claims 1000,10000,100000,1000000] [--rounds 5]
        [--replay-max 100000] [--plot docs/snapshots.png] [--json FILE]

A replay holds the aggregate's every message in memory (~2 KB each with its headers), so replays
stop at ``--replay-max`` claims and larger sizes are extrapolated from the measured ones (linear).
The plot needs matplotlib (not a dependency of Stratus: add it to the ``dev`` extras).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import statistics
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from commands.app import SNAPSHOT_INTERVAL, Stratus
from commands.host import Host, Resources
from stratus.config import Settings
from stratus.context import CommandContext
from stratus.eventstore import Factory, JetStreamApplicationRecorder, NatsBridge
from stratus.eventstore.chain import CHAIN_HASH, CHAIN_PREV
from stratus.eventstore.envelope import build_headers
from tests.bench.harness import loadavg, machine_lines, nats_server

BATCH = 1000  # events per atomic append while writing the history
NO_CACHE = {"AGGREGATE_CACHE_MAXSIZE": ""}  # every load is a cold one


class Writer:
    """Claims and releases on one host, ``live`` instances at a time: through the application
    (``to_version``), or, for the bulk of a long history, the same events published as raw atomic
    batches (``bulk_to``): the aggregate's own events, the recorder's subjects and CloudEvents headers,
    without the recorder's per-event work (hash chaining, its expectations), which would make a
    2,000,000-event history take half an hour on this machine. Their chain headers are placeholders of
    the right size: the bulk is not an audited log, and loads never check it."""

    def __init__(self, app: Stratus, live: int) -> None:
        self.app = app
        self.live = live
        self.host = Host.register(
            f"bench-{uuid.uuid4().hex[:8]}", vcpus=10**6, memory_mb=10**9, disk_gb=10**8
        )
        self.app.save(self.host)
        self.claims = 0
        self._held: deque[str] = deque()

    def _step(self) -> None:
        if len(self._held) >= self.live:
            self.host.release(self._held.popleft())
        else:
            instance = f"i{self.claims}"
            self.host.claim(instance, Resources(1, 512, 1))
            self._held.append(instance)
            self.claims += 1

    def to_version(self, version: int, app: Stratus | None = None) -> None:
        """Append until the host is at ``version``, in appends of at most ``BATCH`` events that end on
        multiples of ``BATCH`` (so that the application snapshots at each append's end)."""
        while self.host.version < version:
            end = min(version, (self.host.version // BATCH + 1) * BATCH)
            while self.host.version < end:
                self._step()
            (app or self.app).save(self.host)

    def bulk_to(self, version: int) -> None:
        """Raw atomic batches of ``BATCH`` events up to ``version`` (a multiple of ``BATCH``)."""
        recorder = self.app.recorder
        assert isinstance(recorder, JetStreamApplicationRecorder)
        mapper = self.app.mapper
        context = CommandContext()
        while self.host.version < version:
            end = min(version, (self.host.version // BATCH + 1) * BATCH)
            while self.host.version < end:
                self._step()
            outs = []
            for e in self.host.collect_events():
                stored = mapper.to_stored_event(e)
                headers = build_headers(stored, context, source=recorder.source, append_id="bench")
                headers.update(_FAKE_CHAIN)
                outs.append(
                    (recorder.layout.subject(stored.originator_id, stored.topic), stored.state, headers)
                )
            recorder.bridge.run(lambda outs=outs, b=recorder.bridge: _publish_batch(b, outs), 60)  # type: ignore[misc]

    def to_claims(self, claims: int, *, raw: bool = True) -> None:
        """Claim until ``claims`` were made, ending on a multiple of ``BATCH`` events."""
        while self.claims < claims:
            target = (self.host.version // BATCH + 1) * BATCH
            if raw:
                self.bulk_to(target)
            else:
                self.to_version(target)


_FAKE_CHAIN = {CHAIN_PREV: "0" * 64, CHAIN_HASH: "0" * 64}


async def _publish_batch(bridge: NatsBridge, outs: list[tuple[str, bytes, dict[str, str]]]) -> None:
    batch = uuid.uuid4().hex
    for i, (subject, data, headers) in enumerate(outs[:-1], 1):
        await bridge.nc.publish(
            subject, data, headers={**headers, "Nats-Batch-Id": batch, "Nats-Batch-Sequence": str(i)}
        )
    subject, data, headers = outs[-1]
    commit = {
        **headers,
        "Nats-Batch-Id": batch,
        "Nats-Batch-Sequence": str(len(outs)),
        "Nats-Batch-Commit": "1",
    }
    await bridge.js.publish(subject, data, headers=commit, timeout=30)


def timed(fn: Callable[[], Any]) -> float:
    gc.collect()  # a load is not charged with collecting what came before it
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def cold_loads(
    bridge: NatsBridge, settings: Settings, host_id: uuid.UUID, rounds: int, *, snapshots: bool
) -> list[float]:
    """Seconds per cold load (a fresh application per load: no aggregate cache, no remembered heads)."""
    env = {} if snapshots else {"IS_SNAPSHOTTING_ENABLED": "n"}
    out = []
    for _ in range(rounds):
        app = Stratus(Factory(env, bridge=bridge, settings=settings), env=NO_CACHE)
        seconds = timed(lambda app=app: app.repository.get(host_id))  # type: ignore[misc]
        stats = app.repository.snapshot_stats
        if snapshots != bool(stats["used"]):
            raise AssertionError(f"expected a load {'from' if snapshots else 'without'} a snapshot: {stats}")
        out.append(seconds)
    return out


def extrapolate(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """Least squares through the measured points (load time is linear in the history replayed)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((a - mx) ** 2 for a in xs)
    slope = sum((a - mx) * (b - my) for a, b in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return my + slope * (x - mx)


def growth(bridge: NatsBridge, settings: Settings, args: argparse.Namespace) -> list[dict[str, Any]]:
    writer = Writer(Stratus(Factory(bridge=bridge, settings=settings)), args.live)
    tail = Stratus(Factory({"IS_SNAPSHOTTING_ENABLED": "n"}, bridge=bridge, settings=settings))
    rows: list[dict[str, Any]] = []
    for claims in args.claims:
        started = time.perf_counter()
        writer.to_claims(claims - BATCH // 2)  # the bulk, raw
        writer.to_version((writer.host.version // BATCH + 1) * BATCH)  # one append through the application:
        snapshot_at = writer.host.version  # it snapshots the host at this version
        # The worst case a load meets: one event short of the next snapshot.
        writer.to_version(snapshot_at + SNAPSHOT_INTERVAL - 1, app=tail)
        written = time.perf_counter() - started
        with_s: list[float] = []
        without: list[float] = []
        replay = claims <= args.replay_max
        for _ in range(args.rounds):  # interleaved: both paths see the same load
            with_s += cold_loads(bridge, settings, writer.host.id, 1, snapshots=True)
            if replay:
                without += cold_loads(bridge, settings, writer.host.id, 1, snapshots=False)
                if without[-1] > 20:  # a slow replay is measured once
                    replay = False
        row = {
            "claims": claims,
            "events": writer.host.version,
            "snapshot_at": snapshot_at,
            "with_snapshots_s": statistics.median(with_s),
            "with_snapshots_rounds": with_s,
            "without_snapshots_s": statistics.median(without) if without else None,
            "without_snapshots_rounds": without,
            "write_s": written,
            "load_average": loadavg(),
        }
        rows.append(row)
        print(
            f"  {claims:>9,} claims ({writer.host.version:,} events, written in {written:.1f} s): "
            f"from the snapshot {row['with_snapshots_s'] * 1e3:.1f} ms, replay "
            + (f"{row['without_snapshots_s'] * 1e3:.0f} ms" if without else "not measured"),
            flush=True,
        )
        # Back to a snapshot boundary for the next size (the tail's events are part of the history).
        writer.to_version((writer.host.version // BATCH + 1) * BATCH)
    measured = [r for r in rows if r["without_snapshots_s"] is not None]
    for r in rows:
        r["without_snapshots_extrapolated"] = r["without_snapshots_s"] is None
        if r["without_snapshots_s"] is None and len(measured) >= 2:
            r["without_snapshots_s"] = extrapolate(
                [m["events"] for m in measured], [m["without_snapshots_s"] for m in measured], r["events"]
            )
    return rows


def interval(bridge: NatsBridge, settings: Settings, args: argparse.Namespace) -> dict[str, Any]:
    """Cold load time with k events after the snapshot, and the cost of taking one."""
    writer = Writer(Stratus(Factory(bridge=bridge, settings=settings)), args.live)
    writer.to_version(BATCH)  # snapshotted at its last append
    takes = []
    for _ in range(max(args.rounds, 5)):  # at the head the writer appended: its anchor is known
        takes.append(timed(lambda: writer.app._store_snapshot(writer.host)))
    tail = Stratus(Factory({"IS_SNAPSHOTTING_ENABLED": "n"}, bridge=bridge, settings=settings))
    loads: list[dict[str, Any]] = []
    for k in args.after:
        writer.to_version(BATCH + k, app=tail)
        seconds = [
            s
            for _ in range(args.rounds)
            for s in cold_loads(bridge, settings, writer.host.id, 1, snapshots=True)
        ]
        loads.append({"after": k, "load_s": statistics.median(seconds), "rounds": seconds})
        print(f"  {k:>5} events after the snapshot: cold load {loads[-1]['load_s'] * 1e3:.1f} ms", flush=True)
    appends = []
    for _ in range(max(args.rounds, 5)):
        writer._step()
        appends.append(timed(lambda: tail.save(writer.host)))
    take = {"take_s": statistics.median(takes), "append_one_s": statistics.median(appends), "live": args.live}
    print(
        f"  taking a snapshot ({args.live} live claims): {take['take_s'] * 1e3:.2f} ms; "
        f"one event's append: {take['append_one_s'] * 1e3:.2f} ms",
        flush=True,
    )
    return {"loads": loads, **take}


def render(result: dict[str, Any]) -> str:
    rows = result["growth"]
    base_with = rows[0]["with_snapshots_s"]
    base_without = rows[0]["without_snapshots_s"]
    lines = [
        "| host's claims | events in its history | cold load from the snapshot ms | ratio to 10^3 claims | "
        "cold load replaying every event ms | ratio to 10^3 claims | replay / snapshot |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        w, wo = r["with_snapshots_s"], r["without_snapshots_s"]
        mark = " (extrapolated)" if r["without_snapshots_extrapolated"] else ""
        lines.append(
            f"| {r['claims']:,} | {r['events']:,} | {w * 1e3:.1f} | **{w / base_with:.2f}** | "
            + (f"{wo * 1e3:,.0f}{mark} | {wo / base_without:,.1f} | {wo / w:,.0f} |" if wo else "- | - | - |")
        )
    lines += [
        "",
        "| events after the snapshot | cold load ms | ratio to 0 |",
        "|---:|---:|---:|",
    ]
    loads = result["interval"]["loads"]
    for load in loads:
        lines.append(
            f"| {load['after']} | {load['load_s'] * 1e3:.1f} | {load['load_s'] / loads[0]['load_s']:.2f} |"
        )
    i = result["interval"]
    lines.append("")
    lines.append(
        f"Taking a snapshot of a host with {i['live']} live claims: {i['take_s'] * 1e3:.2f} ms "
        f"(one event's append: {i['append_one_s'] * 1e3:.2f} ms)."
    )
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> bool:
    """The two figures as one PNG; False (and a note) when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (it belongs in pyproject's dev extras)", file=sys.stderr)
        return False
    rows = result["growth"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    claims = [r["claims"] for r in rows]
    left.plot(
        claims,
        [r["with_snapshots_s"] * 1e3 for r in rows],
        "o-",
        label=f"from the snapshot (interval {result['interval_events']})",
    )
    measured = [r for r in rows if not r["without_snapshots_extrapolated"]]
    left.plot(
        [r["claims"] for r in measured],
        [r["without_snapshots_s"] * 1e3 for r in measured],
        "s-",
        label="replaying every event",
    )
    guessed = [r for r in rows if r["without_snapshots_extrapolated"]]
    if guessed and measured:
        ends = [measured[-1], *guessed]
        left.plot(
            [r["claims"] for r in ends],
            [r["without_snapshots_s"] * 1e3 for r in ends],
            "s:",
            color=left.lines[-1].get_color(),
            label="replaying (extrapolated)",
        )
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("claims in the host's history")
    left.set_ylabel("cold load of the host, ms")
    left.set_title("Loading a host as its history grows")
    left.grid(True, which="both", alpha=0.3)
    left.legend()
    loads = result["interval"]["loads"]
    right.plot([x["after"] for x in loads], [x["load_s"] * 1e3 for x in loads], "o-")
    right.axvline(result["interval_events"], color="grey", linestyle="--", label="the interval chosen")
    right.set_xlabel("events after the snapshot")
    right.set_ylabel("cold load of the host, ms")
    right.set_title("What one snapshot interval costs a load")
    right.set_ylim(bottom=0)
    right.grid(True, alpha=0.3)
    right.legend()
    fig.suptitle(
        f"Stratus snapshots, {result['when']} (2-core machine, load average {result['load_average']})",
        fontsize=9,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--claims", type=lambda s: [int(x) for x in s.split(",")], default=[10**3, 10**4, 10**5, 10**6]
    )
    parser.add_argument(
        "--after", type=lambda s: [int(x) for x in s.split(",")], default=[0, 25, 50, 100, 200, 400, 800]
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--live", type=int, default=50, help="instances a host holds at once")
    parser.add_argument("--replay-max", type=int, default=100_000, help="largest history replayed (claims)")
    parser.add_argument("--plot", type=Path, default=Path("docs/snapshots.png"))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--parts", default="interval,growth", help="which parts to run")
    parser.add_argument(
        "--plot-from", type=Path, default=None, help="only plot a --json file of an earlier run"
    )
    args = parser.parse_args(argv)
    if args.plot_from is not None:
        return 0 if plot(json.loads(args.plot_from.read_text()), args.plot) else 1
    for line in machine_lines({"snapshot interval": str(SNAPSHOT_INTERVAL)}):
        print(line)
    with nats_server() as server:
        settings = dataclasses.replace(
            Settings(), nats_urls=(server.url,), stream="BENCH", subject_prefix="bench.ev"
        )
        bridge = NatsBridge(settings.nats_urls, name="bench-snapshots").start()
        try:
            part1: list[dict[str, Any]] = []
            part2: dict[str, Any] = {}
            if "interval" in args.parts:
                print("Interval: a cold load with k events after the snapshot", flush=True)
                part2 = interval(bridge, settings, args)
            if "growth" in args.parts:
                print("Growth: cold loads as the host's history grows", flush=True)
                part1 = growth(bridge, settings, args)
        finally:
            bridge.close()
    result = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_average": loadavg(),
        "interval_events": SNAPSHOT_INTERVAL,
        "growth": part1,
        "interval": part2,
    }
    print()
    if part1 and part2:
        print(render(result))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1))
    if part1 and part2:
        plot(result, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
