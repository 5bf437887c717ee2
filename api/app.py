"""The API's composition root: ``create_app(deps)`` wires resources to their collaborators;
``processes.api:get_app()`` is what gunicorn loads: a ``LazyApp``.

``LazyApp`` connects to nothing when made. It is a WSGI callable that builds the real collaborators
(Settings from the environment, the NATS bridge, the JetStream event store, the ``Stratus``
application and its message bus, the read model's connection pool) on the first request it serves,
in the worker process, after gunicorn has forked, and closes them when the worker exits. Tests
call ``create_app(deps)`` with collaborators they built themselves.
"""

from __future__ import annotations

import atexit
import logging
import os
import secrets
import threading
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import falcon
import falcon.media
import psycopg_pool
from eventsourcing.persistence import InfrastructureFactory

from api import (
    audit,
    compute_admin,
    dashboard,
    degraded,
    errors,
    extensions,
    flavors,
    hypervisors,
    identity,
    images_keypairs,
    networks,
    positions,
    servers,
    telemetry,
    versions,
)
from api.auth import Authenticator
from api.body import MAX_BODY_BYTES, load_validators
from api.consoles.remote import ConsoleIssuer
from api.consoles.tokens import ConsoleTokens
from api.idempotency import IdempotencyKeys
from api.identity.credentials import Credentials, ensure_schema, password_hasher
from api.identity.tokens import TokenSigner, load_or_create_key
from api.log_identity import IdentityFromLog, log_reachable
from api.metadata.passwords import password_store
from api.middleware import REQUEST_ID_HEADERS, CheckedApp, RequestContext
from api.openapi import OpenAPIDocument
from api.placement import add_routes as add_placement_routes
from api.readmodel import ReadModel, Written, open_pool
from api.server_actions import add_routes as add_server_action_routes
from api.server_actions import host_liveness, scheduler_beats
from commands.app import Stratus
from commands.bus import MessageBus, bootstrap
from commands.image_usage import ImageLimits
from commands.network import FixedNetwork
from stratus import collector, metrics, serialization
from stratus.config import Settings
from stratus.eventstore import Factory, JetStreamApplicationRecorder, NatsBridge, part_store
from stratus.health import METRICS, READYZ
from stratus.hostrpc import HostRPC
from stratus.imagestore import user_data_store
from stratus.liveness import Heartbeats, LivenessMirror, LivenessReader

log = logging.getLogger("stratus.api")

REQUEST_SCHEMAS = (
    "servers.create",
    "servers.update",
    "flavors.create",
    "flavors.update",
    *identity.IDENTITY_SCHEMAS,
)
# Token checks running beside their lists' reads at once, per API process (api/auth.py).
TOKEN_CHECKS_AT_ONCE = 4
TOKEN_CHECK_THREADS = "stratus-token-check"


def _new_uuid() -> str:
    return str(uuid.uuid4())


def _new_request_id() -> str:
    """``req-`` and a random UUID (version 4) as ``str(uuid.uuid4())`` writes it, without making
    the ``UUID`` (twice the time, on every request)."""
    b = bytearray(os.urandom(16))
    b[6] = b[6] & 0x0F | 0x40  # the version, 4
    b[8] = b[8] & 0x3F | 0x80  # the variant, RFC 4122
    h = b.hex()
    return f"req-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclass(frozen=True)
class Deps:
    """Everything the API's resources need, built by a composition root."""

    # The process's message bus (``commands.bus.bootstrap``): every write is a command sent to it.
    bus: MessageBus
    # The log the bus appends to, which some resources read beside it: a server's actions and the
    # audit history (``history.LogReader``), Placement's providers (``ProviderLog``), the event
    # stream (``api.watch``); each resource is typed by the Protocol of what it reads.
    log: JetStreamApplicationRecorder
    pool: psycopg_pool.ConnectionPool
    settings: Settings
    # Signs and verifies tokens. The composition root passes the deployment's key; the default, a
    # key made up for this app alone, suits a test that gets its tokens from this app.
    token_signer: TokenSigner = field(default_factory=lambda: TokenSigner(secrets.token_bytes(32)))
    new_flavor_id: Callable[[], str] = _new_uuid
    new_request_id: Callable[[], str] = _new_request_id
    max_body_bytes: int = MAX_BODY_BYTES
    # Beside the log, on the process's NATS bridge: questions to compute hosts (a console's output)
    # and the hosts' and schedulers' heartbeats. None: on the bridge of ``log`` (``beside_the_log``),
    # for a test that builds Deps around its own bus.
    host_rpc: HostRPC | None = None
    heartbeats: LivenessReader | None = None
    # Where a list's token check runs beside its read (api/auth.py); None: every check first.
    token_checks: Executor | None = None


def beside_the_log(deps: Deps) -> tuple[HostRPC, LivenessReader]:
    """The host RPC client and the heartbeats reader ``deps`` names; those it leaves out are built on
    the NATS bridge of its log."""
    bridge = deps.log.bridge
    return (
        deps.host_rpc or HostRPC(bridge),
        deps.heartbeats or LivenessMirror(Heartbeats.beside(bridge, deps.settings), bridge),
    )


def create_app(deps: Deps) -> falcon.App:
    written = Written()  # each user's last write through this process, for their next reads
    read = ReadModel(deps.pool, deps.settings.read_wait_seconds, written)
    reachable = log_reachable(deps.log.bridge)  # whether the log is there now (api/degraded.py)
    authenticator = Authenticator(
        deps.token_signer,
        read,
        from_log=IdentityFromLog(deps.bus.app, reachable),
        checks=deps.token_checks,
        checks_at_once=TOKEN_CHECKS_AT_ONCE,
    )
    middleware: list[Any] = [RequestContext(authenticator, deps.new_request_id), identity.KeystoneErrors()]
    middleware.append(positions.PositionHeader(written))
    # after authentication: a key is scoped to the caller's project
    middleware.append(IdempotencyKeys(deps.bus.app, deps.max_body_bytes, deps.token_signer.digests))
    middleware.insert(0, degraded.Degraded(reachable))  # before authentication (api/degraded.py)
    # first: it times the whole request and sees the status every other middleware settled on
    middleware.insert(0, telemetry.RequestMetrics(access_lines=deps.settings.log_format == "json"))
    app = CheckedApp(middleware=middleware)
    app.req_options.strip_url_path_trailing_slash = True
    json = falcon.media.JSONHandler(dumps=serialization.dumps, loads=serialization.loads)
    app.req_options.media_handlers[falcon.MEDIA_JSON] = json
    app.resp_options.media_handlers[falcon.MEDIA_JSON] = json
    errors.install(app)

    validators = load_validators(REQUEST_SCHEMAS)
    host_rpc, heartbeats = beside_the_log(deps)
    down_after = deps.settings.host_down_after_seconds
    # One bus for every resource: the one the composition root built, with the deployment's image
    # limits (the image commands' quota) from its settings.
    image_limits = ImageLimits(deps.settings.image_count_total, deps.settings.image_size_total_mb)
    bus = deps.bus.extended(image_limits=image_limits)
    server_args = (bus, read, validators, deps.max_body_bytes)
    flavor_args = (*server_args, deps.new_flavor_id)

    app.add_route("/", versions.Versions())
    app.add_route("/v2.1", versions.Version())
    app.add_route("/v2", versions.LegacyVersion())
    app.add_route("/openapi.json", OpenAPIDocument())
    checks, _ = telemetry.readiness_checks(log_head(deps, reachable), deps.pool, deps.settings.ready_max_lag)
    app.add_route(READYZ, telemetry.Readiness(checks))
    user_data = user_data_store(deps.settings.data_dir)
    app.add_route("/v2.1/servers", servers.ServerCollection(*server_args, user_data))
    alive = host_liveness(heartbeats, down_after)
    app.add_route(
        "/v2.1/servers/detail", servers.ServerDetailCollection(*server_args, user_data, liveness=alive)
    )
    passwords = password_store(deps.settings.data_dir)  # the guests' posts (api/server_password.py)
    app.add_route(
        "/v2.1/servers/{server_id}",
        servers.ServerItem(*server_args, user_data, liveness=alive, passwords=passwords),
    )
    consoles = ConsoleIssuer(bus.uow, ConsoleTokens(deps.pool.connection), deps.settings)
    add_server_action_routes(
        app,
        bus,
        deps.max_body_bytes,
        read,
        user_data,
        host_rpc=host_rpc,
        log=deps.log,
        consoles=consoles,
        passwords=passwords,
    )
    app.add_route("/v2.1/flavors", flavors.FlavorCollection(*flavor_args))
    app.add_route("/v2.1/flavors/detail", flavors.FlavorDetailCollection(*flavor_args))
    app.add_route("/v2.1/flavors/{flavor_id}", flavors.FlavorItem(*flavor_args))
    hypervisors.add_routes(app, read, hypervisors.host_states(heartbeats, down_after))
    extensions.add_routes(app)
    images_keypairs.add_routes(app, bus, read, deps.settings.data_dir, deps.max_body_bytes)
    compute_admin.add_routes(
        app,
        bus,
        read,
        deps.max_body_bytes,
        alive,
        scheduler_beats(heartbeats, down_after),
    )
    networks.add_routes(app, bus.dependencies["network"])
    on_the_log = (bus.app, deps.log)
    app.add_route("/v2.1/stratus/history/{kind}/{resource_id}", audit.History(*on_the_log))
    app.add_route("/v2.1/stratus/state/{kind}/{resource_id}", audit.State(*on_the_log))
    app.add_route("/v2.1/stratus/usage/{project_id}", audit.Usage(*on_the_log))
    app.add_route("/v2.1/stratus/audit/verify", audit.Verification(audit.stream_verifier(deps.settings)))
    add_placement_routes(app, bus, deps.log)
    dashboard.add_routes(app, deps.settings)  # static pages; their data comes from the routes above
    identity.add_routes(
        app,
        bus=bus,
        read=read,
        validators=validators,
        credentials=Credentials(deps.pool.connection, hasher=password_hasher(deps.settings)),
        authenticator=authenticator,
        max_body_bytes=deps.max_body_bytes,
    )
    return app


def log_head(deps: Deps, reachable: Callable[[], bool]) -> telemetry.LogHead:
    """The log as the probes read it (``/readyz``, the lag on ``/metrics``)."""
    return telemetry.LogHead(deps.log.max_notification_id, deps.log.read_envelopes, reachable)


def collectors(deps: Deps) -> list[metrics.Collector]:
    """What the API's ``/metrics`` reads at scrape time: the projector's lag, the hosts up and down."""
    _, heartbeats = beside_the_log(deps)
    head = log_head(deps, log_reachable(deps.log.bridge))
    _, lag = telemetry.readiness_checks(head, deps.pool, deps.settings.ready_max_lag)
    hosts = telemetry.hosts_collector(deps.pool, heartbeats, deps.settings.host_down_after_seconds)
    return [lag, hosts]


# -- the process's composition root ---------------------------------------------------------------
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def fixed_network(settings: Settings) -> FixedNetwork | None:
    """The network servers get an address on, from ``STRATUS_FIXED_NETWORK`` (None when it is empty)."""
    if not settings.fixed_network:
        return None
    return FixedNetwork(settings.fixed_network_name, settings.fixed_network)


def event_store(bridge: NatsBridge, settings: Settings) -> Factory:
    """The API's event store: its loads checked as the workers' are (docs/trust.md: a request on a
    resource whose history holds a refused event is answered 409, api/errors.py, never acted on), its
    per-aggregate heads kept as its aggregate cache sizes them (``stratus.config.recorder_heads``)."""
    return part_store(bridge, settings, settings.api_aggregate_cache)


def application(factory: InfrastructureFactory[Any], settings: Settings) -> Stratus:
    """The API's aggregates: the servers and projects being acted on, kept up to
    ``STRATUS_API_AGGREGATE_CACHE`` of them."""
    return Stratus(factory, cache_size=settings.api_aggregate_cache)


def build(settings: Settings) -> tuple[Deps, Callable[[], None]]:
    """The real collaborators for ``settings``, and a function that closes them."""
    from stratus.postgres import database_url

    url = settings.database_url or database_url(settings)
    bridge = NatsBridge(settings.nats_urls, name="stratus-api", seed_file=settings.nats_seed_file)
    bridge.start(wait=0)  # connect in the background: the API answers (503) while NATS is away
    try:
        # a connection per thread at most, and one per token check beside a request
        pool = open_pool(url, max_size=max(8, settings.api_threads) + TOKEN_CHECKS_AT_ONCE)
    except BaseException:
        bridge.close()
        raise
    try:
        # Loads are checked as the workers' are (docs/trust.md): a request on a resource whose
        # history holds a refused event is answered 409 (api/errors.py), never acted on.
        factory = event_store(bridge, settings)
        bus = bootstrap(application(factory, settings), network=fixed_network(settings))
        log = factory.application_recorder()  # the bus's application's recorder, typed as what it is
        signer = TokenSigner(load_or_create_key(settings.token_key_path), settings.token_ttl_seconds)
        with pool.connection() as conn:
            ensure_schema(conn)
    except BaseException:
        pool.close()
        bridge.close()
        raise

    checks = ThreadPoolExecutor(TOKEN_CHECKS_AT_ONCE, thread_name_prefix=TOKEN_CHECK_THREADS)

    def close() -> None:
        checks.shutdown()
        pool.close()
        bridge.close()

    deps = Deps(
        bus=bus,
        log=log,
        pool=pool,
        settings=settings,
        token_signer=signer,
        host_rpc=HostRPC(bridge),
        # pushed to this process by a watch: a page of servers asks NATS nothing for its hosts
        heartbeats=LivenessMirror(Heartbeats.beside(bridge, settings), bridge),
        token_checks=checks,
    )
    return deps, close


class LazyApp:
    """A WSGI app that composes the real one on its first request, in the process that serves it."""

    # Whether it answers /healthz and /metrics itself (api/telemetry.py): not where guests call.
    answers_probes = True

    def __init__(self, settings_factory: Callable[[], Settings] = Settings.from_env) -> None:
        self._settings_factory = settings_factory
        self._lock = threading.Lock()
        self._app: falcon.App | None = None
        self._probes: telemetry.Probes | None = None
        self._collectors: list[metrics.Collector] = []  # set once composed

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if self.answers_probes and environ.get("PATH_INFO") in telemetry.Probes.paths:  # composed or not
            return self._probe(environ, start_response)
        app = self._app
        if app is None:
            try:
                app = self._compose()
            except Exception:
                request_id = _new_request_id()
                log.exception("the API could not be composed (request %s); answering 503", request_id)
                return _unavailable(start_response, request_id)
        return app(environ, start_response)

    def _compose(self) -> falcon.App:
        with self._lock:
            if self._app is None:
                deps, close = build(self._settings_factory())
                try:
                    app = create_app(deps)
                    self._extend(app, deps)
                except BaseException:
                    close()  # the next request composes afresh: leave no pool or connection behind
                    raise
                atexit.register(close)
                self._collectors = collectors(deps)
                self._app = app
                # What composing made lives as long as the worker: out of the cyclic collector's
                # way, whose full passes over it (~100,000 objects, ~30 ms each, every few hundred
                # requests of a page of servers) were ~0.15 ms a request, and a 30 ms stall.
                collector.freeze()
            return self._app

    def _probe(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == METRICS and self._app is None:
            try:  # the hosts and the lag are read by the composed app's collaborators
                self._compose()
            except Exception as e:
                log.warning("the API could not be composed for a scrape; its counters only: %s", e)
        with self._lock:
            if self._probes is None:
                self._probes = telemetry.Probes(
                    self._settings_factory().metrics_multiproc_dir, self.collectors
                )
        return self._probes(environ, start_response)

    def collectors(self) -> list[metrics.Collector]:
        return self._collectors

    def _extend(self, app: falcon.App, deps: Deps) -> None:
        """Routes a variant of the API adds to the composed app (``api.watch``); none here."""


def _unavailable(start_response: Callable[..., Any], request_id: str) -> list[bytes]:
    message = f"The API cannot reach its services yet (request {request_id}); retry."
    body = serialization.dumps(errors.fault_body(503, message))
    headers = [
        ("Content-Type", "application/json"),
        (errors.ERROR_CODE_HEADER, errors.ServiceUnavailable.code),
        ("Content-Length", str(len(body))),
        ("Retry-After", "5"),
        *((name, request_id) for name in REQUEST_ID_HEADERS),
    ]
    start_response("503 Service Unavailable", headers)
    return [body]
