"""``/dashboard``: the web dashboard, static pages that speak to the API's own JSON endpoints.

The API serves the page, its ES modules and its style sheet from ``api/dashboard/static`` (no
framework, nothing from a CDN: it works on a machine without internet), and ``config.json``, which
tells the page where the event stream is. Every byte of data the page shows comes from the API with
the user's Keystone token, under the API's own policy: these resources serve no data, so they need
no token (``public``), and a member's page can show only what the API answers that member.

The event stream (``/v2.1/stratus/events``) is served by ``stratus watch``, another process on
another port (``api/watch.py``). ``config.json`` gives its URL: ``STRATUS_DASHBOARD_EVENTS_URL``
when set (a path such as ``/v2.1/stratus/events`` when one reverse proxy fronts both), else the
host the browser asked for with the watch's port. The watch answers the page's cross-origin reads
(CORS) for pages served from the same host name (``api/watch.py``).

Every answer carries a Content-Security-Policy that allows scripts, styles and connections only to
this origin (and the stream's, and the serial console proxy's websocket: ``STRATUS_SERIALPROXY_BASE_URL``),
no inline script, no framing (docs/dashboard.md).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import falcon

from stratus.config import Settings

PREFIX = "/dashboard"
STATIC = Path(__file__).parent / "static"
EVENTS_ROUTE = "/v2.1/stratus/events"  # api/watch.py's ROUTE (the watch imports the API, not the reverse)
# ``stratus watch``'s port when STRATUS_WATCH_BIND is not set (processes/api.py's WATCH_BIND).
DEFAULT_WATCH_PORT = "8775"
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",  # a vendored module kept as its package ships it
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}


def events_url(settings: Settings, req: falcon.Request) -> str:
    """Where the page reads the event stream: the configured URL, or the watch's port on this host."""
    if settings.dashboard_events_url:
        return settings.dashboard_events_url
    port = (settings.watch_bind or "").rpartition(":")[2] or DEFAULT_WATCH_PORT
    host = f"[{req.host}]" if ":" in req.host else req.host  # an IPv6 address
    return f"{req.scheme}://{host}:{port}{EVENTS_ROUTE}"


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else ""


def security_headers(resp: falcon.Response, stream: str, console: str = "") -> None:
    """The headers of every dashboard answer: what the page may load and where it may connect (this
    origin, the event stream's, the serial console proxy's)."""
    others = " ".join(dict.fromkeys(o for o in (_origin(stream), _origin(console)) if o))
    policy = (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        f"connect-src 'self' {others}".rstrip()
        + "; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    resp.set_header("Content-Security-Policy", policy)
    resp.set_header("X-Content-Type-Options", "nosniff")
    resp.set_header("Referrer-Policy", "no-referrer")
    resp.set_header("X-Frame-Options", "DENY")


class _Static:
    public = frozenset({"GET", "HEAD"})

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def _send(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        path = (STATIC / name).resolve()
        if path.parent != STATIC.resolve() or path.suffix not in _TYPES or not path.is_file():
            raise falcon.HTTPNotFound()
        security_headers(resp, events_url(self._settings, req), self._settings.serialproxy_base_url)
        resp.content_type = _TYPES[path.suffix]
        # The page is small and changes with each release: always revalidated, never stale.
        resp.cache_control = ["no-cache"]
        resp.data = path.read_bytes()


class Page(_Static):
    """``GET /dashboard``: the single page; the fragment (``#/servers``) says which view."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self._send(req, resp, "index.html")

    on_head = on_get


class Asset(_Static):
    """``GET /dashboard/static/{name}``: a module, the style sheet or an image, by name (no folders)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        self._send(req, resp, name)

    on_head = on_get


class Config(_Static):
    """``GET /dashboard/config.json``: where the event stream is (no secret: the page is public)."""

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        stream = events_url(self._settings, req)
        security_headers(resp, stream, self._settings.serialproxy_base_url)
        resp.cache_control = ["no-store"]
        resp.media = {"events_url": stream}


def add_routes(app: falcon.App, settings: Settings) -> None:
    app.add_route(PREFIX, Page(settings))
    app.add_route(f"{PREFIX}/config.json", Config(settings))
    app.add_route(f"{PREFIX}/static/{{name}}", Asset(settings))
