"""``stratus serialproxy`` and ``stratus novncproxy``: a console proxy's composition root.

Each proxy needs PostgreSQL (the console tokens, and the read model to find a server's host) and
NATS (to reach the guest's host, whose hypervisor worker relays the console: docs/consoles.md). It
holds no libvirt connection and reaches no compute host directly: it can run on any machine that
reaches those two, beside the API, one per deployment or several behind a load balancer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from psycopg_pool import ConnectionPool

from api.consoles.proxy import ConsoleProxy, ServerPlace, allowed_hosts
from api.consoles.tokens import ConsoleTokens
from api.readmodel import open_pool
from processes import logs
from projections import queries
from stratus.config import Settings
from stratus.consolerelay import Relay, open_relay
from stratus.eventstore import NatsBridge
from workers.consumer import stop_on_signals

# proxy name → (relay kind, Nova's console type)
PROXIES = {"serialproxy": ("serial", "serial"), "novncproxy": ("vnc", "novnc")}


def build(
    settings: Settings,
    name: str,
    pool: ConnectionPool,
    bridge: NatsBridge,
    tokens: ConsoleTokens | None = None,
) -> ConsoleProxy:
    """The proxy ``name`` on ``pool`` (tokens, read model) and ``bridge`` (the hosts)."""
    kind, console_type = PROXIES[name]
    base_url = settings.serialproxy_base_url if name == "serialproxy" else settings.novncproxy_base_url

    def relay(host: str, server_id: str, kind: str, on_data: Callable[[bytes], None]) -> Relay:
        return open_relay(bridge, host, server_id, kind, on_data)

    def place(server_id: str) -> ServerPlace | None:
        with pool.connection() as conn:
            row = queries.get_server(conn, server_id, None)
        return None if row is None else ServerPlace(row["host"], bool(row["deleted"]))

    return ConsoleProxy(
        kind=kind,
        console_type=console_type,
        tokens=tokens or ConsoleTokens(pool.connection),
        place=place,
        open_relay=relay,
        allowed_origins=allowed_hosts(base_url, settings.console_allowed_origins),
        web=settings.novnc_web if name == "novncproxy" else None,
    )


def main(settings: Settings, name: str) -> int:
    """Serve the proxy ``name`` until SIGTERM/SIGINT."""
    logs.configure()
    bind = settings.serialproxy_bind if name == "serialproxy" else settings.novncproxy_bind
    host, _, port = bind.rpartition(":")
    pool = open_pool(settings.database_url or "")
    stop = threading.Event()
    nats = NatsBridge(settings.nats_urls, name=f"stratus-{name}", seed_file=settings.nats_seed_file)
    try:
        with stop_on_signals(stop), nats as bridge:
            proxy = build(settings, name, pool, bridge)
            with proxy.server(host.strip("[]") or "127.0.0.1", int(port)) as server:

                def shutdown_on_stop() -> None:
                    stop.wait()
                    server.shutdown()

                threading.Thread(target=shutdown_on_stop, daemon=True).start()
                server.serve_forever()
    finally:
        pool.close()
    return 0
