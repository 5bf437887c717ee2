"""The hypervisor worker: one per compute host, runs that host's instances on libvirt.

On start it registers the host with the inventory libvirt reports and finishes what a killed run
left under way (``workers.recovery``). It then consumes the events a host acts on
(``workers.steps.EVENTS``: servers scheduled, deletions, power actions, a resize's or migration's steps)
with the durable pull consumer ``hypervisor-<host>`` from ``STRATUS_HOST_CONCURRENCY`` threads, acts
on its own servers (``workers.steps.HostSteps``) and acknowledges the rest. It also answers the API's
questions for this host over core NATS (console output). It reads and appends to the event log
only: it holds no database credentials.

``run`` takes its collaborators; the process's composition root is ``processes/hypervisor.py``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

from eventsourcing.domain import Aggregate

from commands.app import Stratus
from commands.bus import bootstrap
from commands.instance import Instance
from stratus import metrics
from stratus.config import Settings
from stratus.consolerelay import RelayHost
from stratus.context import Actor, CommandContext, acting
from stratus.eventstore import NatsBridge
from stratus.eventstore.signing import Verifier
from stratus.eventstore.subjects import encode_token
from stratus.hostrpc import CONSOLE, Responder
from stratus.imagestore import ImageStore, user_data_store
from stratus.liveness import Heartbeats, beat_periodically, bucket_for
from stratus.metadata.vendordata import Providers
from workers.compute import SCHEDULED, BootImages, Compute
from workers.config_drive import ConfigDrives
from workers.console import answerer
from workers.consoles import opener as console_opener
from workers.consumer import (
    STORE_TEMPORARY,
    Delivery,
    DurableConsumer,
    StoredHeads,
    serve_concurrently,
    when_ready,
)
from workers.guest_network import MetadataNetwork
from workers.migration import ACTING_HOST
from workers.outcome import DONE, Done, Outcome, RetryPolicy
from workers.reconcile import Reconciler, run_periodically
from workers.recovery import recover
from workers.steps import HostSteps, host_of
from workers.steps import subjects as steps_subjects
from workers.virt import BootImage, ConsoleDriver, TemporaryVirtError, VirtDriver, WatchableDriver

log = logging.getLogger(__name__)

HYPERVISOR = Actor(user_id="stratus-hypervisor", project_id="service", roles=("service",))
# A spawn on real QEMU takes seconds; a message is redelivered only if not settled by then.
ACK_WAIT = 120.0
# How often the worker compares the log with what the hypervisor runs (Nova: sync_power_state_interval).
_REGISTER_DELAYS = (1.0, 2.0, 5.0, 10.0)
_REGISTER_TEMPORARY: tuple[type[Exception], ...] = (TemporaryVirtError, *STORE_TEMPORARY)


def durable_name(hostname: str) -> str:
    """The host's own durable consumer: a consumer name may not contain ``.``, ``*``, ``>`` or spaces."""
    return f"hypervisor-{encode_token(hostname)}"


def subjects(settings: Settings) -> list[str]:
    return steps_subjects(settings)


def run(
    settings: Settings,
    *,
    bridge: NatsBridge,
    app: Stratus,
    driver: VirtDriver,
    stop: threading.Event,
    instances_path: Path | None = None,
    boot_image: Callable[[Instance], BootImage | None] | None = None,
    retry: RetryPolicy | None = None,
    poll: float = 1.0,
) -> None:
    """Register the host, then serve its instances until ``stop`` is set; every
    ``settings.reconcile_interval_seconds`` (0: never) compare the log with what the hypervisor runs,
    and say "alive" every ``settings.heartbeat_interval_seconds``."""
    reconcile_interval = settings.reconcile_interval_seconds
    host = settings.host_name
    instances_path = instances_path or settings.data_dir / "instances" / encode_token(host)
    bus = bootstrap(app)
    boot = boot_image or BootImages(bus, ImageStore(settings.data_dir / "images"))
    drives = ConfigDrives(
        bus,
        instances_path=instances_path,
        user_data=user_data_store(settings.data_dir),
        providers=Providers.configured(settings),
        dhcp_domain=settings.metadata_dhcp_domain,
        fixed_cidr=settings.fixed_network,
    )
    steps = HostSteps(
        bus,
        driver,
        host,
        instances_path=instances_path,
        boot_image=boot,
        retry=retry,
        config_drives=drives,
        metadata_network=MetadataNetwork.configured(settings),
    )
    compute = steps.compute
    if not _register(compute, stop):
        return
    with acting(CommandContext(actor=HYPERVISOR)):
        recover(bus, host, steps, marks=instances_path)  # what a killed run left under way
    responder = Responder(bridge, host)
    responder.serve(CONSOLE, answerer(instances_path))
    consoles = RelayHost(bridge, host, console_opener(driver)) if isinstance(driver, ConsoleDriver) else None
    if consoles is not None:
        consoles.serve()  # the serial and VNC consoles, for the console proxies (docs/consoles.md)
    wake = threading.Event()
    if isinstance(driver, WatchableDriver):
        driver.watch(lambda _uuid: wake.set())  # a guest changed: reconcile now, not in 30 s
    reconciling = (
        run_periodically(Reconciler(bus, driver, host), stop, reconcile_interval, HYPERVISOR, wake)
        if reconcile_interval > 0
        else None
    )
    heartbeats = Heartbeats(bridge, bucket=bucket_for(settings.stream), replicas=settings.stream_replicas)
    interval = settings.heartbeat_interval_seconds
    beating = beat_periodically(lambda: heartbeats.beat(host), host, stop, interval)
    filters = subjects(settings)
    heads = app.recorder if isinstance(app.recorder, StoredHeads) else None
    trust = Verifier.load(settings.trust_registry)  # a step is acted on only if its signer may append it

    def open_consumer() -> DurableConsumer | None:
        durable = durable_name(host)
        consumer = DurableConsumer(
            bridge,
            stream=settings.stream,
            durable=durable,
            filter_subjects=filters,
            ack_wait=ACK_WAIT,
            heads=heads,
            trust=trust,
        )
        return when_ready(f"opening consumer {durable}", consumer.open, stop)

    def elsewhere(agg: Aggregate) -> bool:
        return isinstance(agg, Instance) and agg.host != host

    def handle(d: Delivery) -> Outcome:
        if d.event_type in (SCHEDULED, *ACTING_HOST) and host_of(d, bus) != host:
            return DONE  # another host's server or step: no need to load the server
        try:
            return counted(d, steps.handle)
        finally:
            # Every power action and delete in the cloud comes here and loads its server to learn
            # its host: another host's is not kept, so that the cache holds this host's servers, not
            # the cloud's churn (docs/performance.md, "Memory").
            bus.uow.forget_if(UUID(d.originator_id), elsewhere)

    def settle(d: Delivery, error: Exception) -> None:
        """A step quarantined: its server gets a fault rather than waiting for it forever."""
        details = (
            f"The hypervisor worker could not handle this step ({type(error).__name__}); the event at "
            f"log position {d.notification.id} was quarantined."
        )
        compute.give_up(d.event_type, d.originator_id, details)

    threads = settings.host_concurrency
    log.info("hypervisor %s consuming %s (durable %s, %d at once)",
             host, ", ".join(filters), durable_name(host), threads)  # fmt: skip
    try:
        serve_concurrently(
            open_consumer,
            handle,
            stop,
            actor=HYPERVISOR,
            threads=threads,
            poll=poll,
            name=host,
            settle=settle,
        )
    finally:
        responder.close()
        if consoles is not None:
            consoles.close()
        if reconciling is not None:
            wake.set()
            reconciling.join(timeout=30)
        beating.join(timeout=15)


def counted(d: Delivery, handle: Callable[[Delivery], Outcome]) -> Outcome:
    """``handle(d)``, counted and timed by action (the event acted on) and outcome; said at INFO for a
    step known to be this host's (a server scheduled here, a move's step here), in the delivery's
    context, so that the line carries the boot's ids. (Deletions and power actions of every server
    come here too; each step finds out whether its server lives here.)"""
    action = d.event_type
    timer = metrics.Timer()
    try:
        outcome = handle(d)
    except Exception:
        metrics.HYPERVISOR_ACTIONS.labels(action, "error").inc()
        raise
    elapsed = timer.elapsed()
    kind = "done" if isinstance(outcome, Done) else "retry"
    metrics.HYPERVISOR_ACTIONS.labels(action, kind).inc()
    metrics.HYPERVISOR_ACTION_LATENCY.labels(action).observe(elapsed)
    level = logging.INFO if action in (SCHEDULED, *ACTING_HOST) else logging.DEBUG
    log.log(level, "%s %s: %s in %.3f s", action, d.originator_id, kind, elapsed)
    return outcome


def _register(compute: Compute, stop: threading.Event) -> bool:
    """Register the host, waiting out a hypervisor or event store that is not up yet; False if stopped."""
    attempt = 0
    while not stop.is_set():
        try:
            with acting(CommandContext(actor=HYPERVISOR)):
                compute.register()
        except _REGISTER_TEMPORARY as e:
            delay = _REGISTER_DELAYS[min(attempt, len(_REGISTER_DELAYS) - 1)]
            log.warning("registering host %s failed, retrying in %.0fs: %s", compute.hostname, delay, e)
            attempt += 1
            stop.wait(delay)
            continue
        log.info("host %s registered", compute.hostname)
        return True
    return False
