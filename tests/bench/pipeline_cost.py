"""What psycopg's pipeline mode costs against the round trip it saves, on one connection.

A one-row lookup (the token's check's shape) and a ten-row page, on PostgreSQL at ``DATABASE_URL``:
the page alone, the lookup then the page (two round trips), both queued in one pipeline (one sync),
the lookup on a thread and a second connection beside the page (the lists' check until session 19),
the page alone in a pipeline, and an empty pipeline. CPU of this process and wall per operation,
the lowest of the rounds (docs/performance.md, "(session 19)").

    python -m tests.bench.pipeline_cost [--ops 3000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import psycopg
from psycopg.rows import tuple_row

LOOKUP = "SELECT %s::text, %s::text, ARRAY[1, 2], ARRAY['reader'], false"
PAGE = "SELECT g, g::text, now() FROM generate_series(1, %s) g"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.pipeline_cost", description=__doc__)
    parser.add_argument("--ops", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    url = os.environ["DATABASE_URL"]
    with (
        psycopg.connect(url, autocommit=True) as conn,
        psycopg.connect(url, autocommit=True) as other,
        ThreadPoolExecutor(1) as thread,
    ):

        def page() -> None:
            with conn.cursor() as cur:
                cur.execute(PAGE, (10,))
                cur.fetchall()

        def lookup(on: psycopg.Connection[tuple[object, ...]]) -> None:
            with on.cursor(row_factory=tuple_row) as cur:
                cur.execute(LOOKUP, ("user", "project"))
                cur.fetchone()

        def serial() -> None:
            lookup(conn)
            page()

        def pipelined() -> None:
            looked, cur = conn.cursor(row_factory=tuple_row), conn.cursor()
            with conn.pipeline():  # its end sends the one sync and reads both answers
                looked.execute(LOOKUP, ("user", "project"))
                cur.execute(PAGE, (10,))
            looked.fetchone()
            cur.fetchall()

        def beside() -> None:
            checked = thread.submit(lookup, other)
            page()
            checked.result()

        def page_in_a_pipeline() -> None:
            cur = conn.cursor()
            with conn.pipeline():
                cur.execute(PAGE, (10,))
            cur.fetchall()

        def empty_pipeline() -> None:
            with conn.pipeline():
                pass

        paths: dict[str, Callable[[], None]] = {
            "the page alone": page,
            "the lookup, then the page (two round trips)": serial,
            "both in one pipeline, one sync": pipelined,
            "the lookup on a thread and a second connection beside the page": beside,
            "the page alone in a pipeline": page_in_a_pipeline,
            "an empty pipeline": empty_pipeline,
        }
        for path in paths.values():
            for _ in range(200):
                path()
        seen: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
        for _ in range(args.rounds):
            for name, path in paths.items():
                cpu, wall = time.process_time(), time.perf_counter()
                for _ in range(args.ops):
                    path()
                seen[name].append(
                    (
                        (time.process_time() - cpu) / args.ops * 1e6,
                        (time.perf_counter() - wall) / args.ops * 1e6,
                    )
                )
    with open("/proc/loadavg") as f:
        print(f"load {' '.join(f.read().split()[:3])}; {args.rounds} rounds of {args.ops}, minima")
    print("| per operation | CPU µs | wall µs |")
    print("|---|---:|---:|")
    for name, rounds in seen.items():
        print(f"| {name} | {min(r[0] for r in rounds):.1f} | {min(r[1] for r in rounds):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
