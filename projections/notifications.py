"""Nova's versioned notifications, projected from the log: for tools built on Nova's notification bus.

Instance events become Nova's ``instance.create.start``/``.end``/``.error``,
``instance.delete.start``/``.end``, ``instance.<power action>.start``/``.end``/``.error``, a resize's
or cold migration's ``instance.resize_prep``/``resize``/``resize_finish``/``resize_confirm``/
``resize_revert`` ``.start``/``.end`` (and ``instance.resize.error``),
``instance.lock``/``unlock`` and ``instance.update`` (on every change of vm_state, task_state,
power_state or name), each in oslo.messaging's envelope with Nova's payload objects
(``InstanceCreatePayload`` 1.11, ``InstanceActionPayload`` 1.7, ``InstanceUpdatePayload`` 1.8, as in
``nova/notifications/objects/instance.py``). Messages go to their own JetStream stream
(``<stream>_NOTIFICATIONS``, subjects ``versioned_notifications.<event_type>``), not the log.

Exactly once, without a database: each message carries the position of the event it came from
(``Stratus-Source-Position``) and a message id derived from that event and the notification type
(``Nats-Msg-Id``, deduplicated by the stream). On start the notifier reads the last message it
published and continues after its source position; a crash between two messages of one event
republishes them and the stream drops the duplicates. Instances are folded in memory from their
domain events (upcasters apply); an instance first seen mid-life is loaded from the log.

An instance event the notifier cannot decode or fold (a garbled payload, a type no code knows, an
upcaster's error) is quarantined (``stratus.quarantine``, part ``notifier``) and skipped: the
instance's state is kept as it was before it. On start the notifier continues after the later of its
last published notification and its last quarantined event.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import nats.errors
import nats.js.errors
import orjson
from eventsourcing.application import Application
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig

from commands.instance import Instance
from commands.states import POWER_STATE_NAMES, VmState
from projections.projector import LINGER_SECONDS
from stratus.audit import history
from stratus.config import Settings
from stratus.eventstore import (
    EventStoreUnavailable,
    Factory,
    JetStreamApplicationRecorder,
    NatsBridge,
    decode_message,
)
from stratus.quarantine import Quarantine, position_of

log = logging.getLogger("stratus.notifications")

DEFAULT_PREFIX = "versioned_notifications"
SOURCE_POSITION = "Stratus-Source-Position"
_NS = uuid.uuid5(uuid.NAMESPACE_URL, "urn:stratus:notification")
# Our action keys → Nova's notification names (nova/compute/manager.py).
NOVA_ACTIONS = {
    "start": "power_on",
    "stop": "power_off",
    "reboot": "reboot",
    "reboot_hard": "reboot",
    "pause": "pause",
    "unpause": "unpause",
    "suspend": "suspend",
    "resume": "resume",
}
# A move's events → Nova's resize notifications (a cold migration sends the same ones, as Nova's).
MOVES: dict[type, tuple[str, ...]] = {
    Instance.MigrationRequested: ("instance.resize_prep.start",),
    Instance.MigrationScheduled: ("instance.resize_prep.end", "instance.resize.start"),
    Instance.MigratedFromSource: ("instance.resize.end", "instance.resize_finish.start"),
    Instance.MigrationFinished: ("instance.resize_finish.end",),
    Instance.MigrationFailed: ("instance.resize.error",),
    Instance.ResizeConfirmed: ("instance.resize_confirm.start", "instance.resize_confirm.end"),
    Instance.RevertRequested: ("instance.resize_revert.start",),
    Instance.ResizeReverted: ("instance.resize_revert.end",),
}
RESIZE_PREP = ("InstanceActionResizePrepPayload", "1.3")
CREATE = ("InstanceCreatePayload", "1.11")
ACTION = ("InstanceActionPayload", "1.7")
UPDATE = ("InstanceUpdatePayload", "1.8")
EVENT_TYPES = (
    "instance.create.start", "instance.create.end", "instance.create.error",
    "instance.delete.start", "instance.delete.end", "instance.lock", "instance.unlock", "instance.update",
    *sorted({f"instance.{a}.{p}" for a in NOVA_ACTIONS.values() for p in ("start", "end", "error")}),
    *sorted({t for types in MOVES.values() for t in types}),
)  # fmt: skip


def _nova_time(value: datetime | str | None) -> str | None:
    """Nova's notification timestamps: ISO 8601 UTC with ``Z``."""
    if value is None:
        return None
    if isinstance(value, str):
        value = history.parse_time(value)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _obj(name: str, version: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "nova_object.name": name,
        "nova_object.namespace": "nova",
        "nova_object.version": version,
        "nova_object.data": data,
    }


@dataclass
class _Times:
    launched_at: str | None = None
    terminated_at: str | None = None


@dataclass(frozen=True)
class Notification:
    """One Nova versioned notification: its type, priority, oslo.messaging body and message id."""

    event_type: str
    priority: str
    body: dict[str, Any]
    message_id: str


def flavor_payload(flavor: dict[str, Any]) -> dict[str, Any]:
    return _obj(
        "FlavorPayload",
        "1.4",
        {
            "flavorid": str(flavor.get("id", flavor.get("flavorid", ""))),
            "name": flavor.get("name"),
            "memory_mb": flavor.get("ram"),
            "vcpus": flavor.get("vcpus"),
            "root_gb": flavor.get("disk"),
            "ephemeral_gb": flavor.get("ephemeral", 0),
            "swap": flavor.get("swap", 0),
            "rxtx_factor": flavor.get("rxtx_factor", 1.0),
            "vcpu_weight": 0,
            "disabled": False,
            "is_public": flavor.get("is_public", True),
            "extra_specs": flavor.get("extra_specs", {}),
            "projects": None,
            "description": flavor.get("description"),
        },
    )


def instance_data(
    i: Instance, times: _Times, envelope: Any, updated_at: str | None, deleted: bool
) -> dict[str, Any]:
    """InstancePayload 1.7's fields from the aggregate and the event that changed it."""
    image = getattr(i, "image", None) or {}
    return {
        "uuid": str(i.id),
        "user_id": i.user_id,
        "tenant_id": i.project_id,
        "reservation_id": getattr(i, "reservation_id", None),
        "display_name": i.name,
        "display_description": getattr(i, "description", None),
        "host_name": i.name,
        "host": i.host,
        "node": i.host,
        "os_type": None,
        "architecture": None,
        "availability_zone": i.availability_zone,
        "flavor": flavor_payload(dict(i.flavor)),
        "image_uuid": image.get("id") if isinstance(image, dict) and image else (i.image_ref or None),
        "key_name": getattr(i, "key_name", None),
        "kernel_id": image.get("kernel_id") if isinstance(image, dict) else None,
        "ramdisk_id": image.get("ramdisk_id") if isinstance(image, dict) else None,
        "created_at": _nova_time(i.created_on),
        "launched_at": times.launched_at,
        "terminated_at": times.terminated_at,
        "deleted_at": times.terminated_at if deleted else None,
        "updated_at": updated_at,
        "state": i.vm_state,
        "power_state": POWER_STATE_NAMES.get(i.power_state, "pending"),
        "task_state": i.task_state,
        "progress": None,
        "ip_addresses": [],
        "block_devices": [],
        "metadata": dict(i.metadata or {}),
        "locked": bool(getattr(i, "locked", False)),
        "auto_disk_config": "MANUAL",
        "request_id": envelope.requestid or None,
        "action_initiator_user": envelope.actoruser or None,
        "action_initiator_project": envelope.actorproject or None,
    }


def _fault(i: Instance) -> dict[str, Any] | None:
    fault = i.fault
    if not fault:
        return None
    return _obj(
        "ExceptionPayload",
        "1.1",
        {
            "module_name": "stratus",
            "function_name": str(fault.get("code", "")),
            "exception": str(fault.get("code", "")),
            "exception_message": str(fault.get("message", "")),
            "traceback": str(fault.get("details", "")),
        },
    )


_Message = tuple[str, str, tuple[str, str], dict[str, Any]]  # (event type, priority, payload class, data)


@dataclass(frozen=True)
class _Derivation:
    """One instance event, folded: the instance before and after it, and the payload's common fields."""

    before: Instance | None
    after: Instance
    event: Any
    base: dict[str, Any]

    def action(self, event_type: str, priority: str = "INFO", fault: bool = False) -> _Message:
        return (event_type, priority, ACTION, {**self.base, "fault": _fault(self.after) if fault else None})

    def create(self, event_type: str, priority: str = "INFO", fault: bool = False) -> _Message:
        data = {
            **self.base,
            "fault": _fault(self.after) if fault else None,
            "keypairs": [],
            "tags": list(getattr(self.after, "tags", []) or []),
            "trusted_image_certificates": None,
            "instance_name": self.after.name,
        }
        return (event_type, priority, CREATE, data)


Announce = Callable[[_Derivation], list[_Message]]


def _create_error(d: _Derivation) -> list[_Message]:
    """A fault while building fails the creation; a fault later is only a change of state."""
    building = d.before is not None and d.before.vm_state == VmState.BUILDING
    return [d.create("instance.create.error", "ERROR", fault=True)] if building else []


def _moved(event_types: tuple[str, ...]) -> Announce:
    def announce(d: _Derivation) -> list[_Message]:
        out: list[_Message] = []
        for event_type in event_types:
            if event_type.startswith("instance.resize_prep."):
                new = (d.after.migration or {}).get("new_flavor") or d.after.flavor
                data = {**d.base, "fault": None, "new_flavor": flavor_payload(dict(new))}
                out.append((event_type, "INFO", RESIZE_PREP, data))
            else:
                error = event_type.endswith(".error")
                out.append(d.action(event_type, "ERROR" if error else "INFO", fault=error))
        return out

    return announce


def _power(phase: str) -> Announce:
    """A power action's ``.start``, ``.end`` or ``.error``, for the actions Nova notifies."""

    def announce(d: _Derivation) -> list[_Message]:
        nova = NOVA_ACTIONS.get(getattr(d.event, "action", ""))
        if nova is None:
            return []
        error = phase == "error"
        return [d.action(f"instance.{nova}.{phase}", "ERROR" if error else "INFO", fault=error)]

    return announce


# What each instance event announces besides ``instance.update`` (which any change of state sends).
ANNOUNCE: dict[type, Announce] = {
    Instance.Requested: lambda d: [d.create("instance.create.start")],
    Instance.Spawned: lambda d: [d.create("instance.create.end")],
    Instance.Faulted: _create_error,
    Instance.DeletionRequested: lambda d: [d.action("instance.delete.start")],
    Instance.Deleted: lambda d: [d.action("instance.delete.end")],
    Instance.Locked: lambda d: [d.action("instance.lock")],
    Instance.Unlocked: lambda d: [d.action("instance.unlock")],
    **{cls: _moved(event_types) for cls, event_types in MOVES.items()},
    Instance.ActionRequested: _power("start"),
    Instance.ActionFinished: _power("end"),
    Instance.ActionFailed: _power("error"),
}


def derive(
    before: Instance | None, after: Instance, event: Any, envelope: Any, times: _Times
) -> list[Notification]:
    """The notifications one instance event gives (pure: no I/O)."""
    when = _nova_time(envelope.time)
    if isinstance(event, Instance.Spawned):
        times.launched_at = when
    if isinstance(event, Instance.Deleted):
        times.terminated_at = when
    deleted = after.vm_state == VmState.DELETED
    base = instance_data(after, times, envelope, when, deleted)
    announce = ANNOUNCE.get(type(event))
    out = announce(_Derivation(before, after, event, base)) if announce is not None else []

    old = (before.vm_state, before.task_state, before.power_state, before.name) if before else None
    new = (after.vm_state, after.task_state, after.power_state, after.name)
    if old is not None and old != new:
        assert before is not None
        state_update = _obj(
            "InstanceStateUpdatePayload",
            "1.0",
            {
                "old_state": before.vm_state,
                "state": after.vm_state,
                "old_task_state": before.task_state,
                "new_task_state": after.task_state,
            },
        )
        data = {
            **base,
            "state_update": state_update,
            "audit_period": _obj(
                "AuditPeriodPayload", "1.0", {"audit_period_beginning": when, "audit_period_ending": when}
            ),
            "bandwidth": [],
            "old_display_name": before.name if before.name != after.name else None,
            "tags": list(getattr(after, "tags", []) or []),
        }
        out.append(("instance.update", "INFO", UPDATE, data))

    publisher = f"nova-compute:{after.host}" if after.host else "nova-api:stratus"
    notes = []
    for event_type, priority, (name, version), data in out:
        message_id = str(uuid.uuid5(_NS, f"{envelope.id}/{event_type}"))
        body = {
            "priority": priority,
            "event_type": event_type,
            "timestamp": envelope.time,
            "publisher_id": publisher,
            "message_id": message_id,
            "payload": _obj(name, version, data),
        }
        notes.append(Notification(event_type, priority, body, message_id))
    return notes


class Notifier:
    """Follows the instance events of the log and publishes Nova notifications for them."""

    def __init__(
        self,
        app: Application[UUID],
        recorder: JetStreamApplicationRecorder,
        *,
        stream: str,
        prefix: str = DEFAULT_PREFIX,
        cache_size: int = 10_000,
        quarantine: Quarantine | None = None,
        part: str = "notifier",
    ) -> None:
        self.app = app
        self.recorder = recorder
        self.bridge: NatsBridge = recorder.bridge
        self.stream = stream
        self.prefix = prefix
        self._instances: OrderedDict[UUID, tuple[Instance, _Times]] = OrderedDict()
        self._cache_size = cache_size
        self.position = 0  # the last log position processed (published, or found to need nothing)
        self.quarantine = quarantine or Quarantine(
            self.bridge, log_stream=recorder.stream, replicas=recorder.replicas, timeout=recorder.timeout
        )
        self.part = part

    def stream_config(self) -> StreamConfig:
        return StreamConfig(
            name=self.stream,
            description="Nova-compatible versioned notifications projected from the Stratus log",
            subjects=[f"{self.prefix}.>"],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            discard=DiscardPolicy.OLD,
            num_replicas=self.recorder.replicas,
            duplicate_window=self.recorder.duplicate_window,
            allow_direct=True,
        )

    def ensure_stream(self) -> None:
        config = self.stream_config()

        async def ensure() -> None:
            js = self.bridge.js
            try:
                await js.stream_info(self.stream)
            except nats.js.errors.NotFoundError:
                with contextlib.suppress(nats.js.errors.BadRequestError):
                    await js.add_stream(config)

        self.bridge.run(ensure, self.recorder.timeout)

    def last_source_position(self) -> int:
        """The log position of the event the last published notification came from (0: none yet)."""

        async def last() -> int:
            try:
                msg = await self.bridge.js.get_last_msg(self.stream, f"{self.prefix}.>", direct=True)
            except nats.js.errors.NotFoundError:
                return 0
            except nats.errors.NoRespondersError as e:
                # a stream just made answers direct gets a moment later: the caller waits and retries
                raise EventStoreUnavailable(f"{self.stream} does not answer direct gets yet") from e
            return int((msg.headers or {}).get(SOURCE_POSITION, "0"))

        return int(self.bridge.run(last, self.recorder.timeout))

    def _instance(self, instance_id: UUID, version: int) -> tuple[Instance | None, _Times]:
        cached = self._instances.get(instance_id)
        if cached is not None and cached[0].version == version - 1:
            self._instances.move_to_end(instance_id)
            return cached
        if version == 1:
            return None, _Times()
        loaded: Any = self.app.repository.get(instance_id, version=version - 1)
        assert isinstance(loaded, Instance)
        return loaded, _Times()

    def process(self, entries: list[history.Entry], raw: list[Any]) -> list[tuple[int, Notification]]:
        out: list[tuple[int, Notification]] = []
        for entry, msg in zip(entries, raw, strict=True):
            topic = entry.envelope.topic
            if not topic.startswith("commands.instance:Instance."):
                continue
            try:
                out += self._derive(entry, msg)
            except (EventStoreUnavailable, TimeoutError):
                raise  # the log away: the batch is read again
            except Exception as e:  # decoding and folding are pure: the failure is this event's own
                self._skip(entry, e)
        return out

    def _derive(self, entry: history.Entry, msg: Any) -> list[tuple[int, Notification]]:
        notification, _ = decode_message(msg)
        event: Any = self.app.mapper.to_domain_event(notification)
        instance_id = UUID(str(entry.envelope.originator_id))
        before, times = self._instance(instance_id, entry.envelope.originator_version)
        after = event.mutate(_copy(before))  # a copy: an event that fails halfway leaves ``before`` whole
        if not isinstance(after, Instance):
            raise TypeError(f"{type(event).__name__} did not yield an instance")
        notes = [(entry.position, n) for n in derive(before, after, event, entry.envelope, times)]
        self._instances[instance_id] = (after, times)
        self._instances.move_to_end(instance_id)
        while len(self._instances) > self._cache_size:
            self._instances.popitem(last=False)
        return notes

    def _skip(self, entry: history.Entry, error: Exception) -> None:
        """Quarantine the event at ``entry``; the instance's state stays as it was before it."""
        envelope = entry.envelope
        self.quarantine.record(
            self.part,
            position=entry.position,
            topic=envelope.topic,
            originator_id=str(envelope.originator_id),
            error=error,
        )
        with contextlib.suppress(ValueError):
            cached = self._instances.get(UUID(str(envelope.originator_id)))
            if cached is not None and cached[0].version == envelope.originator_version - 1:
                cached[0].version = envelope.originator_version  # the skipped event changed nothing

    def _entries(self, msgs: list[Any]) -> tuple[list[history.Entry], list[Any]]:
        """The messages' entries; one whose envelope cannot be read is quarantined and left out."""
        entries: list[history.Entry] = []
        kept: list[Any] = []
        for msg in msgs:
            try:
                entries.append(history.entry_of(msg))
            except Exception as e:  # a garbled envelope: decoding it is pure
                self.quarantine.record_message(self.part, msg, e)
                continue
            kept.append(msg)
        return entries, kept

    def publish(self, notes: list[tuple[int, Notification]]) -> None:
        async def send() -> None:
            for position, n in notes:
                headers = {"Nats-Msg-Id": n.message_id, SOURCE_POSITION: str(position)}
                await self.bridge.js.publish(
                    f"{self.prefix}.{n.event_type}", orjson.dumps(n.body), stream=self.stream, headers=headers
                )

        if notes:
            self.bridge.run(send, self.recorder.timeout)

    def run(self, stop: threading.Event, *, batch: int = 500, idle_wait: float = 1.0) -> None:
        self.ensure_stream()
        cursor = max(self.last_source_position(), self.quarantine.last_position(self.part)) + 1
        self.position = cursor - 1
        log.info("notifier publishing from position %d to %s.>", cursor, self.prefix)
        filt = self.recorder.layout.kind_filter("instance")
        last = self.recorder.max_notification_id() or 0
        while not stop.is_set():
            while cursor <= last and not stop.is_set():
                msgs = self.recorder.read_messages(cursor, batch, stop=last, subject_filter=filt)
                entries, kept = self._entries(msgs)
                self.publish(self.process(entries, kept))
                cursor = last + 1 if len(msgs) < batch else position_of(msgs[-1]) + 1
                self.position = cursor - 1
            head = self.recorder.wait_for_position(last, timeout=idle_wait)
            if head > last:
                stop.wait(LINGER_SECONDS)  # let the commits of the moment gather into one read
                head = self.recorder.wait_for_position(head, timeout=0)
            last = max(last, head)


def _copy(instance: Instance | None) -> Instance | None:
    """A shallow copy of the state before an event (mutate changes the aggregate in place)."""
    if instance is None:
        return None
    clone = object.__new__(Instance)
    clone.__dict__.update(instance.__dict__)
    return clone


@contextlib.contextmanager
def open_notifier(settings: Settings, *, prefix: str = DEFAULT_PREFIX) -> Iterator[Notifier]:
    from commands.app import Stratus

    bridge = NatsBridge(
        settings.nats_urls, name="stratus-notifier", seed_file=settings.nats_seed_file
    ).start()
    try:
        factory = Factory(bridge=bridge, settings=settings)
        app = Stratus(factory)
        yield Notifier(
            app, factory.application_recorder(), stream=f"{settings.stream}_NOTIFICATIONS", prefix=prefix
        )
    finally:
        bridge.close()
