"""Our Placement API alone under gunicorn, for bench_placement: the same routes and handlers as in
``api.app``, with an admin actor on every request in place of Keystone tokens (Placement's own side
of the comparison runs with ``auth_strategy = noauth2``).

``gunicorn 'tests.bench.placement_wsgi:get_app()'`` with the ``STRATUS_*`` settings of the bench's
JetStream server in the environment.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import falcon

from api.placement import add_routes
from api.placement.view import ProviderLog
from commands.app import Stratus
from commands.bus import bootstrap
from stratus.config import Settings
from stratus.context import Actor, CommandContext

ADMIN = Actor(user_id="bench-admin", project_id="bench", roles=("admin",))


class NoAuth:
    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        req.context.request_id = f"req-{uuid.uuid4()}"
        req.context.actor = ADMIN
        req.context.command = CommandContext(actor=ADMIN, request_id=req.context.request_id)


def create_app(app: Stratus, log: ProviderLog) -> falcon.App:
    wsgi = falcon.App(middleware=[NoAuth()])
    add_routes(wsgi, bootstrap(app), log)
    return wsgi


class _Lazy:
    """Composes on the first request, in the worker process (after gunicorn forked)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._app: falcon.App | None = None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        with self._lock:
            if self._app is None:
                from stratus.eventstore import Factory, NatsBridge

                settings = Settings.from_env()
                bridge = NatsBridge(settings.nats_urls, name="bench-placement").start()
                factory = Factory(bridge=bridge, settings=settings)
                self._app = create_app(Stratus(factory), factory.application_recorder())
        return self._app(environ, start_response)


def get_app() -> _Lazy:
    return _Lazy()
