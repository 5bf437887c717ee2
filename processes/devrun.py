"""``stratus run``: the whole control plane on one machine, supervised as one group.

JetStream (unless ``STRATUS_NATS_URL`` names servers), PostgreSQL (unless ``DATABASE_URL`` does), the
identity seeding, then the API, the projector, the scheduler, one hypervisor worker on libvirt's test
driver, the notifier, the event stream, the metadata service, the console proxies and, if asked,
simulated hosts: each a ``stratus <part>`` child of ``processes.supervisor.Supervisor``, which
restarts a part that dies (with backoff) and stops the group on a crash loop. Also the housekeeping
of a developer's machine: one ``run`` per data directory, and no JetStream server left over from a
``run`` that was killed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from processes import bootstrap, trust
from processes.spawn import child_env
from processes.supervisor import (
    ChildProcess,
    Part,
    RestartPolicy,
    ServicePart,
    Supervisor,
    http_responding,
)
from stratus import natsserver, postgres
from stratus.config import ADMIN_PASSWORD_ENV, Settings
from workers.simulator import host_names

# The identity each part connects and signs as (processes/trust.py); ``watch`` is the API's; the
# metadata service reads PostgreSQL only and connects to NATS as no one.
PART_IDENTITIES: dict[str, str | None] = {
    "metadata": None,
    "api": "api",
    "watch": "api",
    "projector": "projector",
    "scheduler": "scheduler",
    "notifier": "notifier",
    "simulate": "simulator",
    # the console proxies relay through the hosts' workers as the API does (docs/consoles.md)
    "serialproxy": "api",
    "novncproxy": "api",
}


def run(settings: Settings, *, nats_port: int | None, grace: float) -> int:
    """Start every part, print how to reach them once they are up, and wait for Ctrl-C or a crash loop."""
    data_dir = settings.data_dir.absolute()
    data_dir.mkdir(parents=True, exist_ok=True)
    settings = dataclasses.replace(settings, data_dir=data_dir)
    _run_lock = _lock_data_dir(data_dir)  # held until this process exits
    parts: list[Part] = []

    # JetStream: the pinned server from the wheel, unless the log lives elsewhere. Ours trusts no
    # one: each part connects as its own NKey user, generated once into <data_dir>/trust.
    nats: natsserver.NatsServer | None = None
    trust_dir = data_dir / "trust"
    if not settings.nats_urls_given:
        _stop_leftover_servers(data_dir / "nats")
        simulated = host_names(settings.simulated_hosts) if settings.simulated_hosts > 0 else []
        trust.prepare(settings, trust_dir, hosts=[settings.host_name], simulated=simulated)
        conf = str(trust_dir / trust.NATS_CONF)
        nats = natsserver.NatsServer(store_dir=data_dir / "nats", port=nats_port, extra_args=("-c", conf))
        parts.append(_nats_part(nats))

    # PostgreSQL: DATABASE_URL, or the embedded server under <data_dir>/pg.
    pg: postgres.EmbeddedPostgres | None = None
    if not settings.database_url:
        pg = postgres.EmbeddedPostgres(data_dir / "pg")
        parts.append(_postgres_part(pg))

    watch_bind = settings.watch_bind or _next_port(settings.api_bind)
    metadata_bind = settings.metadata_bind or _next_port(_next_port(settings.api_bind))

    def resolved(identity: str | None = None) -> Settings:
        """The settings of the part connecting as ``identity`` (None: as the run's settings say)."""
        s = dataclasses.replace(settings, watch_bind=watch_bind, metadata_bind=metadata_bind)
        if nats is not None:
            s = dataclasses.replace(s, nats_urls=(nats.url,), trust_registry=trust_dir / trust.REGISTRY)
            if identity is not None:
                s = dataclasses.replace(s, nats_seed_file=trust.seed_file(trust_dir, identity))
        if pg is not None:
            s = dataclasses.replace(s, database_url=pg.url)
        return s

    # Identity: the default roles, the admin project and user, the admin's password (first run).
    seeded: list[bootstrap.Seeded] = []

    def seed() -> None:
        admin = resolved("admin")
        if nats is not None:  # signatures are required from the log's head on (docs/trust.md)
            trust.cut_over(trust_dir, lambda: trust.log_head(admin))
        seeded.append(bootstrap.main(admin, settings.admin_password))

    parts.append(_identity_part(seed))

    output_lock = threading.Lock()
    api_url = f"http://{client_address(settings.api_bind)}/v2.1"
    children: list[tuple[str, str, Callable[[], bool] | None]] = [
        ("api", api_url, http_responding(f"http://{client_address(settings.api_bind)}/")),
        ("projector", _probes("", settings.projector_metrics_bind), None),
        ("scheduler", _probes("", settings.scheduler_metrics_bind), None),
        (
            "hypervisor",
            _probes(f"host {settings.host_name} on {settings.libvirt_uri}", settings.hypervisor_metrics_bind),
            None,
        ),
        (
            "notifier",
            _probes(
                "Nova versioned notifications on versioned_notifications.>", settings.notifier_metrics_bind
            ),
            None,
        ),
        (
            "watch",
            f"http://{client_address(watch_bind)}/v2.1/stratus/events (server-sent events)",
            http_responding(f"http://{client_address(watch_bind)}/"),
        ),
        (
            "metadata",
            _probes(
                f"http://{client_address(metadata_bind)}/ (docs/metadata.md)", settings.metadata_metrics_bind
            ),
            http_responding(f"http://{client_address(metadata_bind)}/"),
        ),
        (
            "serialproxy",
            f"{settings.serialproxy_base_url} (docs/consoles.md)",
            http_responding(f"http://{client_address(settings.serialproxy_bind)}/"),
        ),
        (
            "novncproxy",
            settings.novncproxy_base_url,
            http_responding(f"http://{client_address(settings.novncproxy_bind)}/"),
        ),
    ]
    hosts = settings.simulated_hosts
    commands = {name: [name] for name, _, _ in children}
    if hosts > 0:  # room to run: simulated hosts beside the one on libvirt (docs/operations.md)
        children.append(("simulate", f"{hosts} simulated hosts sim-00001 ...", None))
        commands["simulate"] = ["simulate", "--hosts", str(hosts), "--threads", "4"]
    identities = {**PART_IDENTITIES, "hypervisor": f"host:{settings.host_name}"}
    for name, address, ready in children:
        parts.append(
            ChildProcess(
                name,
                [sys.executable, "-m", "processes.cli", *commands[name]],
                env=lambda identity=identities[name]: child_env(resolved(identity)),  # type: ignore[misc]
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
            sys.stdout.write(banner(started, api_url, generated))
            sys.stdout.flush()

    supervisor = Supervisor(
        parts, grace=grace, settle=2.0, log=sys.stderr, on_ready=on_ready, restart=restart_policy(settings)
    )
    status = supervisor.run()
    print("stratus: stopped." if status == 0 else "stratus: stopped after a failure.", file=sys.stderr)
    return status


def restart_policy(settings: Settings) -> RestartPolicy:
    """A part that dies is restarted with backoff; a crash loop stops the group (docs/operations.md)."""
    return RestartPolicy(
        backoff=settings.restart_backoff_seconds,
        max_backoff=max(settings.restart_backoff_max_seconds, settings.restart_backoff_seconds),
        crash_loop_deaths=settings.crash_loop_deaths,
        crash_loop_window=settings.crash_loop_window_seconds,
    )


def _probes(address: str, bind: str) -> str:
    """A part's address with where it answers /healthz, /readyz and /metrics (docs/operations.md)."""
    if not bind:
        return address
    probes = f"metrics on http://{client_address(bind)}/metrics"
    return f"{address}; {probes}" if address else probes


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


def client_address(bind: str) -> str:
    """Where a client on this machine reaches a server bound to ``bind``."""
    host, _, port = bind.rpartition(":")
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host in ("[::]", "::"):
        host = "[::1]"
    return f"{host}:{port}"


def banner(started: Sequence[Part], api_url: str, generated_password: str | None = None) -> str:
    """What ``stratus run`` prints once every part is up: the addresses, and how to use the cloud."""
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
