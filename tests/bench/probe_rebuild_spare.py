"""``rebuild()`` with a spare generation ready and without, alternated in one process, its parts timed.

Run: ``python -m tests.bench.probe_rebuild_spare [EVENTS] [ROUNDS]`` (20,000 and 8 by default). It
builds ``bench_rebuild``'s log in its own NATS server and database, rebuilds once to warm up, then
in each round: makes a spare (``prepare_spare``, timed), reads the log raw by batch direct gets (the
floor, timed), and rebuilds once making its tables (``spare=False``) and once taking the spare, the
order switched each round. ``_new_generation`` and ``analyze`` are timed by wrappers; the rest of
what is not the replay is the swap, the drop of the replaced generation and the closing. Medians
at the end (docs/performance.md, "a generation made ahead of time").
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import psycopg

from projections import rebuild as rebuild_module
from projections.rebuild import prepare_spare, rebuild, spare_state
from stratus import collector
from tests.bench.bench_rebuild import LogBuilder, bench_stores, build_log
from tests.bench.harness import loadavg
from tests.bench.rawnats import RawNats

PARTS: dict[str, float] = {}


def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            PARTS[name] = time.monotonic() - started

    return wrapper


def one_rebuild(
    conn: psycopg.Connection[Any], st: Any, total: int, spare: bool, floor: float, prepared: float
) -> dict[str, float]:
    """One rebuild of the whole log, making its tables or taking the spare, its parts in seconds."""
    PARTS.clear()
    with collector.frozen():  # as ``stratus rebuild`` runs
        res = rebuild(conn, st.recorder, st.app.mapper, spare=spare)
    if res.spare != spare or res.position != total:
        raise RuntimeError(f"unexpected {res}")
    rest = res.seconds - res.replay_seconds - PARTS["generation"] - PARTS["analyze"]
    return {
        "whole": res.seconds, "replay": res.replay_seconds, "generation": PARTS["generation"],
        "analyze": PARTS["analyze"], "rest": rest, "floor": floor, "ratio": floor / res.seconds,
        "prepared": prepared,
    }  # fmt: skip


def line(row: dict[str, float], spare: bool) -> str:
    ms = {k: f"{v * 1000:.0f}" for k, v in row.items()}
    made = f", spare prepared (round start) {ms['prepared']} ms" if spare else ""
    return (
        f"whole {ms['whole']} ms, generation {ms['generation']}, replay {ms['replay']}, analyze "
        f"{ms['analyze']}, swap+drop+rest {ms['rest']}{made}; raw read {ms['floor']} ms, "
        f"ratio {row['ratio']:.2f}"
    )


def main(argv: list[str]) -> int:
    events = int(argv[0]) if argv else 20_000
    rounds = int(argv[1]) if len(argv) > 1 else 8
    rebuild_module._new_generation = timed("generation", rebuild_module._new_generation)  # type: ignore[assignment]
    rebuild_module.analyze = timed("analyze", rebuild_module.analyze)  # type: ignore[assignment]
    rows: dict[str, list[dict[str, float]]] = {"without": [], "with": []}
    with bench_stores("probe") as st:
        build_log(LogBuilder(st.recorder, st.app.mapper), events)
        total = st.recorder.max_notification_id() or 0
        with psycopg.connect(st.db_url, autocommit=True) as conn:
            with collector.frozen():
                rebuild(conn, st.recorder, st.app.mapper, spare=False)  # warm up
            print(f"log {total} events; load {loadavg()}", flush=True)
            for r in range(rounds):
                started = time.monotonic()
                if not prepare_spare(conn) or spare_state(conn) != "ready":
                    raise RuntimeError("no spare made")
                prepared = time.monotonic() - started
                raw = RawNats(st.server.url)
                started = time.monotonic()
                raw.read_stream(st.settings.stream, st.recorder.layout.all)
                floor = time.monotonic() - started
                raw.close()
                for kind in ("without", "with") if r % 2 == 0 else ("with", "without"):
                    row = one_rebuild(conn, st, total, kind == "with", floor, prepared)
                    rows[kind].append(row)
                    print(
                        f"round {r + 1} {kind:7}: {line(row, kind == 'with')}  (load {loadavg()})", flush=True
                    )
    print()
    for kind, found in rows.items():
        medians = {k: statistics.median(row[k] for row in found) for k in found[0]}
        print(
            kind,
            ", ".join(
                f"{k} {v:.2f}" if k == "ratio" else f"{k} {v * 1000:.0f} ms" for k, v in medians.items()
            ),
        )
    print(f"load at end {loadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
