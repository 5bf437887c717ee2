"""Everything one compute host does for the events it consumes: spawn and delete (``Compute``), power
actions (``PowerActions``), a resize's or migration's steps (``Moves``); and which host an event is
for. The hypervisor worker has one for its host; the simulator one per simulated host.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import orjson
from eventsourcing.utils import get_topic

from commands import loaders
from commands.bus import MessageBus
from commands.errors import NotFound
from commands.instance import Instance
from stratus.config import Settings
from stratus.eventstore.subjects import SubjectLayout
from workers.compute import SCHEDULED, Compute
from workers.config_drive import ConfigDrives
from workers.consumer import Delivery
from workers.guest_network import MetadataNetwork
from workers.migration import ACTING_HOST, Moves
from workers.outcome import DONE, Outcome, RetryPolicy
from workers.power import ACTION_REQUESTED, PowerActions
from workers.virt import BootImage, VirtDriver

# What a host acts on (besides nothing else): servers scheduled, deletions, power actions, moves' steps.
EVENTS = (
    Instance.Scheduled,  # type: ignore[attr-defined]
    Instance.DeletionRequested,  # type: ignore[attr-defined]
    Instance.ActionRequested,  # type: ignore[attr-defined]
    Instance.MigrationScheduled,  # type: ignore[attr-defined]
    Instance.MigratedFromSource,  # type: ignore[attr-defined]
    Instance.RevertRequested,  # type: ignore[attr-defined]
    Instance.RevertedOnDest,  # type: ignore[attr-defined]
)


def subjects(settings: Settings) -> list[str]:
    layout = SubjectLayout(settings.subject_prefix)
    return [layout.topic_filter(get_topic(cls)) for cls in EVENTS]


def payload(d: Delivery) -> dict[str, object]:
    value = orjson.loads(d.notification.state)
    return value if isinstance(value, dict) else {}


def host_of(d: Delivery, bus: MessageBus) -> str | None:
    """The host an event is for: named in its payload (a server scheduled, a move's step), else the host
    its server is on now (a deletion, a power action); None when the server is gone."""
    if d.event_type == SCHEDULED:
        return str(payload(d).get("host") or "") or None
    if d.event_type in ACTING_HOST:
        return str(payload(d).get(ACTING_HOST[d.event_type]) or "") or None
    try:
        return loaders.instance(bus.uow, d.originator_id).host
    except NotFound:
        return None


class HostSteps:
    """Everything one compute host does for the events it consumes, and which of them are its own."""

    def __init__(
        self,
        bus: MessageBus,
        driver: VirtDriver,
        hostname: str,
        *,
        instances_path: Path,
        boot_image: Callable[[Instance], BootImage | None] = lambda _inst: None,
        retry: RetryPolicy | None = None,
        console_logs: bool = True,
        config_drives: ConfigDrives | None = None,
        metadata_network: MetadataNetwork | None = None,
    ) -> None:
        self.hostname = hostname
        self.compute = Compute(
            bus,
            driver,
            hostname,
            instances_path=instances_path,
            boot_image=boot_image,
            retry=retry,
            console_logs=console_logs,
            config_drives=config_drives,
            metadata_network=metadata_network,
        )
        self.power = PowerActions(bus, driver, hostname, retry=retry, respawn=self.compute.respawn)
        self.moves = Moves(bus, driver, hostname, guest=self.compute.guest, retry=retry)

    def handle(self, d: Delivery) -> Outcome:
        """Carry out this host's part of the event (callers hand it only this host's events, or let
        each step find out: every step re-reads its server and acts only where it lives)."""
        if d.event_type in ACTING_HOST:
            return self.moves.handle(d.event_type, d.originator_id, d.attempt)
        if d.event_type == ACTION_REQUESTED:
            return self.power.handle(str(payload(d).get("action")), d.originator_id, d.attempt)
        if d.event_type == SCHEDULED and payload(d).get("host") != self.hostname:
            return DONE
        return self.compute.handle(d.event_type, d.originator_id, d.attempt)
