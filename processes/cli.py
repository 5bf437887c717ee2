"""The ``stratus`` command: the whole control plane in one command, or each part on its own.

``stratus run`` is the developer's and evaluator's entry: JetStream, PostgreSQL, the API, the
projector, the scheduler and one hypervisor worker on libvirt's test driver, supervised as one
group (``processes.devrun``). The other subcommands run one part each, for deployments that spread
the parts over many machines; they are configured by the environment (``Settings.from_env``), and
flags override it.

This module parses the command line and hands the settings to the part's composition root, a module
of this package named for it; each is imported when its command runs, so that ``stratus api`` needs
no libvirt and ``stratus --help`` loads no part.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from processes import audit
from processes.spawn import exec_program, inherited
from stratus.config import ADMIN_PASSWORD_ENV, Settings

ROOT = Path(__file__).resolve().parent.parent
# ``stratus test --unit`` etc.: the tiers of the test suite, one directory each (docs/architecture.md).
TEST_TIERS = ("unit", "integration", "acceptance")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` names (default: this process's arguments); its exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["test"]:
        # Everything after `test` belongs to pytest, options included (but the tier flags).
        _run_tests(argv[1:])
    if argv[:1] == ["conformance"]:
        from processes import conformance

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
        overrides["nats_urls_given"] = True
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
    "host_concurrency", "watch_bind", "watch_threads", "simulated_hosts", "metadata_bind",
    "serialproxy_bind", "novncproxy_bind",
)  # fmt: skip


def _with_database(settings: Settings) -> Settings:
    from stratus import postgres

    try:
        url = postgres.database_url(settings)
    except postgres.PostgresError as e:
        raise SystemExit(f"stratus: no PostgreSQL for the read models: {e}") from e
    return dataclasses.replace(settings, database_url=url)


# -- the commands ---------------------------------------------------------------------------------


def _cmd_run(args: argparse.Namespace) -> int:
    from processes import devrun

    return devrun.run(_settings(args), nats_port=args.nats_port, grace=args.grace)


def _cmd_api(args: argparse.Namespace) -> int:
    from processes import api

    api.serve(_with_database(_settings(args)))


def _cmd_watch(args: argparse.Namespace) -> int:
    from processes import api

    api.serve_watch(_with_database(_settings(args)))


def _cmd_metadata(args: argparse.Namespace) -> int:
    from processes import metadata

    metadata.serve(_with_database(_settings(args)))


def _cmd_metadata_proxy(args: argparse.Namespace) -> int:
    from processes import metadata

    return metadata.proxy(_settings(args), args.instance_id, args.project_id, args.service)


def _cmd_serialproxy(args: argparse.Namespace) -> int:
    from processes import consoleproxy

    return consoleproxy.main(_with_database(_settings(args)), "serialproxy")


def _cmd_novncproxy(args: argparse.Namespace) -> int:
    from processes import consoleproxy

    return consoleproxy.main(_with_database(_settings(args)), "novncproxy")


def _cmd_projector(args: argparse.Namespace) -> int:
    from processes import projector

    options = {"batch_size": args.batch_size} if args.batch_size else {}
    return projector.main(_with_database(_settings(args)), **options)


def _cmd_rebuild(args: argparse.Namespace) -> int:
    from processes import rebuild

    options = {"batch_size": args.batch_size} if args.batch_size else {}
    return rebuild.main(_with_database(_settings(args)), keep_old=args.keep_old, **options)


def _cmd_trust(args: argparse.Namespace) -> int:
    from processes import trust

    settings = _settings(args)
    directory = args.dir if args.dir is not None else settings.data_dir / "trust"
    return trust.main(settings, args.action, directory, name=args.name, hosts=args.host, reason=args.reason)


def _cmd_notifier(args: argparse.Namespace) -> int:
    from processes import notifier

    return notifier.main(_settings(args))


def _cmd_scheduler(args: argparse.Namespace) -> int:
    from processes import scheduler

    return scheduler.main(_settings(args))


def _cmd_hypervisor(args: argparse.Namespace) -> int:
    from processes import hypervisor

    return hypervisor.main(_settings(args))


def _cmd_simulate(args: argparse.Namespace) -> int:
    from processes import simulator

    return simulator.main(
        _settings(args), args.hosts, vcpus=args.vcpus, memory_mb=args.memory_mb, disk_gb=args.disk_gb,
        threads=args.threads, prefix=args.prefix,
    )  # fmt: skip


def _cmd_bootstrap(args: argparse.Namespace) -> int:
    """Seed identity once for a deployment whose parts run on several machines (`run` does it itself)."""
    from processes import bootstrap

    settings = _with_database(_settings(args))
    seeded = bootstrap.main(settings, settings.admin_password)
    print(f"identity seeded: user admin ({seeded.user_id}) in project admin ({seeded.project_id})")
    if seeded.generated_password:
        print(f"the admin password, shown once: {seeded.generated_password}")
    return 0


def _cmd_nats(args: argparse.Namespace) -> int:
    """The pinned JetStream server in the foreground (exec'd, so it receives signals directly)."""
    from processes import nats

    nats.serve(
        config=args.config,
        store_dir=Path(args.store_dir or _settings(args).data_dir / "nats"),
        address=args.address,
        port=args.port,
        monitor_port=args.monitor_port,
        extra=args.extra,
    )


def _cmd_audit(args: argparse.Namespace) -> int:
    """``stratus audit ...``: reads the log only (processes/audit.py)."""
    return audit.run(_settings(args), args)


def _cmd_quarantine(args: argparse.Namespace) -> int:
    """``stratus quarantine list``: the events the parts following the log skipped (JetStream only)."""
    from processes import quarantine

    return quarantine.list_records(_settings(args), part=args.part, as_json=args.json)


def _run_tests(args: list[str]) -> NoReturn:
    """pytest in the repository, on the tiers named by ``--unit``, ``--integration``, ``--acceptance``
    (none: the whole suite); a tier without its directory yet has no tests."""
    os.chdir(ROOT)
    tiers, pytest_args = tier_selection(args, ROOT)
    if pytest_args is None:
        print(f"stratus test: no tests in the {', '.join(tiers)} tier yet", file=sys.stderr)
        raise SystemExit(0)
    exec_program([sys.executable, "-m", "pytest", *pytest_args], inherited())


# Three pytest workers (pytest-xdist) when the whole suite or several tiers run, on two cores: the
# tests wait on processes they start as much as they compute. A whole-stack module runs whole on one
# worker, the real-guest modules one after the other (tests/conftest.py); docs/testing.md, "How long
# it takes". ``-n 0`` runs everything in one process.
PARALLEL = ["-n", "3", "--dist", "loadgroup"]


def tier_selection(args: list[str], root: Path) -> tuple[list[str], list[str] | None]:
    """(the tiers ``args`` name, pytest's arguments: the tiers' folders under ``root``/tests that exist,
    then the other arguments; None when tiers were named and none has a folder). The whole suite, or
    more than one tier, runs on ``PARALLEL``'s workers unless the arguments choose (``-n``)."""
    flags = {f"--{t}" for t in TEST_TIERS}
    tiers = [t for t in TEST_TIERS if f"--{t}" in args]
    paths = [f"tests/{t}" for t in tiers if (root / "tests" / t).is_dir()]
    if tiers and not paths:
        return tiers, None
    rest = [a for a in args if a not in flags]
    chosen = any(a == "-n" or a.startswith(("-n", "--numprocesses", "--dist")) for a in rest)
    named = any(a.startswith("tests") or "::" in a or a.endswith(".py") for a in rest)  # run as asked
    parallel = PARALLEL if len(paths) != 1 and not chosen and not named else []
    return tiers, [*paths, *parallel, *rest]


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
    run.add_argument(
        "--nats-port",
        type=int,
        default=None,
        help="client port of the embedded JetStream server (default: a free port)",
    )
    run.add_argument("--api-bind", help="API address (STRATUS_API_BIND, default 127.0.0.1:8774)")
    run.add_argument("--api-workers", type=int, help="gunicorn workers (STRATUS_API_WORKERS)")
    run.add_argument("--api-threads", type=int, help="threads per API worker (STRATUS_API_THREADS)")
    run.add_argument("--host-name", help="the hypervisor worker's host name (STRATUS_HOST_NAME)")
    run.add_argument("--libvirt-uri", help="the hypervisor worker's libvirt URI (STRATUS_LIBVIRT_URI)")
    run.add_argument(
        "--hosts",
        type=int,
        default=None,
        dest="simulated_hosts",
        help="simulated compute hosts (32 vCPUs, 128 GiB each) beside compute-1, for room "
        "(STRATUS_SIMULATED_HOSTS, default 0)",
    )
    run.add_argument(
        "--grace",
        type=float,
        default=10.0,
        help="seconds each part has to stop before it is killed (default 10)",
    )

    api = add("api", _cmd_api, "the Compute API under gunicorn")
    api.add_argument("--api-bind", help="address to listen on (STRATUS_API_BIND)")
    api.add_argument("--api-workers", type=int, help="gunicorn workers (STRATUS_API_WORKERS)")
    api.add_argument("--api-threads", type=int, help="threads per API worker (STRATUS_API_THREADS)")
    projector = add("projector", _cmd_projector, "the projection runner: keeps the read models up to date")
    projector.add_argument("--batch-size", type=int, help="log entries per transaction (default 500)")
    rebuild = add("rebuild", _cmd_rebuild, "rebuild the read models from the log, then swap them in")
    rebuild.add_argument("--batch-size", type=int, help="log entries per transaction (default 2000)")
    rebuild.add_argument(
        "--keep-old",
        action="store_true",
        help="keep the replaced tables (schema stratus_rm_old) after the swap",
    )
    add("scheduler", _cmd_scheduler, "the scheduler: places requested instances on hosts")
    add(
        "bootstrap",
        _cmd_bootstrap,
        f"seed identity: roles, the admin project and user; the password from {ADMIN_PASSWORD_ENV} "
        "or generated and printed once",
    )
    hv = add("hypervisor", _cmd_hypervisor, "the hypervisor worker for one compute host")
    hv.add_argument("--host-name", help="this compute host's name (STRATUS_HOST_NAME)")
    hv.add_argument("--libvirt-uri", help="libvirt connection URI (STRATUS_LIBVIRT_URI)")
    hv.add_argument(
        "--heartbeat-interval",
        type=float,
        dest="heartbeat_interval_seconds",
        help="seconds between heartbeats (STRATUS_HEARTBEAT_INTERVAL, default 10)",
    )
    hv.add_argument(
        "--reconcile-interval",
        type=float,
        dest="reconcile_interval_seconds",
        help="seconds between reconciliations, 0: never (STRATUS_RECONCILE_INTERVAL, 30)",
    )
    hv.add_argument(
        "--shutdown-timeout",
        type=float,
        dest="shutdown_timeout_seconds",
        help="seconds a guest has to power off on ACPI shutdown (STRATUS_SHUTDOWN_TIMEOUT, 60)",
    )
    hv.add_argument(
        "--concurrency",
        type=int,
        dest="host_concurrency",
        help="servers worked on at once, each one step at a time (STRATUS_HOST_CONCURRENCY, 10)",
    )

    sim = add(
        "simulate", _cmd_simulate, "many simulated compute hosts (libvirt's test driver) in one process"
    )
    sim.add_argument("--hosts", type=int, default=100, help="how many hosts (default 100)")
    sim.add_argument("--vcpus", type=int, default=32, help="CPUs per host (default 32)")
    sim.add_argument("--memory-mb", type=int, default=131072, help="memory per host (default 131072)")
    sim.add_argument("--disk-gb", type=int, default=2000, help="disk per host (default 2000)")
    sim.add_argument("--threads", type=int, default=8, help="threads serving the hosts (default 8)")
    sim.add_argument("--prefix", default="sim", help="host names: <prefix>-00001 ... (default sim)")

    nats = add("nats", _cmd_nats, "the pinned JetStream server, in the foreground")
    nats.add_argument("--config", type=Path, help="a nats-server configuration file (clusters)")
    nats.add_argument(
        "--address",
        default="127.0.0.1",
        help="client address (default 127.0.0.1; a wider one wants --config with auth)",
    )
    nats.add_argument("--port", type=int, default=4222, help="client port (default 4222)")
    nats.add_argument("--monitor-port", type=int, default=None, help="HTTP monitoring port")
    nats.add_argument("--store-dir", help="JetStream storage (default <data dir>/nats)")
    nats.add_argument("extra", nargs=argparse.REMAINDER, help="further nats-server options, after --")

    audit.add_parser(sub, common, _cmd_audit)
    sub.add_parser(
        "conformance", add_help=False,
        help="tempest's API tests against a stack of its own (further arguments: --help)",
    )  # fmt: skip
    quarantine = add(
        "quarantine",
        _cmd_quarantine,
        "events the parts following the log quarantined (skipped): see docs/operations.md",
    )
    quarantine.add_argument("action", choices=["list"], help="list: every record, oldest first")
    quarantine.add_argument(
        "--part",
        help="only this part's (projector, notifier, scheduler, host-feed, hypervisor-<host>, rebuild)",
    )
    quarantine.add_argument("--json", action="store_true", help="one JSON object per line")
    trust = add(
        "trust", _cmd_trust, "NATS identities, their keys and the signing cut-over: see docs/trust.md"
    )
    trust.add_argument("action", choices=["init", "show", "rotate", "cut-over", "exclude"])
    trust.add_argument(
        "name",
        nargs="?",
        help="rotate: the identity (api, scheduler, host:<name>, ...); exclude: the refused event's position",
    )
    trust.add_argument("--reason", default="", help="exclude: why (recorded with the exclusion)")
    trust.add_argument("--dir", type=Path, help="the registry's directory (default <data dir>/trust)")
    trust.add_argument("--host", action="append", default=[], help="init: a compute host (repeatable)")
    add("notifier", _cmd_notifier, "publishes Nova-compatible versioned notifications projected from the log")
    watch = add("watch", _cmd_watch, "the event stream over HTTP (server-sent events), threaded")
    watch.add_argument(
        "--bind", dest="watch_bind", help="address to listen on (STRATUS_WATCH_BIND, default 127.0.0.1:8775)"
    )
    watch.add_argument(
        "--threads",
        type=int,
        dest="watch_threads",
        help="open streams at most (STRATUS_WATCH_THREADS, default 64)",
    )

    metadata = add("metadata", _cmd_metadata, "the metadata service guests read at 169.254.169.254")
    metadata.add_argument(
        "--bind",
        dest="metadata_bind",
        help="address to listen on (STRATUS_METADATA_BIND; 127.0.0.1:8780, the API port + 2 under run)",
    )

    serialproxy = add("serialproxy", _cmd_serialproxy, "serial console proxy: websockets to serial ports")
    serialproxy.add_argument(
        "--bind", dest="serialproxy_bind", help="where to listen (STRATUS_SERIALPROXY_BIND, 127.0.0.1:6083)"
    )
    novncproxy = add("novncproxy", _cmd_novncproxy, "the noVNC console proxy (websocket to a VNC display)")
    novncproxy.add_argument(
        "--bind", dest="novncproxy_bind", help="where to listen (STRATUS_NOVNCPROXY_BIND, 127.0.0.1:6080)"
    )

    metadata_proxy = add(
        "metadata-proxy",
        _cmd_metadata_proxy,
        "one guest connection on stdin/stdout, relayed signed to the metadata service (QEMU's guestfwd)",
    )
    metadata_proxy.add_argument("--instance-id", required=True, help="the server the connection is from")
    metadata_proxy.add_argument("--project-id", required=True, help="the server's project")
    metadata_proxy.add_argument("--service", help="the metadata service's host:port (STRATUS_METADATA_BIND)")

    # Handled in main() before parsing; listed here for --help.
    sub.add_parser("test", help="run the test suite (further arguments go to pytest)", add_help=False)
    return parser


if __name__ == "__main__":
    sys.exit(main())
