"""The dashboard's time to first render and to a live update, with N servers, in headless Chromium.

Run: ``PYTHONPATH=.:<playwright> python -m tests.bench.bench_dashboard [--servers 1000] [--rounds 5]``
(needs Playwright for Python and Debian's ``chromium``, as ``tests/acceptance/test_dashboard.py``).
It starts its own nats-server and uses PostgreSQL as ``bench_servers_detail`` does, appends N ACTIVE
servers of the admin's project through their real lifecycle events, rebuilds the read models, and
starts the API (gunicorn, two workers), the projector and ``stratus watch`` as deployed. Then:

- **first render**: the servers page loaded afresh (signed in already: the session is the tab's),
  from the navigation's start to the table holding its first page (``performance.now()`` in the
  page), at each page size of ``--pages`` (the page's own choice, kept in the tab's
  ``sessionStorage``; 1000 is every server of a 1,000-server project on one page);
- **next page**: the page's Next button clicked, to the next page's rows drawn (Nova's marker);
- **live update**: a server renamed through the API (``PUT /v2.1/servers/<id>``), from the request
  sent to the row showing the new name: the write, the log, the stream, the projector, the page's
  ``GET`` at the event's position and its redraw.

Medians over the rounds, with the spread. ``--trace`` adds where the browser's main thread spent a
first render of each page size (Chromium's trace: self time by task, script, style, layout, paint).
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import time
from collections import Counter, defaultdict
from typing import Any

import orjson
from playwright.sync_api import sync_playwright

from stratus import serialization
from tests.bench.bench_servers_detail import PASSWORD, login, servers_cloud
from tests.bench.harness import loadavg, machine_lines
from tests.fixtures.browser import install_chromium
from tests.fixtures.processes import free_port, serving


def rename(port: int, token: str, server_id: str, name: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        body = serialization.dumps({"server": {"name": name}})
        headers = {"X-Auth-Token": token, "Content-Type": "application/json"}
        conn.request("PUT", f"/v2.1/servers/{server_id}", body, headers)
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            raise RuntimeError(f"rename: {r.status}")
    finally:
        conn.close()


# What is measured per page size, in the order printed.
LABELS = {
    "first": "first render (navigation to the page's rows drawn):",
    "asked": "· the list asked for at:",
    "fetched": "· GET /v2.1/servers/detail, sent to last byte:",
    "drawn": "· from its last byte to every row drawn:",
    "script": "· · of which the rows built (servers.js render):",
    "paged": "next page (the click to its rows drawn):",
}


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.0f} ms (min {min(values):.0f}, max {max(values):.0f})"


def self_times(trace: dict[str, Any]) -> Counter[str]:
    """Milliseconds of the renderer's main thread by event name, each event's own time (its
    duration less its children's), from a Chromium trace."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    main = {(e["pid"], e["tid"]) for e in events if e.get("name") == "thread_name"
            and e.get("args", {}).get("name") == "CrRendererMain"}  # fmt: skip
    spans = sorted(
        (e for e in events if e.get("ph") == "X" and (e["pid"], e["tid"]) in main and "dur" in e),
        key=lambda e: (e["ts"], -e["dur"]),
    )
    totals: Counter[str] = Counter()
    stack: list[tuple[float, str]] = []  # (end, name) of the open spans
    for e in spans:
        while stack and stack[-1][0] <= e["ts"]:
            stack.pop()
        if stack:
            totals[stack[-1][1]] -= e["dur"] / 1000
        totals[e["name"]] += e["dur"] / 1000
        stack.append((e["ts"] + e["dur"], e["name"]))
    return totals


def warned(message: Any) -> None:
    """The page's console warnings and errors (a stream refused, a read failed), as they happen."""
    if message.type in ("warning", "error"):
        print(f"  page: {message.text}")


def set_page_size(page: Any, size: int) -> None:
    page.evaluate(f"sessionStorage.setItem('stratus.servers.pageSize', '{size}')")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_dashboard", description=__doc__)
    parser.add_argument("--servers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pages", default="100,1000", help="page sizes to measure, comma-separated")
    parser.add_argument("--trace", action="store_true", help="where the main thread's time went (last round)")
    args = parser.parse_args(argv)
    chromium = install_chromium()

    api_port, watch_port, projector_port = free_port(), free_port(), free_port()
    binds = {
        "api_bind": f"127.0.0.1:{api_port}",
        "watch_bind": f"127.0.0.1:{watch_port}",
        "projector_metrics_bind": f"127.0.0.1:{projector_port}",
    }
    with servers_cloud("dashboard", args.servers, **binds) as cloud:
        settings, tmp = cloud.settings, cloud.tmp
        print("\n".join(machine_lines({"postgresql": cloud.pg_source, "chromium": chromium})))
        api = [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{api_port}", "--workers", "2",
               "--graceful-timeout", "5", "processes.api:get_app()"]  # fmt: skip
        watch = [sys.executable, "-m", "processes.cli", "watch", "--threads", "8"]
        projector = [sys.executable, "-m", "processes.cli", "projector"]
        with (
            serving(api, settings, api_port, tmp / "api.log"),
            serving(watch, settings, watch_port, tmp / "watch.log"),
            serving(projector, settings, projector_port, tmp / "projector.log"),
            sync_playwright() as playwright,
        ):
            token = login(api_port)
            browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            # the page's warnings and errors (a stream refused, a read failed), as they happen
            page.on("console", warned)
            page.goto(f"http://127.0.0.1:{api_port}/dashboard")
            page.fill("#signin input[name=user]", "admin")
            page.fill("#signin input[name=password]", PASSWORD)
            page.fill("#signin input[name=project]", "admin")
            page.click("#signin button[type=submit]")
            page.wait_for_selector("#servers tbody tr", timeout=60_000)
            sizes = [int(n) for n in args.pages.split(",")]
            # by LABELS' keys, per page size
            times: dict[int, dict[str, list[float]]] = {n: defaultdict(list) for n in sizes}
            live: list[float] = []
            for r in range(args.rounds):
                print(f"round {r + 1}/{args.rounds} (load {loadavg()})")
                for size in sizes:
                    rows = (
                        f"document.querySelectorAll('#servers tbody tr').length >= {min(size, args.servers)}"
                    )
                    set_page_size(page, size)
                    tracing = args.trace and r == args.rounds - 1
                    if tracing:
                        browser.start_tracing(page=page, categories=["devtools.timeline", "v8", "blink"])
                    page.reload()
                    page.wait_for_function(f"() => {rows}", timeout=60_000, polling="raf")
                    times[size]["first"].append(page.evaluate("() => performance.now()"))
                    if tracing:
                        totals = self_times(orjson.loads(browser.stop_tracing()))
                        top = ", ".join(f"{name} {ms:.0f}" for name, ms in totals.most_common(12))
                        print(f"  trace, {size} a page (main thread's self time, ms): {top}")
                    # of which the API's answer: the first servers/detail request, sent to last byte
                    # (the page reads the list again once the stream has begun: not counted)
                    detail = page.evaluate(
                        "() => performance.getEntriesByType('resource')"
                        ".find((e) => e.name.includes('/v2.1/servers/detail')).toJSON()"
                    )
                    times[size]["fetched"].append(detail["duration"])
                    times[size]["asked"].append(detail["startTime"])
                    times[size]["drawn"].append(times[size]["first"][-1] - detail["responseEnd"])
                    renders = "performance.getEntriesByName('servers.render').map((e) => e.duration)"
                    times[size]["script"].append(page.evaluate(f"() => Math.max(...{renders})"))
                    if args.servers > size:
                        page.wait_for_selector("#next:not([disabled])")
                        started = time.perf_counter()
                        page.click("#next")
                        page.wait_for_selector("#pager[data-page='2']", timeout=30_000)
                        page.wait_for_function(f"() => {rows}", timeout=30_000, polling="raf")
                        times[size]["paged"].append((time.perf_counter() - started) * 1000)
                        page.click("#previous")
                        page.wait_for_selector("#pager[data-page='1']", timeout=30_000)
                page.wait_for_selector("#position.live", timeout=30_000)
                server_id = page.get_attribute("#servers tbody tr", "data-id")
                assert server_id
                name = f"renamed-{r}"
                started = time.perf_counter()
                rename(api_port, token, server_id, name)
                page.wait_for_selector(f"#servers a:text-is('{name}')", timeout=30_000)
                live.append((time.perf_counter() - started) * 1000)
            browser.close()
        print(f"load average at end: {loadavg()}")
        print(f"\ndashboard, {args.servers} servers ({args.rounds} rounds)")
        for size in sizes:
            print(f"  {size} a page:")
            for key, label in LABELS.items():
                if times[size][key]:
                    print(f"    {label:<52} {spread(times[size][key])}")
        print(f"  live update (rename sent to the row redrawn):  {spread(live)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
