"""The dashboard's time to first render and to a live update, with N servers, in headless Chromium.

Run: ``PYTHONPATH=.:<playwright> python -m tests.bench.bench_dashboard [--servers 1000] [--rounds 5]``
(needs Playwright for Python and Debian's ``chromium``, as ``tests/acceptance/test_dashboard.py``).
It starts its own nats-server and uses PostgreSQL as ``bench_servers_detail`` does, appends N ACTIVE
servers of the admin's project through their real lifecycle events, rebuilds the read models, and
starts the API (gunicorn, two workers), the projector and ``stratus watch`` as deployed. Then:

- **first render**: the servers page loaded afresh (signed in already: the session is the tab's),
  from the navigation's start to the table holding all N rows (``performance.now()`` in the page);
- **live update**: a server renamed through the API (``PUT /v2.1/servers/<id>``), from the request
  sent to the row showing the new name: the write, the log, the stream, the projector, the page's
  ``GET`` at the event's position and its redraw.

Medians over the rounds, with the spread.
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import time

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


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.0f} ms (min {min(values):.0f}, max {max(values):.0f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_dashboard", description=__doc__)
    parser.add_argument("--servers", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
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
            page.goto(f"http://127.0.0.1:{api_port}/dashboard")
            page.fill("#signin input[name=user]", "admin")
            page.fill("#signin input[name=password]", PASSWORD)
            page.fill("#signin input[name=project]", "admin")
            page.click("#signin button[type=submit]")
            rows = f"document.querySelectorAll('#servers tbody tr').length >= {args.servers}"
            page.wait_for_function(f"() => {rows}", timeout=60_000)
            first: list[float] = []
            fetched: list[float] = []
            asked: list[float] = []  # when the page sent the list's request
            drawn: list[float] = []  # from the list's last byte to every row drawn
            script: list[float] = []  # of which the page's own code building the rows
            live: list[float] = []
            for r in range(args.rounds):
                print(f"round {r + 1}/{args.rounds} (load {loadavg()})")
                page.reload()
                page.wait_for_function(f"() => {rows}", timeout=60_000, polling="raf")
                first.append(page.evaluate("() => performance.now()"))
                # of which the API's answer: the first servers/detail request, sent to last byte
                # (the page reads the list again once the stream has begun: not counted)
                detail = page.evaluate(
                    "() => performance.getEntriesByType('resource')"
                    ".find((e) => e.name.includes('/v2.1/servers/detail')).toJSON()"
                )
                fetched.append(detail["duration"])
                asked.append(detail["startTime"])
                drawn.append(first[-1] - detail["responseEnd"])
                renders = "performance.getEntriesByName('servers.render').map((e) => e.duration)"
                script.append(page.evaluate(f"() => Math.max(...{renders})"))
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
        print(f"  first render (navigation to every row drawn): {spread(first)}")
        print(f"    the list asked for at:                        {spread(asked)}")
        print(f"    GET /v2.1/servers/detail, sent to last byte:  {spread(fetched)}")
        print(f"    from its last byte to every row drawn:        {spread(drawn)}")
        print(f"      of which the rows built (servers.js render): {spread(script)}")
        print(f"  live update (rename sent to the row redrawn):  {spread(live)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
