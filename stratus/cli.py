"""The ``stratus`` command: the whole control plane in one command, or each part on its own.

``stratus run`` is the developer's and evaluator's entry: JetStream, PostgreSQL, the API, the
projector, the scheduler and one hypervisor worker on libvirt's test driver, supervised as one
group. The other subcommands run one part each, for deployments that spread the parts over many
machines; they are configured by the environment (``Settings.from_env``), and flags override it.

This module is each process's composition root. It imports the parts by name when they run
(``importlib``), so that the shared kernel does not depend on the layers above it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import importlib
import importlib.metadata
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn

from stratus.config import Settings
from stratus.supervisor import ChildProcess, Part, ServicePart, Supervisor, http_responding

if TYPE_CHECKING:
    from stratus import natsserver, postgres

ROOT = Path(__file__).resolve().parent.parent

# Each part's entry point, ``module:function(settings, **options) -> exit status``; the services
# return on SIGTERM/SIGINT, ``rebuild`` when it is done.
ENTRY_POINTS = {
    "projector": "projections.runner:main",
    "rebuild": "projections.rebuild:main",
    "scheduler": "workers.scheduler:main",
    "hypervisor": "workers.hypervisor:main",
    "notifier": "projections.notifications:main",
    "simulate": "workers.simulator:main",
}
WSGI_APP = "api.app:get_app()"
WATCH_APP = "api.watch:get_app()"
# The first run's admin password (read once by `run`, never passed on to the parts).
ADMIN_PASSWORD_ENV = "STRATUS_ADMIN_PASSWORD"
# Parts that read or write the read models; the others touch only the event log.
NEEDS_DATABASE = {"api", "projector", "rebuild"}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["test"]:
        # Everything after `test` belongs to pytest, options included.
        _run_tests(argv[1:])
    if argv[:1] == ["conformance"]:
        from stratus import conformance

        return conformance.main(argv[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    handler: Callable[[argparse.Namespace], int] = args.handler
    return handler(args)


# -- settings -------------------------------------------------------------------------------------


def _settings(args: argparse.Namespace) -> Settings:
    """Settings from the environment, overridden by whichever flags were given."""
    s = Settings.from_env()
    overrides: dict[str, object] = {}
    if getattr(args, "data_dir", None):
        overrides["data_dir"] = Path(args.data_dir)
    if getattr(args, "nats_url", None):
        overrides["nats_urls"] = tuple(u.strip() for u in args.nats_url.split(",") if u.strip())
    if getattr(args, "database_url", None):
        overrides["database_url"] = args.database_url
    for name in _SAME_NAMED:  # flags whose value is the setting of the same name
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    return dataclasses.replace(s, **overrides)  # type: ignore[arg-type]


_SAME_NAMED = (
    "api_bind", "api_workers", "api_threads", "host_name", "libvirt_uri",
    "heartbeat_interval_seconds", "reconcile_interval_seconds", "shutdown_timeout_seconds",
    "host_concurrency",
)  # fmt: skip


def _with_database(settings: Settings) -> Settings:
    from stratus import postgres

    try:
        url = postgres.database_url(settings)
    except postgres.PostgresError as e:
        raise SystemExit(f"stratus: no PostgreSQL for the read models: {e}") from e
    return dataclasses.replace(settings, database_url=url)


def _child_env(settings: Settings) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(ADMIN_PASSWORD_ENV, None)  # a secret for the seeding, not for the parts
    env.update(settings.to_env())
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


# -- single parts ---------------------------------------------------------------------------------


API_KEEPALIVE_SECONDS = 75


def _cmd_api(args: argparse.Namespace) -> int:
    settings = _with_database(_settings(args))
    argv = [
        sys.executable, "-m", "gunicorn",
        "--bind", settings.api_bind,
        "--workers", str(settings.api_workers),
        "--threads", str(settings.api_threads),
        # Threaded workers keep connections alive. gunicorn's default closes an idle one after 2 s,
        # which is openstacksdk's polling interval: its next request then met a connection being
        # closed ("Remote end closed connection without response"). Longer than any client's poll.
        "--keep-alive", str(API_KEEPALIVE_SECONDS),
        "--graceful-timeout", "10",
        "--access-logfile", "-",
    ]
    if _version_at_least("gunicorn", 27):
        # One API per machine needs no control socket, and two (tests, say) would share its path.
        argv.append("--no-control-socket")
    argv.append(WSGI_APP)
    _exec(argv, _child_env(settings))


def _cmd_watch(args: argparse.Namespace) -> int:
    """The event stream over HTTP (SSE): the API app under gunicorn's threaded worker, one thread per
    open stream, so long-lived readers never take the API's sync workers (docs/integrators.md)."""
    settings = _with_database(_settings(args))
    threads = args.threads or int(os.environ.get("STRATUS_WATCH_THREADS", "64"))
    argv = [
        sys.executable, "-m", "gunicorn",
        "--bind", args.bind or os.environ.get("STRATUS_WATCH_BIND", "127.0.0.1:8775"),
        "--worker-class", "gthread",
        "--workers", "1",
        "--threads", str(threads),
        "--timeout", "0",  # a stream is idle between events by design; keep-alives show it is alive
        "--graceful-timeout", "5",
        "--access-logfile", "-",
    ]
    if _version_at_least("gunicorn", 27):
        argv.append("--no-control-socket")
    argv.append(WATCH_APP)
    # The app caps its streams under the pool it is served by: it must know the pool's size.
    _exec(argv, {**_child_env(settings), "STRATUS_WATCH_THREADS": str(threads)})


def _version_at_least(distribution: str, major: int) -> bool:
    first = importlib.metadata.version(distribution).split(".", 1)[0]
    return first.isdigit() and int(first) >= major


def _cmd_part(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if args.command in NEEDS_DATABASE:
        settings = _with_database(settings)
    options: dict[str, object] = {}
    if getattr(args, "batch_size", None):
        options["batch_size"] = args.batch_size
    if getattr(args, "keep_old", False):
        options["keep_old"] = True
    if args.command == "simulate":
        for name in ("hosts", "vcpus", "memory_mb", "disk_gb", "threads", "prefix"):
            options[name] = getattr(args, name)
    entry = _load_entry_point(args.command)
    result = entry(settings, **options)
    return result if isinstance(result, int) else 0


def _load_entry_point(part: str) -> Callable[..., object]:
    module_name, _, function = ENTRY_POINTS[part].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is not None and module_name.startswith(e.name):
            raise SystemExit(f"stratus: the {part} is not available ({module_name} is missing)") from e
        raise
    entry: Callable[..., object] = getattr(module, function)
    return entry


def _cmd_bootstrap(args: argparse.Namespace) -> int:
    """Seed identity once for a deployment whose parts run on several machines (`run` does it itself)."""
    settings = _with_database(_settings(args))
    seeded = _seed_identity(settings, os.environ.get(ADMIN_PASSWORD_ENV) or None)
    print(f"identity seeded: user admin ({seeded.user_id}) in project admin ({seeded.project_id})")
    if seeded.generated_password:
        print(f"the admin password, shown once: {seeded.generated_password}")
    return 0


def _cmd_nats(args: argparse.Namespace) -> int:
    """The pinned JetStream server in the foreground (exec'd, so it receives signals directly)."""
    from stratus import natsserver

    binary = str(natsserver.binary())
    if args.config:
        _exec([binary, "-c", str(args.config), *args.extra], dict(os.environ))
    store = Path(args.store_dir or _settings(args).data_dir / "nats")
    store.mkdir(parents=True, exist_ok=True)
    argv = [binary, "-js", "-sd", str(store), "-a", args.address, "-p", str(args.port)]
    if args.monitor_port:
        argv += ["-m", str(args.monitor_port)]
    _exec([*argv, *args.extra], dict(os.environ))


def _cmd_audit(args: argparse.Namespace) -> int:
    """``stratus audit ...``: reads the log only (stratus/audit/cli.py)."""
    from stratus.audit import cli as audit_cli

    return audit_cli.run(_settings(args), args)


def _cmd_quarantine(args: argparse.Namespace) -> int:
    """``stratus quarantine list``: the events the parts following the log skipped (JetStream only)."""
    import orjson

    from stratus.eventstore import NatsBridge
    from stratus.quarantine import Quarantine

    settings = _settings(args)
    with NatsBridge(settings.nats_urls, name="stratus-quarantine") as bridge:
        records = Quarantine(bridge, log_stream=settings.stream).list(args.part)
    if args.json:
        for r in records:
            print(orjson.dumps(dataclasses.asdict(r)).decode())
        return 0
    if not records:
        print("no quarantined events")
        return 0
    print(f"{'POSITION':>10}  {'PART':<24} {'AT':<20} {'TOPIC':<40} {'ORIGINATOR':<36} ERROR")
    for r in records:
        print(f"{r.position:>10}  {r.part:<24} {r.at:<20} {r.topic:<40} {r.originator_id:<36} "
              f"{r.error}: {r.reason}")  # fmt: skip
    return 0


def _run_tests(pytest_args: list[str]) -> NoReturn:
    os.chdir(ROOT)
    _exec([sys.executable, "-m", "pytest", *pytest_args], dict(os.environ))


def _exec(argv: list[str], env: dict[str, str]) -> NoReturn:
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], argv, env)


# -- the whole control plane ----------------------------------------------------------------------


def _cmd_run(args: argparse.Namespace) -> int:
    from stratus import natsserver, postgres

    settings = _settings(args)
    data_dir = settings.data_dir.absolute()
    data_dir.mkdir(parents=True, exist_ok=True)
    settings = dataclasses.replace(settings, data_dir=data_dir)
    _run_lock = _lock_data_dir(data_dir)  # held until this process exits
    parts: list[Part] = []

    # JetStream: the pinned server from the wheel, unless the log lives elsewhere.
    nats: natsserver.NatsServer | None = None
    if not (args.nats_url or "STRATUS_NATS_URL" in os.environ):
        _stop_leftover_servers(data_dir / "nats")
        nats = natsserver.NatsServer(store_dir=data_dir / "nats", port=args.nats_port)
        parts.append(_nats_part(nats))

    # PostgreSQL: DATABASE_URL, or the embedded server under <data_dir>/pg.
    pg: postgres.EmbeddedPostgres | None = None
    if not settings.database_url:
        pg = postgres.EmbeddedPostgres(data_dir / "pg")
        parts.append(_postgres_part(pg))

    def resolved() -> Settings:
        s = settings
        if nats is not None:
            s = dataclasses.replace(s, nats_urls=(nats.url,))
        if pg is not None:
            s = dataclasses.replace(s, database_url=pg.url)
        return s

    watch_bind = os.environ.get("STRATUS_WATCH_BIND") or _next_port(settings.api_bind)

    def child_env() -> dict[str, str]:
        return {**_child_env(resolved()), "STRATUS_WATCH_BIND": watch_bind}

    # Identity: the default roles, the admin project and user, the admin's password (first run).
    admin_password = os.environ.get(ADMIN_PASSWORD_ENV) or None
    seeded: list[Any] = []
    parts.append(_identity_part(lambda: seeded.append(_seed_identity(resolved(), admin_password))))

    output_lock = threading.Lock()
    api_url = f"http://{_client_address(settings.api_bind)}/v2.1"
    children: list[tuple[str, str, Callable[[], bool] | None]] = [
        ("api", api_url, http_responding(f"http://{_client_address(settings.api_bind)}/")),
        ("projector", "", None),
        ("scheduler", "", None),
        ("hypervisor", f"host {settings.host_name} on {settings.libvirt_uri}", None),
        ("notifier", "Nova versioned notifications on versioned_notifications.>", None),
        (
            "watch",
            f"http://{_client_address(watch_bind)}/v2.1/stratus/events (server-sent events)",
            http_responding(f"http://{_client_address(watch_bind)}/"),
        ),
    ]
    hosts = args.hosts if args.hosts is not None else int(os.environ.get("STRATUS_SIMULATED_HOSTS", "0"))
    commands = {name: [name] for name, _, _ in children}
    if hosts > 0:  # room to run: simulated hosts beside the one on libvirt (docs/operations.md)
        children.append(("simulate", f"{hosts} simulated hosts sim-00001 ...", None))
        commands["simulate"] = ["simulate", "--hosts", str(hosts), "--threads", "4"]
    for name, address, ready in children:
        parts.append(
            ChildProcess(
                name,
                [sys.executable, "-m", "stratus.cli", *commands[name]],
                env=child_env,
                address=address,
                ready=ready,
                ready_timeout=60.0,
                output=sys.stdout,
                output_lock=output_lock,
            )
        )

    def on_ready(started: Sequence[Part]) -> None:
        with output_lock:
            generated = seeded[0].generated_password if seeded else None
            sys.stdout.write(_banner(started, api_url, generated))
            sys.stdout.flush()

    supervisor = Supervisor(parts, grace=args.grace, settle=2.0, log=sys.stderr, on_ready=on_ready)
    status = supervisor.run()
    print("stratus: stopped." if status == 0 else "stratus: stopped after a failure.", file=sys.stderr)
    return status


def _next_port(bind: str) -> str:
    """The address beside ``bind`` (same host, next port): where `run` puts the event stream."""
    host, _, port = bind.rpartition(":")
    return f"{host}:{int(port) + 1}"


def _lock_data_dir(data_dir: Path) -> IO[str]:
    """One ``stratus run`` per data directory: two would share one JetStream store."""
    f = open(data_dir / "run.lock", "a+")  # noqa: SIM115 (kept open: the lock lives with the file)
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "?"
        f.close()
        raise SystemExit(f"stratus: {data_dir} is in use by another `stratus run` (pid {holder})") from None
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f


def _stop_leftover_servers(store_dir: Path, timeout: float = 10.0) -> None:
    """Stop a nats-server that a killed ``stratus run`` left running on this store.

    Only reached while holding the data directory's lock, so no live ``run`` owns such a server;
    two servers on one store directory would corrupt it.
    """
    for pid in _pids_with_argument("nats-server", str(store_dir)):
        print(f"stratus: stopping nats-server (pid {pid}) left over from an earlier run", file=sys.stderr)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _pids_with_argument(program: str, argument: str) -> list[int]:
    """Processes whose executable is named ``program`` and whose arguments include ``argument``."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and Path(os.fsdecode(argv[0])).name == program and os.fsencode(argument) in argv:
            found.append(int(cmdline.parent.name))
    return found


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _nats_part(nats: natsserver.NatsServer) -> Part:
    from stratus import natsserver

    return ServicePart(
        "nats",
        start=nats.start,
        stop=nats.close,
        exit_status=nats.exit_status,
        address=lambda: f"{nats.url}  (JetStream; data in {nats.store_dir})",
        output_tail=nats.log_tail,
        errors=(natsserver.NatsServerError, OSError),
    )


def _postgres_part(pg: postgres.EmbeddedPostgres) -> Part:
    from stratus import postgres

    return ServicePart(
        "postgres",
        start=pg.start,
        stop=pg.stop,
        # The server is pg_ctl's daemon, not our child: it is alive while its pid file says so.
        exit_status=lambda: None if pg.is_alive() else 1,
        address=lambda: f"{pg.url}  (Unix socket; data in {pg.pgdata})",
        output_tail=pg.log_tail,
        errors=(postgres.PostgresError,),
    )


def _seed_identity(settings: Settings, password: str | None) -> Any:
    bootstrap = importlib.import_module("api.bootstrap")
    return bootstrap.main(settings, password)


def _identity_part(seed: Callable[[], None]) -> Part:
    """Seeding as a part that starts (runs to the end) before the API and stays 'up' afterwards."""
    return ServicePart(
        "identity",
        start=seed,
        stop=lambda: None,
        exit_status=lambda: None,
        address="user admin in project admin (domain Default)",
        # Whatever stops the seeding (PostgreSQL, JetStream, a bug) stops the run, with its message.
        errors=(Exception,),
    )


def _client_address(bind: str) -> str:
    """Where a client on this machine reaches a server bound to ``bind``."""
    host, _, port = bind.rpartition(":")
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host in ("[::]", "::"):
        host = "[::1]"
    return f"{host}:{port}"


def _banner(started: Sequence[Part], api_url: str, generated_password: str | None = None) -> str:
    width = max(len(p.name) for p in started)
    lines = ["", "Stratus is running:"]
    lines += [f"  {p.name:<{width}}  {p.address or '(running)'}" for p in started]
    base = api_url.rsplit("/v2.1", 1)[0]
    if generated_password:
        password = shlex.quote(generated_password)
        note = "this first run generated the admin password: it is shown once, here, and stored only hashed"
    else:
        password = f"'<{ADMIN_PASSWORD_ENV}, or the password printed by the first run>'"
        note = "the admin password is the one set on the first run"
    lines += [
        "",
        f"Use it with the openstack CLI ({note}):",
        f"  export OS_AUTH_URL={base}/identity/v3",
        "  export OS_IDENTITY_API_VERSION=3",
        "  export OS_USERNAME=admin",
        f"  export OS_PASSWORD={password}",
        "  export OS_PROJECT_NAME=admin",
        "  export OS_USER_DOMAIN_NAME=Default",
        "  export OS_PROJECT_DOMAIN_NAME=Default",
        "  openstack flavor create --ram 512 --disk 1 --vcpus 1 m1.tiny",
        "  head -c 1048576 /dev/zero > tiny.img",
        "  openstack image create --file tiny.img --disk-format raw --container-format bare tiny",
        "  openstack server create --flavor m1.tiny --image tiny --wait vm1",
        "  openstack server list",
        "",
        "Ctrl-C stops everything.",
        "",
    ]
    return "\n".join(lines)


# -- the command line -----------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stratus",
        description="Stratus: an event-sourced control plane for cloud compute.",
        epilog="Settings come from the environment (STRATUS_*, DATABASE_URL); flags override them. "
        "See docs/operations.md.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", help="local state (STRATUS_DATA_DIR, default .stratus)")
    common.add_argument("--nats-url", help="JetStream server URL(s), comma-separated (STRATUS_NATS_URL)")
    common.add_argument("--database-url", help="PostgreSQL URL (DATABASE_URL; default: embedded)")

    def add(name: str, handler: Callable[[argparse.Namespace], int], help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=help, description=help)
        p.set_defaults(handler=handler)
        return p

    run = add("run", _cmd_run, "run the whole control plane on this machine, supervised as one group")
    run.add_argument("--nats-port", type=int, default=None,
                     help="client port of the embedded JetStream server (default: a free port)")
    run.add_argument("--api-bind", help="API address (STRATUS_API_BIND, default 127.0.0.1:8774)")
    run.add_argument("--api-workers", type=int, help="gunicorn workers (STRATUS_API_WORKERS)")
    run.add_argument("--api-threads", type=int, help="threads per API worker (STRATUS_API_THREADS)")
    run.add_argument("--host-name", help="the hypervisor worker's host name (STRATUS_HOST_NAME)")
    run.add_argument("--libvirt-uri", help="the hypervisor worker's libvirt URI (STRATUS_LIBVIRT_URI)")
    run.add_argument("--hosts", type=int, default=None,
                     help="simulated compute hosts (32 vCPUs, 128 GiB each) beside compute-1, for room "
                          "(STRATUS_SIMULATED_HOSTS, default 0)")
    run.add_argument("--grace", type=float, default=10.0,
                     help="seconds each part has to stop before it is killed (default 10)")

    api = add("api", _cmd_api, "the Compute API under gunicorn")
    api.add_argument("--api-bind", help="address to listen on (STRATUS_API_BIND)")
    api.add_argument("--api-workers", type=int, help="gunicorn workers (STRATUS_API_WORKERS)")
    api.add_argument("--api-threads", type=int, help="threads per API worker (STRATUS_API_THREADS)")
    projector = add("projector", _cmd_part, "the projection runner: keeps the read models up to date")
    projector.add_argument("--batch-size", type=int, help="log entries per transaction (default 500)")
    rebuild = add("rebuild", _cmd_part, "rebuild the read models from the log, then swap them in")
    rebuild.add_argument("--batch-size", type=int, help="log entries per transaction (default 2000)")
    rebuild.add_argument("--keep-old", action="store_true",
                         help="keep the replaced tables (schema stratus_rm_old) after the swap")
    add("scheduler", _cmd_part, "the scheduler: places requested instances on hosts")
    add("bootstrap", _cmd_bootstrap,
        f"seed identity: roles, the admin project and user; the password from {ADMIN_PASSWORD_ENV} "
        "or generated and printed once")
    hv = add("hypervisor", _cmd_part, "the hypervisor worker for one compute host")
    hv.add_argument("--host-name", help="this compute host's name (STRATUS_HOST_NAME)")
    hv.add_argument("--libvirt-uri", help="libvirt connection URI (STRATUS_LIBVIRT_URI)")
    hv.add_argument("--heartbeat-interval", type=float, dest="heartbeat_interval_seconds",
                    help="seconds between heartbeats (STRATUS_HEARTBEAT_INTERVAL, default 10)")
    hv.add_argument("--reconcile-interval", type=float, dest="reconcile_interval_seconds",
                    help="seconds between reconciliations, 0: never (STRATUS_RECONCILE_INTERVAL, 30)")
    hv.add_argument("--shutdown-timeout", type=float, dest="shutdown_timeout_seconds",
                    help="seconds a guest has to power off on ACPI shutdown (STRATUS_SHUTDOWN_TIMEOUT, 60)")
    hv.add_argument("--concurrency", type=int, dest="host_concurrency",
                    help="servers worked on at once, each one step at a time (STRATUS_HOST_CONCURRENCY, 10)")

    sim = add("simulate", _cmd_part, "many simulated compute hosts (libvirt's test driver) in one process")
    sim.add_argument("--hosts", type=int, default=100, help="how many hosts (default 100)")
    sim.add_argument("--vcpus", type=int, default=32, help="CPUs per host (default 32)")
    sim.add_argument("--memory-mb", type=int, default=131072, help="memory per host (default 131072)")
    sim.add_argument("--disk-gb", type=int, default=2000, help="disk per host (default 2000)")
    sim.add_argument("--threads", type=int, default=8, help="threads serving the hosts (default 8)")
    sim.add_argument("--prefix", default="sim", help="host names: <prefix>-00001 ... (default sim)")

    nats = add("nats", _cmd_nats, "the pinned JetStream server, in the foreground")
    nats.add_argument("--config", type=Path, help="a nats-server configuration file (clusters)")
    nats.add_argument("--address", default="127.0.0.1",
                      help="client address (default 127.0.0.1; a wider one wants --config with auth)")
    nats.add_argument("--port", type=int, default=4222, help="client port (default 4222)")
    nats.add_argument("--monitor-port", type=int, default=None, help="HTTP monitoring port")
    nats.add_argument("--store-dir", help="JetStream storage (default <data dir>/nats)")
    nats.add_argument("extra", nargs=argparse.REMAINDER,
                      help="further nats-server options, after --")

    from stratus.audit import cli as audit_cli

    audit_cli.add_parser(sub, common, _cmd_audit)
    sub.add_parser(
        "conformance", add_help=False,
        help="tempest's API tests against a stack of its own (further arguments: --help)",
    )  # fmt: skip
    quarantine = add("quarantine", _cmd_quarantine,
                     "events the parts following the log quarantined (skipped): see docs/operations.md")
    quarantine.add_argument("action", choices=["list"], help="list: every record, oldest first")
    quarantine.add_argument("--part", help="only this part's (projector, notifier, scheduler, host-feed, "
                            "hypervisor-<host>, rebuild)")
    quarantine.add_argument("--json", action="store_true", help="one JSON object per line")
    add("notifier", _cmd_part, "publishes Nova-compatible versioned notifications projected from the log")
    watch = add("watch", _cmd_watch, "the event stream over HTTP (server-sent events), threaded")
    watch.add_argument("--bind", help="address to listen on (STRATUS_WATCH_BIND, default 127.0.0.1:8775)")
    watch.add_argument("--threads", type=int, help="open streams at most (STRATUS_WATCH_THREADS, default 64)")

    # Handled in main() before parsing; listed here for --help.
    sub.add_parser("test", help="run the test suite (further arguments go to pytest)", add_help=False)
    return parser


if __name__ == "__main__":
    sys.exit(main())
