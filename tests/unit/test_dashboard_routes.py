"""``/dashboard``'s own routes (``api/dashboard``): the page and its assets with their security
headers, no file outside the static folder, and where the page is told the event stream is."""

from __future__ import annotations

import dataclasses

import falcon
import pytest
from falcon import testing

from api import dashboard
from stratus.config import Settings


def _client(settings: Settings) -> testing.TestClient:
    app = falcon.App()
    dashboard.add_routes(app, settings)
    return testing.TestClient(app)


@pytest.fixture
def client() -> testing.TestClient:
    return _client(dataclasses.replace(Settings(), watch_bind="0.0.0.0:9775"))


def test_the_page_and_its_modules_with_a_policy_that_allows_this_origin_only(
    client: testing.TestClient,
) -> None:
    page = client.simulate_get("/dashboard")
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert 'src="/dashboard/static/app.js"' in page.text
    policy = page.headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "script-src 'self';" in policy
    # the stream's origin, and the serial console proxy's (its default base URL)
    assert "connect-src 'self' http://falconframework.org:9775 ws://127.0.0.1:6083;" in policy
    assert "frame-ancestors 'none'" in policy and "unsafe-inline" not in policy
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert page.headers["Referrer-Policy"] == "no-referrer"
    module = client.simulate_get("/dashboard/static/app.js")
    assert module.status_code == 200 and module.headers["Content-Type"].startswith("text/javascript")
    assert client.simulate_get("/dashboard/static/style.css").headers["Content-Type"].startswith("text/css")


@pytest.mark.parametrize(
    "path",
    [
        "/dashboard/static/__init__.py",  # not an asset type
        "/dashboard/static/nothing.js",
        "/dashboard/static/..%2f__init__.py",
        "/dashboard/static/%2e%2e%2fapp.js",
        "/dashboard/static/",
    ],
)
def test_nothing_outside_the_static_folder(client: testing.TestClient, path: str) -> None:
    assert client.simulate_get(path).status_code == 404


def test_no_asset_is_fetched_from_elsewhere() -> None:
    """No CDN: every module and style sheet the page loads is its own (a relative or rooted path)."""
    for asset in dashboard.STATIC.iterdir():
        text = asset.read_text()
        for scheme in ("http://", "https://", "//cdn"):
            assert f'from "{scheme}' not in text and f'src="{scheme}' not in text, asset.name
            assert f'href="{scheme}' not in text and f"url({scheme}" not in text, asset.name


def test_the_stream_is_where_the_settings_say(client: testing.TestClient) -> None:
    config = client.simulate_get("/dashboard/config.json")
    assert config.json == {"events_url": "http://falconframework.org:9775/v2.1/stratus/events"}
    assert config.headers["Cache-Control"] == "no-store"
    proxied = _client(dataclasses.replace(Settings(), dashboard_events_url="/v2.1/stratus/events"))
    answer = proxied.simulate_get("/dashboard/config.json")
    assert answer.json == {"events_url": "/v2.1/stratus/events"}
    assert "connect-src 'self' ws://127.0.0.1:6083;" in answer.headers["Content-Security-Policy"]
    default = _client(Settings()).simulate_get("/dashboard/config.json").json
    assert default == {"events_url": "http://falconframework.org:8775/v2.1/stratus/events"}


def test_the_serial_console_proxy_may_be_reached_and_the_vendored_modules_are_served() -> None:
    console = dataclasses.replace(
        Settings(), serialproxy_base_url="wss://console.example:443/", watch_bind=""
    )
    page = _client(console).simulate_get("/dashboard")
    assert (
        "connect-src 'self' http://falconframework.org:8775 wss://console.example:443;"
        in (page.headers["Content-Security-Policy"])
    )
    client = _client(Settings())
    for name, kind in (
        ("xterm.mjs", "text/javascript"),
        ("uPlot.esm.js", "text/javascript"),
        ("xterm.css", "text/css"),
    ):
        answer = client.simulate_get(f"/dashboard/static/{name}")
        assert answer.status_code == 200 and answer.headers["Content-Type"].startswith(kind), name
    # each vendored library sits beside its licence, pinned in its first lines
    assert (
        (dashboard.STATIC / "xterm.LICENSE.txt")
        .read_text()
        .startswith("Copyright (c) 2017-2019, The xterm.js")
    )
    assert "uPlot.js" in (dashboard.STATIC / "uPlot.esm.js").read_text()[:400]
    assert "(v1.6.32)" in (dashboard.STATIC / "uPlot.esm.js").read_text()[:400]
    assert "MIT License" in (dashboard.STATIC / "uPlot.LICENSE.txt").read_text()


def test_every_module_is_preloaded_and_imported_by_name() -> None:
    """The page asks for every module at once (``modulepreload``), not each after its importer; and
    every module is reached from ``app.js`` (none left behind by a view's removal)."""
    page = (dashboard.STATIC / "index.html").read_text()
    modules = sorted(p.name for p in dashboard.STATIC.glob("*.js"))
    sources = "\n".join((dashboard.STATIC / name).read_text() for name in modules)
    for name in modules:
        if name == "console.js":  # with xterm.js, loaded when a console is opened, not with the page
            assert f'import("./{name}")' in sources and f"/dashboard/static/{name}" not in page
        elif name != "app.js":
            assert f'rel="modulepreload" href="/dashboard/static/{name}"' in page, name
            assert f'from "./{name}"' in sources, name
