"""Settings for every Stratus process, read once from the environment by a composition root.

Each process receives a ``Settings`` object; nothing reads ``os.environ`` elsewhere (the entry points
in ``processes/`` only copy it into the environment of the processes they start).
tests/unit/test_settings_reader.py holds every module to that.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

# The first run's admin password: read by ``stratus run`` and ``stratus bootstrap`` for the seeding,
# never passed on to the parts (``Settings.to_env`` leaves it out).
ADMIN_PASSWORD_ENV = "STRATUS_ADMIN_PASSWORD"
# Where ``stratus run`` finds the log's servers; without it, it starts its own.
NATS_URL_ENV = "STRATUS_NATS_URL"
# prometheus_client's own variable: set, it puts every metric of the process in multiprocess mode.
# ``stratus api`` sets it for gunicorn's workers alone (``Settings.metrics_multiproc_dir``).
MULTIPROC_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
# The scheduler's largest batch: 400 placements are 800 events, within JetStream's 1000-message
# atomic append.
SCHEDULER_MAX_BATCH = 400
# The event store's per-aggregate heads a process keeps (the last sequence and version seen of each
# aggregate: the next append's expected sequence, and where a cached copy catches up from), sized by
# the part's aggregate cache: each cached aggregate's head and as many more, of aggregates read or
# appended to lately, at least HEADS_AT_LEAST. A head no longer kept costs the next append to that
# aggregate one refused attempt and a read (recorder._resolve), never a wrong decision.
HEADS_PER_CACHED = 2
HEADS_AT_LEAST = 1000


def recorder_heads(aggregate_cache: int) -> int:
    """The most per-aggregate heads a part whose aggregate cache is ``aggregate_cache`` keeps."""
    return max(HEADS_PER_CACHED * aggregate_cache, HEADS_AT_LEAST)


@dataclass(frozen=True)
class Settings:
    """One process's configuration: every setting of docs/operations.md, with its default."""

    # NATS JetStream: comma-separated server URLs; the stream holding the log and its subject prefix.
    nats_urls: tuple[str, ...] = ("nats://127.0.0.1:4222",)
    stream: str = "STRATUS"
    subject_prefix: str = "stratus.ev"
    stream_replicas: int = 1
    # PostgreSQL for the read models; None means "start an embedded server under data_dir".
    database_url: str | None = None
    data_dir: Path = field(default_factory=lambda: Path(".stratus"))
    # The API.
    api_bind: str = "127.0.0.1:8774"
    api_workers: int = 1
    # Threads per API worker (gunicorn's threaded worker above 1): concurrent creates in one project
    # are then decided and appended together (commands.group_commit).
    api_threads: int = 16
    # How long a read waits for the read model to reach a requested position.
    read_wait_seconds: float = 5.0
    # The hypervisor worker.
    libvirt_uri: str = "test:///default"
    host_name: str = "compute-1"
    # A host whose hypervisor worker has not sent a heartbeat for this long is shown down (Nova's
    # service_down_time); how often the worker beats; how often it reconciles the hypervisor with
    # the log (0: only on libvirt's lifecycle events); how long a guest gets to power off after an
    # ACPI shutdown before it is destroyed (Nova's shutdown_timeout).
    host_down_after_seconds: float = 60.0
    heartbeat_interval_seconds: float = 10.0
    reconcile_interval_seconds: float = 30.0
    shutdown_timeout_seconds: float = 60.0
    # How many servers one hypervisor worker works on at once (Nova's max_concurrent_builds; the
    # steps of one server always run one at a time).
    host_concurrency: int = 10
    # Identifies this deployment in CloudEvents' `source`.
    cloud_name: str = "stratus"
    # The fixed network servers get an address on (CIDR; empty: servers get no address), and its name.
    fixed_network: str = "10.0.0.0/24"
    fixed_network_name: str = "private"
    # Identity: how long a token lives, and the file holding the key that signs tokens (every API
    # node needs the same one; None means <data_dir>/token.key, created on first use).
    token_ttl_seconds: int = 3600
    token_key_file: Path | None = None
    # The cost of a password (and application credential secret) hash: argon2id's memory in KiB and
    # its passes (RFC 9106's low-memory profile, the default; Keystone's password_hash_rounds). A
    # hash of other parameters is replaced at the user's next login.
    password_hash_memory_kib: int = 65536
    password_hash_iterations: int = 3
    # The image service's per-project limits (Glance's image_count_total, and image_size_total in
    # MiB; -1: unlimited).
    image_count_total: int = 100
    image_size_total_mb: int = 10240
    # The event stream (``stratus watch``): open streams at most per user and in all.
    watch_max_streams_per_user: int = 4
    watch_max_streams: int = 60
    # ``stratus watch``'s address (None: 127.0.0.1:8775 alone, the API's port + 1 under ``stratus run``)
    # and gunicorn's threads there (the app caps its streams under that pool).
    watch_bind: str | None = None
    watch_threads: int = 64
    # Where the dashboard's page reads the event stream ("": the watch's port on the host the browser
    # asked for; a path such as /v2.1/stratus/events when one proxy fronts the API and the watch).
    dashboard_events_url: str = ""
    # The scheduler: ``i/n`` of n schedulers, this one ranks the i-th n-th of the hosts first ("":
    # every host); the most requests placed in one pass; seconds before the requests a dead
    # scheduler took go to another; the weighers' multipliers (Nova's ``*_weight_multiplier``).
    scheduler_shard: str = ""
    scheduler_batch: int = SCHEDULER_MAX_BATCH
    scheduler_ack_wait_seconds: float = 60.0
    ram_weight_multiplier: float = 1.0
    cpu_weight_multiplier: float = 1.0
    disk_weight_multiplier: float = 1.0
    # ``stratus run``: simulated hosts beside the one on libvirt.
    simulated_hosts: int = 0
    # ``stratus run``: a part that dies is started again after a backoff (doubling with each recent
    # death, up to the maximum); one that dies this many times within the window is a crash loop,
    # which stops the whole group (1: the first death stops it).
    restart_backoff_seconds: float = 1.0
    restart_backoff_max_seconds: float = 30.0
    crash_loop_deaths: int = 5
    crash_loop_window_seconds: float = 60.0
    # ``stratus run``: whether the log's servers were named (STRATUS_NATS_URL or ``--nats-url``);
    # if not, ``run`` starts its own JetStream server.
    nats_urls_given: bool = field(default=False, compare=False)
    # Trust on the log (docs/trust.md): this part's NKey seed, with which it connects to NATS and
    # signs what it appends (None: no credentials, nothing signed), and the deployment's registry of
    # identities that the projector checks every event's signer against (None: not checked).
    nats_seed_file: Path | None = None
    trust_registry: Path | None = None
    # The metadata service (``stratus metadata``, docs/metadata.md): its address (None: 127.0.0.1:8780
    # alone, the API's port + 2 under ``stratus run``) and gunicorn's threads;
    # the file holding the secret a proxy signs ``X-Instance-ID`` with (Nova's
    # metadata_proxy_shared_secret; None: no proxied request is believed); whether the caller's
    # address names the server ("off", "peer": the connection's, "forwarded": the first of
    # X-Forwarded-For, set by a trusted proxy in front); the domain a guest's hostname ends with
    # (Nova's dhcp_domain, "" for none); the vendordata providers (Nova's names: StaticJSON,
    # DynamicJSON), StaticJSON's file, DynamicJSON's ``name@url`` targets and their timeouts.
    metadata_bind: str | None = None
    metadata_threads: int = 8
    metadata_proxy_key_file: Path | None = None
    metadata_source_address: str = "off"
    metadata_dhcp_domain: str = "novalocal"
    # The network a hypervisor worker gives its guests to reach the metadata service
    # (``workers.guest_network``): "off", or "user" (QEMU's user-mode network with a forward of
    # 169.254.169.254:80 to ``stratus metadata-proxy``; real QEMU hosts only).
    metadata_guest_network: str = "off"
    vendordata_providers: tuple[str, ...] = ("StaticJSON",)
    vendordata_jsonfile_path: Path | None = None
    vendordata_dynamic_targets: tuple[str, ...] = ()
    vendordata_dynamic_connect_timeout: float = 5.0
    vendordata_dynamic_read_timeout: float = 5.0
    # The consoles (docs/consoles.md): how long a console token may wait for its one use (Nova's
    # [consoleauth] token_ttl); the URLs the API answers (Nova's [serial_console] base_url and
    # [vnc] novncproxy_base_url, the token appended); where ``stratus serialproxy`` and
    # ``stratus novncproxy`` listen; the host names a browser's Origin may carry (Nova's
    # [console] allowed_origins; the base URLs' hosts are always allowed).
    console_token_ttl_seconds: float = 600.0
    serialproxy_base_url: str = "ws://127.0.0.1:6083/"
    novncproxy_base_url: str = "http://127.0.0.1:6080/vnc_lite.html"
    serialproxy_bind: str = "127.0.0.1:6083"
    novncproxy_bind: str = "127.0.0.1:6080"
    console_allowed_origins: tuple[str, ...] = ()
    # noVNC's web files, which ``stratus novncproxy`` serves beside its websocket (Debian's ``novnc``
    # package; none there: the proxy serves the websocket only).
    novnc_web: Path = Path("/usr/share/novnc")
    # Telemetry (docs/operations.md, "Health and metrics"): the log lines' format ("text", or "json":
    # one JSON object a line with the request, correlation and causation ids; the systemd units' choice);
    # where the parts without HTTP answer /healthz, /readyz and /metrics ("": nowhere; port 0: any);
    # how many log positions the read models may lag behind the head and still be ready; and the
    # directory where the API's gunicorn workers keep their metrics (prometheus_client's multiprocess
    # mode, PROMETHEUS_MULTIPROC_DIR; None: <data_dir>/metrics/api-<port>, set by ``stratus api``).
    log_format: str = "text"
    projector_metrics_bind: str = "127.0.0.1:9181"
    scheduler_metrics_bind: str = "127.0.0.1:9182"
    hypervisor_metrics_bind: str = "127.0.0.1:9183"
    notifier_metrics_bind: str = "127.0.0.1:9184"
    # the metadata service's probes: on an address of their own, since guests call its port
    metadata_metrics_bind: str = "127.0.0.1:9185"
    ready_max_lag: int = 1000
    # How many aggregates each part keeps after loading or appending them (eventsourcing's aggregate
    # cache, least recently used out first; 0: none kept). A cached aggregate is caught up with one
    # read of its new events instead of loaded (its snapshot and the events after), and a command's
    # first decision may start from it; each costs memory for as long as it stays (an ACTIVE server
    # ~6 KiB: docs/performance.md, "Memory"). Sized by measurement for what each part works on: the
    # API, the servers and projects being acted on; the scheduler, its hosts and the servers it places
    # one by one; a hypervisor worker (and ``stratus simulate``), its servers.
    api_aggregate_cache: int = 1000
    scheduler_aggregate_cache: int = 1000
    hypervisor_aggregate_cache: int = 500
    metrics_multiproc_dir: Path | None = field(default=None, compare=False)  # never in to_env
    # A directory: each API worker and worker process traces its allocations (tracemalloc) and
    # writes a snapshot there on SIGUSR2 (processes/memtrace.py); None (the default): no tracing.
    memory_trace_dir: Path | None = None
    # The seeded admin's password (STRATUS_ADMIN_PASSWORD; None: generated on the first run). A secret
    # for the seeding only: never in ``to_env``, never printed.
    admin_password: str | None = field(default=None, compare=False, repr=False)

    @property
    def token_key_path(self) -> Path:
        return self.token_key_file if self.token_key_file is not None else self.data_dir / "token.key"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        e = os.environ if env is None else env
        d = cls()
        return cls(
            nats_urls=tuple(
                u.strip() for u in e.get(NATS_URL_ENV, ",".join(d.nats_urls)).split(",") if u.strip()
            ),
            stream=e.get("STRATUS_STREAM", d.stream),
            subject_prefix=e.get("STRATUS_SUBJECT_PREFIX", d.subject_prefix),
            stream_replicas=int(e.get("STRATUS_STREAM_REPLICAS", d.stream_replicas)),
            database_url=e.get("DATABASE_URL") or None,
            data_dir=Path(e.get("STRATUS_DATA_DIR", str(d.data_dir))),
            api_bind=e.get("STRATUS_API_BIND", d.api_bind),
            api_workers=int(e.get("STRATUS_API_WORKERS", d.api_workers)),
            api_threads=int(e.get("STRATUS_API_THREADS", d.api_threads)),
            read_wait_seconds=float(e.get("STRATUS_READ_WAIT_SECONDS", d.read_wait_seconds)),
            libvirt_uri=e.get("STRATUS_LIBVIRT_URI", d.libvirt_uri),
            host_name=e.get("STRATUS_HOST_NAME", d.host_name),
            host_down_after_seconds=_seconds(e, "HOST_DOWN_AFTER", d.host_down_after_seconds),
            heartbeat_interval_seconds=_seconds(e, "HEARTBEAT_INTERVAL", d.heartbeat_interval_seconds),
            reconcile_interval_seconds=_seconds(e, "RECONCILE_INTERVAL", d.reconcile_interval_seconds),
            shutdown_timeout_seconds=_seconds(e, "SHUTDOWN_TIMEOUT", d.shutdown_timeout_seconds),
            host_concurrency=_at_least_one(e, "HOST_CONCURRENCY", d.host_concurrency),
            cloud_name=e.get("STRATUS_CLOUD_NAME", d.cloud_name),
            fixed_network=e.get("STRATUS_FIXED_NETWORK", d.fixed_network).strip(),
            fixed_network_name=e.get("STRATUS_FIXED_NETWORK_NAME", d.fixed_network_name).strip(),
            token_ttl_seconds=int(e.get("STRATUS_TOKEN_TTL_SECONDS", d.token_ttl_seconds)),
            image_count_total=int(e.get("STRATUS_IMAGE_COUNT_TOTAL", d.image_count_total)),
            image_size_total_mb=int(e.get("STRATUS_IMAGE_SIZE_TOTAL_MB", d.image_size_total_mb)),
            watch_max_streams_per_user=int(
                e.get("STRATUS_WATCH_MAX_STREAMS_PER_USER", d.watch_max_streams_per_user)
            ),
            watch_max_streams=int(e.get("STRATUS_WATCH_MAX_STREAMS", d.watch_max_streams)),
            token_key_file=Path(e["STRATUS_TOKEN_KEY_FILE"]) if e.get("STRATUS_TOKEN_KEY_FILE") else None,
            password_hash_memory_kib=int(
                _between(e, "PASSWORD_HASH_MEMORY_KIB", d.password_hash_memory_kib, 32, 4 * 1024 * 1024)
            ),
            password_hash_iterations=int(
                _between(e, "PASSWORD_HASH_ITERATIONS", d.password_hash_iterations, 1, 100)
            ),
            watch_bind=e.get("STRATUS_WATCH_BIND") or None,
            watch_threads=_at_least_one(e, "WATCH_THREADS", d.watch_threads),
            dashboard_events_url=e.get("STRATUS_DASHBOARD_EVENTS_URL", d.dashboard_events_url).strip(),
            scheduler_shard=e.get("STRATUS_SCHEDULER_SHARD", d.scheduler_shard),
            scheduler_batch=int(_between(e, "SCHEDULER_BATCH", d.scheduler_batch, 1, SCHEDULER_MAX_BATCH)),
            scheduler_ack_wait_seconds=_between(
                e, "SCHEDULER_ACK_WAIT", d.scheduler_ack_wait_seconds, 1, 3600
            ),
            ram_weight_multiplier=float(e.get("STRATUS_RAM_WEIGHT_MULTIPLIER", d.ram_weight_multiplier)),
            cpu_weight_multiplier=float(e.get("STRATUS_CPU_WEIGHT_MULTIPLIER", d.cpu_weight_multiplier)),
            disk_weight_multiplier=float(e.get("STRATUS_DISK_WEIGHT_MULTIPLIER", d.disk_weight_multiplier)),
            simulated_hosts=int(e.get("STRATUS_SIMULATED_HOSTS") or d.simulated_hosts),
            restart_backoff_seconds=_seconds(e, "RESTART_BACKOFF", d.restart_backoff_seconds),
            restart_backoff_max_seconds=_seconds(e, "RESTART_BACKOFF_MAX", d.restart_backoff_max_seconds),
            crash_loop_deaths=_at_least_one(e, "CRASH_LOOP_DEATHS", d.crash_loop_deaths),
            crash_loop_window_seconds=_seconds(e, "CRASH_LOOP_WINDOW", d.crash_loop_window_seconds),
            nats_seed_file=_path(e, "STRATUS_NATS_SEED_FILE"),
            trust_registry=_path(e, "STRATUS_TRUST_REGISTRY"),
            metadata_bind=e.get("STRATUS_METADATA_BIND") or None,
            metadata_threads=_at_least_one(e, "METADATA_THREADS", d.metadata_threads),
            metadata_proxy_key_file=_path(e, "STRATUS_METADATA_PROXY_KEY_FILE"),
            metadata_source_address=_one_of(
                e, "METADATA_SOURCE_ADDRESS", d.metadata_source_address, SOURCE_ADDRESS_MODES
            ),
            metadata_dhcp_domain=e.get("STRATUS_METADATA_DHCP_DOMAIN", d.metadata_dhcp_domain).strip(),
            metadata_guest_network=_one_of(
                e, "METADATA_GUEST_NETWORK", d.metadata_guest_network, GUEST_NETWORK_MODES
            ),
            vendordata_providers=_names(e, "STRATUS_VENDORDATA_PROVIDERS", d.vendordata_providers),
            vendordata_jsonfile_path=_path(e, "STRATUS_VENDORDATA_JSONFILE_PATH"),
            vendordata_dynamic_targets=_names(
                e, "STRATUS_VENDORDATA_DYNAMIC_TARGETS", d.vendordata_dynamic_targets
            ),
            vendordata_dynamic_connect_timeout=_seconds(
                e, "VENDORDATA_DYNAMIC_CONNECT_TIMEOUT", d.vendordata_dynamic_connect_timeout
            ),
            vendordata_dynamic_read_timeout=_seconds(
                e, "VENDORDATA_DYNAMIC_READ_TIMEOUT", d.vendordata_dynamic_read_timeout
            ),
            console_token_ttl_seconds=_seconds(e, "CONSOLE_TOKEN_TTL_SECONDS", d.console_token_ttl_seconds),
            serialproxy_base_url=e.get("STRATUS_SERIALPROXY_BASE_URL", d.serialproxy_base_url).strip(),
            novncproxy_base_url=e.get("STRATUS_NOVNCPROXY_BASE_URL", d.novncproxy_base_url).strip(),
            serialproxy_bind=e.get("STRATUS_SERIALPROXY_BIND", d.serialproxy_bind).strip(),
            novncproxy_bind=e.get("STRATUS_NOVNCPROXY_BIND", d.novncproxy_bind).strip(),
            console_allowed_origins=_names(e, "STRATUS_CONSOLE_ALLOWED_ORIGINS", d.console_allowed_origins),
            novnc_web=_path(e, "STRATUS_NOVNC_WEB") or d.novnc_web,
            log_format=_one_of(e, "LOG_FORMAT", d.log_format, LOG_FORMATS),
            projector_metrics_bind=e.get("STRATUS_PROJECTOR_METRICS_BIND", d.projector_metrics_bind).strip(),
            scheduler_metrics_bind=e.get("STRATUS_SCHEDULER_METRICS_BIND", d.scheduler_metrics_bind).strip(),
            hypervisor_metrics_bind=e.get(
                "STRATUS_HYPERVISOR_METRICS_BIND", d.hypervisor_metrics_bind
            ).strip(),
            notifier_metrics_bind=e.get("STRATUS_NOTIFIER_METRICS_BIND", d.notifier_metrics_bind).strip(),
            metadata_metrics_bind=e.get("STRATUS_METADATA_METRICS_BIND", d.metadata_metrics_bind).strip(),
            ready_max_lag=int(_between(e, "READY_MAX_LAG", d.ready_max_lag, 0, 10**12)),
            api_aggregate_cache=_count(e, "API_AGGREGATE_CACHE", d.api_aggregate_cache),
            scheduler_aggregate_cache=_count(e, "SCHEDULER_AGGREGATE_CACHE", d.scheduler_aggregate_cache),
            hypervisor_aggregate_cache=_count(e, "HYPERVISOR_AGGREGATE_CACHE", d.hypervisor_aggregate_cache),
            metrics_multiproc_dir=_path(e, MULTIPROC_DIR_ENV),
            memory_trace_dir=_path(e, "STRATUS_MEMORY_TRACE_DIR"),
            nats_urls_given=NATS_URL_ENV in e,
            admin_password=e.get(ADMIN_PASSWORD_ENV) or None,
        )

    def to_env(self) -> dict[str, str]:
        """The environment that reproduces these settings in a child process."""
        env = {
            NATS_URL_ENV: ",".join(self.nats_urls),
            "STRATUS_STREAM": self.stream,
            "STRATUS_SUBJECT_PREFIX": self.subject_prefix,
            "STRATUS_STREAM_REPLICAS": str(self.stream_replicas),
            "STRATUS_DATA_DIR": str(self.data_dir),
            "STRATUS_API_BIND": self.api_bind,
            "STRATUS_API_WORKERS": str(self.api_workers),
            "STRATUS_API_THREADS": str(self.api_threads),
            "STRATUS_READ_WAIT_SECONDS": str(self.read_wait_seconds),
            "STRATUS_LIBVIRT_URI": self.libvirt_uri,
            "STRATUS_HOST_NAME": self.host_name,
            "STRATUS_HOST_DOWN_AFTER": str(self.host_down_after_seconds),
            "STRATUS_HEARTBEAT_INTERVAL": str(self.heartbeat_interval_seconds),
            "STRATUS_RECONCILE_INTERVAL": str(self.reconcile_interval_seconds),
            "STRATUS_SHUTDOWN_TIMEOUT": str(self.shutdown_timeout_seconds),
            "STRATUS_HOST_CONCURRENCY": str(self.host_concurrency),
            "STRATUS_CLOUD_NAME": self.cloud_name,
            "STRATUS_FIXED_NETWORK": self.fixed_network,
            "STRATUS_FIXED_NETWORK_NAME": self.fixed_network_name,
            "STRATUS_TOKEN_TTL_SECONDS": str(self.token_ttl_seconds),
            "STRATUS_PASSWORD_HASH_MEMORY_KIB": str(self.password_hash_memory_kib),
            "STRATUS_PASSWORD_HASH_ITERATIONS": str(self.password_hash_iterations),
            "STRATUS_IMAGE_COUNT_TOTAL": str(self.image_count_total),
            "STRATUS_IMAGE_SIZE_TOTAL_MB": str(self.image_size_total_mb),
            "STRATUS_WATCH_MAX_STREAMS_PER_USER": str(self.watch_max_streams_per_user),
            "STRATUS_WATCH_MAX_STREAMS": str(self.watch_max_streams),
            "STRATUS_WATCH_THREADS": str(self.watch_threads),
            "STRATUS_DASHBOARD_EVENTS_URL": self.dashboard_events_url,
            "STRATUS_SCHEDULER_SHARD": self.scheduler_shard,
            "STRATUS_SCHEDULER_BATCH": str(self.scheduler_batch),
            "STRATUS_SCHEDULER_ACK_WAIT": str(self.scheduler_ack_wait_seconds),
            "STRATUS_RAM_WEIGHT_MULTIPLIER": str(self.ram_weight_multiplier),
            "STRATUS_CPU_WEIGHT_MULTIPLIER": str(self.cpu_weight_multiplier),
            "STRATUS_DISK_WEIGHT_MULTIPLIER": str(self.disk_weight_multiplier),
            "STRATUS_SIMULATED_HOSTS": str(self.simulated_hosts),
            "STRATUS_RESTART_BACKOFF": str(self.restart_backoff_seconds),
            "STRATUS_RESTART_BACKOFF_MAX": str(self.restart_backoff_max_seconds),
            "STRATUS_CRASH_LOOP_DEATHS": str(self.crash_loop_deaths),
            "STRATUS_CRASH_LOOP_WINDOW": str(self.crash_loop_window_seconds),
            "STRATUS_METADATA_THREADS": str(self.metadata_threads),
            "STRATUS_METADATA_SOURCE_ADDRESS": self.metadata_source_address,
            "STRATUS_METADATA_DHCP_DOMAIN": self.metadata_dhcp_domain,
            "STRATUS_METADATA_GUEST_NETWORK": self.metadata_guest_network,
            "STRATUS_VENDORDATA_PROVIDERS": ",".join(self.vendordata_providers),
            "STRATUS_VENDORDATA_DYNAMIC_TARGETS": ",".join(self.vendordata_dynamic_targets),
            "STRATUS_VENDORDATA_DYNAMIC_CONNECT_TIMEOUT": str(self.vendordata_dynamic_connect_timeout),
            "STRATUS_VENDORDATA_DYNAMIC_READ_TIMEOUT": str(self.vendordata_dynamic_read_timeout),
            "STRATUS_CONSOLE_TOKEN_TTL_SECONDS": str(self.console_token_ttl_seconds),
            "STRATUS_SERIALPROXY_BASE_URL": self.serialproxy_base_url,
            "STRATUS_NOVNCPROXY_BASE_URL": self.novncproxy_base_url,
            "STRATUS_SERIALPROXY_BIND": self.serialproxy_bind,
            "STRATUS_NOVNCPROXY_BIND": self.novncproxy_bind,
            "STRATUS_CONSOLE_ALLOWED_ORIGINS": ",".join(self.console_allowed_origins),
            "STRATUS_NOVNC_WEB": str(self.novnc_web),
            "STRATUS_LOG_FORMAT": self.log_format,
            "STRATUS_PROJECTOR_METRICS_BIND": self.projector_metrics_bind,
            "STRATUS_SCHEDULER_METRICS_BIND": self.scheduler_metrics_bind,
            "STRATUS_HYPERVISOR_METRICS_BIND": self.hypervisor_metrics_bind,
            "STRATUS_NOTIFIER_METRICS_BIND": self.notifier_metrics_bind,
            "STRATUS_METADATA_METRICS_BIND": self.metadata_metrics_bind,
            "STRATUS_READY_MAX_LAG": str(self.ready_max_lag),
            "STRATUS_API_AGGREGATE_CACHE": str(self.api_aggregate_cache),
            "STRATUS_SCHEDULER_AGGREGATE_CACHE": str(self.scheduler_aggregate_cache),
            "STRATUS_HYPERVISOR_AGGREGATE_CACHE": str(self.hypervisor_aggregate_cache),
        }
        if self.watch_bind is not None:
            env["STRATUS_WATCH_BIND"] = self.watch_bind
        if self.token_key_file is not None:
            env["STRATUS_TOKEN_KEY_FILE"] = str(self.token_key_file)
        if self.database_url:
            env["DATABASE_URL"] = self.database_url
        if self.nats_seed_file is not None:
            env["STRATUS_NATS_SEED_FILE"] = str(self.nats_seed_file)
        if self.memory_trace_dir is not None:
            env["STRATUS_MEMORY_TRACE_DIR"] = str(self.memory_trace_dir)
        if self.trust_registry is not None:
            env["STRATUS_TRUST_REGISTRY"] = str(self.trust_registry)
        if self.metadata_bind is not None:
            env["STRATUS_METADATA_BIND"] = self.metadata_bind
        if self.metadata_proxy_key_file is not None:
            env["STRATUS_METADATA_PROXY_KEY_FILE"] = str(self.metadata_proxy_key_file)
        if self.vendordata_jsonfile_path is not None:
            env["STRATUS_VENDORDATA_JSONFILE_PATH"] = str(self.vendordata_jsonfile_path)
        return env


_N = TypeVar("_N", int, float)
# How the metadata service may tell a guest by its address (``Settings.metadata_source_address``).
SOURCE_ADDRESS_MODES = ("off", "peer", "forwarded")
# The log lines' formats (``Settings.log_format``).
LOG_FORMATS = ("text", "json")
# The network a hypervisor worker gives its guests (``Settings.metadata_guest_network``).
GUEST_NETWORK_MODES = ("off", "user")


def _names(env: Mapping[str, str], name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    """A comma-separated list (blanks dropped); ``default`` where unset."""
    text = env.get(name)
    if text is None:
        return default
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _one_of(env: Mapping[str, str], setting: str, default: str, choices: tuple[str, ...]) -> str:
    """``STRATUS_<setting>``, one of ``choices``, or an error naming it."""
    value = env.get(f"STRATUS_{setting}", "").strip() or default
    if value not in choices:
        raise ValueError(f"STRATUS_{setting} must be one of {', '.join(choices)}, not {value[:40]!r}")
    return value


def _path(env: Mapping[str, str], name: str) -> Path | None:
    """The path ``name`` gives, None where unset or blank."""
    text = env.get(name, "").strip()
    return Path(text) if text else None


def _number(env: Mapping[str, str], setting: str, parse: Callable[[str], _N], what: str) -> _N | None:
    """``STRATUS_<setting>`` parsed as ``what`` says, None where unset or blank, or an error naming it."""
    name = f"STRATUS_{setting}"
    text = env.get(name)
    if text is None or not text.strip():
        return None
    try:
        return parse(text)
    except ValueError:
        raise ValueError(f"{name} must be {what}, not {text[:40]!r}") from None


def _seconds(env: Mapping[str, str], setting: str, default: float) -> float:
    """``STRATUS_<setting>``, a duration: a non-negative number of seconds, or an error naming it."""
    value = _number(env, setting, float, "a number of seconds")
    if value is None:
        return default
    if value < 0:
        raise ValueError(f"STRATUS_{setting} must not be negative")
    return value


def _whole(env: Mapping[str, str], setting: str, default: int, least: int) -> int:
    """``STRATUS_<setting>``, a whole number of at least ``least``, or an error naming it."""
    value = _number(env, setting, int, "a whole number")
    if value is None:
        return default
    if value < least:
        bound = "not be negative" if least == 0 else f"be at least {least}"
        raise ValueError(f"STRATUS_{setting} must {bound}")
    return value


def _at_least_one(env: Mapping[str, str], setting: str, default: int) -> int:
    """``STRATUS_<setting>``, a count of at least 1, or an error naming it."""
    return _whole(env, setting, default, 1)


def _count(env: Mapping[str, str], setting: str, default: int) -> int:
    """``STRATUS_<setting>``, a count (0 or more), or an error naming it."""
    return _whole(env, setting, default, 0)


def _between(env: Mapping[str, str], setting: str, default: float, low: float, high: float) -> float:
    """``STRATUS_<setting>``, a number from ``low`` to ``high``, or an error naming it."""
    name = f"STRATUS_{setting}"
    text = env.get(name, "")
    try:
        value = float(text) if text else default
    except ValueError:
        raise ValueError(f"{name} must be a number, not {text!r}") from None
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low:g} and {high:g}, not {text!r}")
    return value
