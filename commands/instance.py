"""Instance: a server, with Nova's vm_state / task_state / power_state machine.

Public methods check Nova's guards and raise domain errors; the private ``@event`` methods record
facts and only assign state.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from commands.actions import ACTIONS, LOCKED_BY_ADMIN, LOCKED_BY_OWNER
from commands.errors import Forbidden, InstanceLocked, InvalidInput, InvalidState, NotFound, QuotaExceeded
from commands.quota import DEFAULT_LIMITS
from commands.states import PowerState, TaskState, VmState

# What a version 1 ``Requested`` event lacks, as version 2 records it.
_V2_DEFAULTS: dict[str, Any] = {
    "description": None,
    "image": None,
    "key_name": None,
    "key_data": None,
    "user_data": None,
    "ports": list,
    "tags": list,
    "reservation_id": None,
}
MAX_TAGS = 50
# Where a placed server's guest may be spawned: a new server, or a shelved one the scheduler placed.
_SPAWNABLE = (VmState.BUILDING, VmState.SHELVED_OFFLOADED)


def check_metadata_items(total: int, limit: int) -> None:
    """A server may hold ``limit`` metadata items (-1: any number)."""
    if 0 <= limit < total:
        raise QuotaExceeded(f"Quota exceeded for metadata_items: Requested {total}, but the limit is {limit}")


# Nova's migration types: a resize changes the flavor, a (cold) migration only the host.
RESIZE = "resize"
MIGRATION = "migration"


class Instance(Aggregate):
    """A server: Nova's vm_state / task_state / power_state machine, its placement and its moves."""

    class Requested(Aggregate.Created):
        """A server was requested. Version 2 added what the server is built with besides its flavor:
        the image it boots (with its kernel and ramdisk), the key pair, the fixed addresses allocated
        to it, its tags, description and reservation, and a digest of its user data (never the data).
        Version 3 added the server's index in its multi-create and the flavor's extra specs.
        Version 4 added what the scheduler needs besides the flavor (Nova's request spec): how many
        servers the request asked for together and the server group they joined.
        Version 6 added the access addresses the owner gave (Nova's ``accessIPv4``/``accessIPv6``),
        the hostname (2.90; None: the one derived from the name) and the disk configuration asked for.
        Version 7 added whether the guest gets a config drive (asked for, or forced by the image's
        ``img_config_drive=mandatory``).
        """

        name: str
        project_id: str
        user_id: str
        flavor: dict[str, Any]
        image_ref: str
        metadata: dict[str, str]
        availability_zone: str | None
        request_key: str | None
        description: str | None
        image: dict[str, Any] | None
        key_name: str | None
        key_data: str | None
        user_data: dict[str, Any] | None
        ports: list[dict[str, Any]]
        tags: list[str]
        reservation_id: str | None
        launch_index: int
        scheduling: dict[str, Any] | None = None
        access_ip_v4: str | None = None
        access_ip_v6: str | None = None
        hostname: str | None = None
        disk_config: str = "MANUAL"
        config_drive: bool = False

        class_version = 7

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            for name, value in _V2_DEFAULTS.items():
                state.setdefault(name, value() if callable(value) else value)

        @staticmethod
        def upcast_v2_v3(state: dict[str, Any]) -> None:
            """Version 3: the server's index in its multi-create and the flavor's extra specs."""
            state.setdefault("launch_index", 0)
            state["flavor"] = {"extra_specs": {}, **state["flavor"]}

        @staticmethod
        def upcast_v3_v4(state: dict[str, Any]) -> None:
            """Version 4: ``{"num_instances", "group_id"}``; None for an older request: not recorded,
            the scheduler reads the group membership and the request's siblings from the log."""
            state.setdefault("scheduling", None)

        @staticmethod
        def upcast_v4_v5(state: dict[str, Any]) -> None:
            """Version 5: user data is filed under a random id (``{"id", "size"}``), no longer under
            its SHA-256, which let anyone reading the log confirm a guess of a server's user data."""
            data = state.get("user_data")
            if isinstance(data, dict) and "sha256" in data:
                state["user_data"] = {"id": data["sha256"], "size": data["size"]}

        @staticmethod
        def upcast_v5_v6(state: dict[str, Any]) -> None:
            """Version 6: access addresses, hostname, disk configuration (none of them before)."""
            state.update(access_ip_v4=None, access_ip_v6=None, hostname=None, disk_config="MANUAL")

        @staticmethod
        def upcast_v6_v7(state: dict[str, Any]) -> None:
            """Version 7: the config drive (no server had one before)."""
            state["config_drive"] = False

    @event(Requested)
    def __init__(
        self,
        name: str,
        project_id: str,
        user_id: str,
        flavor: dict[str, Any],
        image_ref: str,
        metadata: dict[str, str],
        availability_zone: str | None,
        request_key: str | None,
        description: str | None = None,
        image: dict[str, Any] | None = None,
        key_name: str | None = None,
        key_data: str | None = None,
        user_data: dict[str, Any] | None = None,
        ports: list[dict[str, Any]] | None = None,
        tags: list[str] | None = None,
        reservation_id: str | None = None,
        launch_index: int = 0,
        scheduling: dict[str, Any] | None = None,
        access_ip_v4: str | None = None,
        access_ip_v6: str | None = None,
        hostname: str | None = None,
        disk_config: str = "MANUAL",
        config_drive: bool = False,
    ) -> None:
        self.name = name
        self.project_id = project_id
        self.user_id = user_id
        self.flavor = flavor
        self.image_ref = image_ref
        self.metadata = metadata
        self.availability_zone = availability_zone
        self.request_key = request_key
        self.description = description
        self.image = image
        self.key_name = key_name
        self.key_data = key_data
        self.user_data = user_data
        self.ports = list(ports or [])
        self.tags = list(tags or [])
        self.reservation_id = reservation_id
        self.launch_index = launch_index
        self.scheduling = scheduling
        self.unshelve_host: str | None = None
        self.access_ip_v4 = access_ip_v4
        self.access_ip_v6 = access_ip_v6
        self.hostname = hostname
        self.disk_config = disk_config
        self.config_drive = config_drive
        self.vm_state = VmState.BUILDING
        self.task_state: str | None = TaskState.SCHEDULING
        self.power_state = PowerState.NOSTATE
        self.host: str | None = None
        self.fault: dict[str, Any] | None = None
        self.locked_by: str | None = None  # Nova's locked_by: "owner", "admin", or None (unlocked)
        self.locked_reason: str | None = None
        self.migration: dict[str, Any] | None = None  # the resize or cold migration under way

    @classmethod
    def request(cls, server_id: UUID, **fields: Any) -> Instance:
        """A new server, under an id chosen by the caller (random, or derived from a request key)."""
        defaults = {name: value() if callable(value) else value for name, value in _V2_DEFAULTS.items()}
        defaults["launch_index"] = 0
        return cls._create(cls.Requested, id=server_id, **{**defaults, **fields})

    @property
    def server_id(self) -> str:
        return str(self.id)

    @property
    def deleted(self) -> bool:
        return self.vm_state == VmState.DELETED

    def _ensure_exists(self) -> None:
        if self.deleted:
            raise NotFound(f"Instance {self.id} could not be found.")

    def _guard(self, action: str, vm_states: tuple[str, ...], task_states: tuple[str | None, ...]) -> None:
        self._ensure_exists()
        if self.vm_state not in vm_states or self.task_state not in task_states:
            raise InvalidState(
                f"Cannot '{action}' instance {self.id} while it is in "
                f"vm_state {self.vm_state}, task_state {self.task_state}"
            )

    # -- scheduling -----------------------------------------------------------------------------
    @property
    def placed_alone(self) -> bool:
        """A new server requested alone and in no server group, as recorded by its request (a
        scheduler may then place it in a batch with other such requests)."""
        s = self.scheduling
        return (
            s is not None and s.get("num_instances") == 1 and s.get("group_id") is None and not s.get("host")
        )

    @property
    def requested_host(self) -> str | None:
        """The host an admin asked for: at creation (2.74) or at unshelve (2.91); None: any host."""
        if self.vm_state == VmState.SHELVED_OFFLOADED:
            return self.unshelve_host
        return (self.scheduling or {}).get("host")

    @property
    def awaiting_host(self) -> bool:
        """Waiting for the scheduler: a new server, or a shelved one being unshelved."""
        return (self.vm_state, self.task_state) in (
            (VmState.BUILDING, TaskState.SCHEDULING),
            (VmState.SHELVED_OFFLOADED, TaskState.UNSHELVING),
        )

    def schedule(self, host: str) -> None:
        self._ensure_exists()
        if not self.awaiting_host:
            self._guard("schedule", (VmState.BUILDING,), (TaskState.SCHEDULING,))
        self._scheduled(host)

    class Scheduled(Aggregate.Event):
        """The scheduler placed the instance on a host."""

        host: str

    @event(Scheduled)
    def _scheduled(self, host: str) -> None:
        self.host = host
        self.task_state = None

    def fail(self, code: str, message: str, details: str = "") -> None:
        """Record a fault and put the instance into ERROR (Nova: instance fault + vm_state error)."""
        self._ensure_exists()
        message, details = message[:255], details[:65535]
        fault = {"code": code, "message": message, "details": details}
        if self.vm_state == VmState.ERROR and self.fault == fault:
            return  # the same failure reported twice (a redelivered message): one fact, recorded once
        if (self.vm_state, self.task_state) == (VmState.SHELVED_OFFLOADED, TaskState.UNSHELVING):
            # Nova's conductor: an unshelve with no valid host leaves the server shelved (and no task)
            self._unshelve_failed(code, message, details)
            return
        self._faulted(code, message, details)

    class UnshelveFailed(Aggregate.Event):
        """The scheduler found no host for an unshelve: the server stays SHELVED_OFFLOADED with no task
        (Nova's conductor), with the fault recorded; its quota stays charged."""

        code: str
        message: str
        details: str

    @event(UnshelveFailed)
    def _unshelve_failed(self, code: str, message: str, details: str) -> None:
        self.task_state = None
        self.fault = {"code": code, "message": message, "details": details}

    class Faulted(Aggregate.Event):
        """The instance went to ERROR with a fault."""

        code: str
        message: str
        details: str

    @event(Faulted)
    def _faulted(self, code: str, message: str, details: str) -> None:
        self.vm_state = VmState.ERROR
        self.task_state = None
        self.fault = {"code": code, "message": message, "details": details}

    # -- spawning on the host -------------------------------------------------------------------
    def start_spawning(self, host: str) -> None:
        self._guard("spawn", _SPAWNABLE, (None,))
        if self.host != host:
            raise InvalidState(f"Instance {self.id} is placed on {self.host}, not on {host}")
        self._spawning_started()

    class SpawningStarted(Aggregate.Event):
        """The host began spawning the guest (task_state spawning)."""

    @event(SpawningStarted)
    def _spawning_started(self) -> None:
        self.task_state = TaskState.SPAWNING

    def finish_spawning(self, power_state: int) -> None:
        self._guard("spawn", _SPAWNABLE, (TaskState.SPAWNING,))
        self._spawned(power_state)

    class Spawned(Aggregate.Event):
        """The guest is running: vm_state active."""

        power_state: int

    @event(Spawned)
    def _spawned(self, power_state: int) -> None:
        self.vm_state = VmState.ACTIVE
        self.task_state = None
        self.power_state = power_state

    # -- what the user may change ----------------------------------------------------------------
    def update(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        clear_description: bool = False,
        fields: dict[str, Any] | None = None,
    ) -> None:
        """Rename the server, change its description, and set any of ``fields``
        (``access_ip_v4``, ``access_ip_v6``, ``hostname``, ``disk_config``): ``PUT /servers/{id}``."""
        self._ensure_exists()
        new: dict[str, Any] = {
            "name": self.name if name is None else name,
            "description": None
            if clear_description
            else (description if description is not None else self.description),
            "access_ip_v4": self.access_ip_v4,
            "access_ip_v6": self.access_ip_v6,
            "hostname": self.hostname,
            "disk_config": self.disk_config,
        }
        new.update(fields or {})
        if any(getattr(self, k) != v for k, v in new.items()):
            self._updated(**new)

    class Updated(Aggregate.Event):
        """The owner changed what describes the server. Version 2 added the access addresses, the
        hostname and the disk configuration (every value after the change, as name and description)."""

        name: str
        description: str | None
        access_ip_v4: str | None
        access_ip_v6: str | None
        hostname: str | None
        disk_config: str

        class_version = 2

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            # Written before any of them could be set: they were still the creation's (none).
            state.update(access_ip_v4=None, access_ip_v6=None, hostname=None, disk_config="MANUAL")

    @event(Updated)
    def _updated(
        self,
        name: str,
        description: str | None,
        access_ip_v4: str | None,
        access_ip_v6: str | None,
        hostname: str | None,
        disk_config: str,
    ) -> None:
        self.name = name
        self.description = description
        self.access_ip_v4 = access_ip_v4
        self.access_ip_v6 = access_ip_v6
        self.hostname = hostname
        self.disk_config = disk_config

    def update_metadata(
        self, items: dict[str, str], *, replace: bool = False, limit: int = DEFAULT_LIMITS["metadata_items"]
    ) -> None:
        """Set ``items``; with ``replace`` also remove every key not in ``items``; at most ``limit``
        items in all (the project's ``metadata_items`` quota; -1: no limit)."""
        self._ensure_exists()
        removed = sorted(k for k in self.metadata if k not in items) if replace else []
        changed = {k: v for k, v in items.items() if self.metadata.get(k) != v}
        check_metadata_items(len({k for k in {**self.metadata, **items} if k not in removed}), limit)
        if changed or removed:
            self._metadata_updated(changed, removed)

    def delete_metadata(self, key: str) -> None:
        self._ensure_exists()
        if key not in self.metadata:
            raise NotFound("Metadata item was not found")
        self._metadata_updated({}, [key])

    class MetadataUpdated(Aggregate.Event):
        """Metadata items were set (changed) and/or removed."""

        changed: dict[str, str]
        removed: list[str]

    @event(MetadataUpdated)
    def _metadata_updated(self, changed: dict[str, str], removed: list[str]) -> None:
        metadata = {k: v for k, v in self.metadata.items() if k not in removed}
        metadata.update(changed)
        self.metadata = metadata

    def set_tags(self, tags: list[str]) -> None:
        """Replace the tags (duplicates collapse, order kept)."""
        self._ensure_exists()
        unique = list(dict.fromkeys(tags))
        if len(unique) > MAX_TAGS:
            raise InvalidInput(f"The number of tags exceeded the per-server limit {MAX_TAGS}")
        if unique != self.tags:
            self._tags_updated(unique)

    def add_tag(self, tag: str) -> bool:
        """Add one tag; False when the server already has it."""
        if tag in self.tags:
            self._ensure_exists()
            return False
        self.set_tags([*self.tags, tag])
        return True

    def remove_tag(self, tag: str) -> None:
        self._ensure_exists()
        if tag not in self.tags:
            raise NotFound(f"Tag {tag} could not be found.")
        self._tags_updated([t for t in self.tags if t != tag])

    class TagsUpdated(Aggregate.Event):
        """The server's tags are now exactly these."""

        tags: list[str]

    @event(TagsUpdated)
    def _tags_updated(self, tags: list[str]) -> None:
        self.tags = list(tags)

    # -- power actions and locks (POST /servers/{id}/action) ------------------------------------
    @property
    def locked(self) -> bool:
        return self.locked_by is not None

    def _check_lock(self, admin: bool) -> None:
        if self.locked and not admin:
            raise InstanceLocked(f"Instance {self.id} is locked")

    def request_action(self, key: str, *, admin: bool) -> None:
        """Ask this instance's host to start, stop, reboot, pause, unpause, suspend or resume it.

        Nova's order of checks: the lock first, then vm_state, then task_state.
        """
        action = ACTIONS[key]
        self._ensure_exists()
        self._check_lock(admin)
        for attr, value, allowed in (
            ("vm_state", self.vm_state, action.vm_states),
            ("task_state", self.task_state, action.task_states),
        ):
            if value not in allowed:
                raise InvalidState(f"Cannot '{action.name}' instance {self.id} while it is in {attr} {value}")
        if self.host is None:
            raise InvalidState(f"Cannot '{action.name}' instance {self.id} while it is on no host")
        self._action_requested(key, action.task_state)

    class ActionRequested(Aggregate.Event):
        """A user asked for a power action (start, stop, reboot, pause, unpause, suspend, resume); the
        server's host carries it out. task_state is the task while it does."""

        action: str
        task_state: str

    @event(ActionRequested)
    def _action_requested(self, action: str, task_state: str) -> None:
        self.task_state = task_state

    def offload(self) -> None:
        """The host removed the shelved guest: the server is on no host now (its resources go back)."""
        self._ensure_exists()
        if self.vm_state != VmState.SHELVED_OFFLOADED or self.host is None:
            raise InvalidState(f"Instance {self.id} is not a shelved server on a host")
        self._offloaded(self.host)

    class Offloaded(Aggregate.Event):
        """A shelved server's guest was removed from its host (recorded with the shelve's ActionFinished
        and the host's InstanceReleased): the server is on no host; its quota stays charged."""

        host: str

    @event(Offloaded)
    def _offloaded(self, host: str) -> None:
        self.host = None

    def unshelve(
        self, *, admin: bool, zone: tuple[str | None] | None = None, host: str | None = None
    ) -> None:
        """Nova's unshelve of an offloaded server: the scheduler places it again, the host spawns it.
        ``zone``: the zone to pin it to (2.77; ``(None,)`` unpins, 2.91); ``host``: where (2.91)."""
        self._ensure_exists()
        self._check_lock(admin)
        if self.vm_state != VmState.SHELVED_OFFLOADED or self.task_state is not None:
            raise InvalidState(
                f"Cannot 'unshelve' instance {self.id} while it is in vm_state {self.vm_state}"
            )
        pinned = zone[0] if zone is not None else self.availability_zone
        self._unshelve_requested(zone is not None, pinned, host)

    class UnshelveRequested(Aggregate.Event):
        """Version 2: the zone the server is pinned to after (``repin``: the request named one;
        2.77, and 2.91's null to unpin) and the host an admin asked for (2.91)."""

        repin: bool
        availability_zone: str | None
        host: str | None

        class_version = 2

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state.update(repin=False, availability_zone=None, host=None)  # asked for neither

    @event(UnshelveRequested)
    def _unshelve_requested(self, repin: bool, availability_zone: str | None, host: str | None) -> None:
        self.task_state = TaskState.UNSHELVING
        if repin:
            self.availability_zone = availability_zone
        self.unshelve_host = host

    def pin_zone(self, zone: str | None, current_zone: str) -> None:
        """2.104: unpin (None), or pin again to the zone the server is in; Nova's 409 otherwise."""
        self._ensure_exists()
        if zone == self.availability_zone:
            return
        if zone is not None and (self.availability_zone is not None or zone != current_zone):
            raise InvalidState(
                f"Cannot pin instance {self.id} to availability zone {zone}: it is in {current_zone}"
                + (f" and pinned to {self.availability_zone}" if self.availability_zone else "")
            )
        self._zone_pinned(zone)

    class ZonePinned(Aggregate.Event):
        """The availability zone the server is pinned to changed (microversion 2.104's PUT): null unpins
        it, so that a move may take it to any zone."""

        availability_zone: str | None

    @event(ZonePinned)
    def _zone_pinned(self, availability_zone: str | None) -> None:
        self.availability_zone = availability_zone

    def request_shelve_offload(self) -> None:
        """Nova's shelveOffload applies to SHELVED servers; Stratus offloads at shelve (Nova with
        ``shelved_offload_time = 0``), so no server waits in SHELVED and this is refused as Nova does."""
        self._guard("shelveOffload", (VmState.SHELVED,), (None,))

    def rebuild(self, image_ref: str, image: dict[str, Any] | None, *, admin: bool) -> None:
        """Nova's rebuild: the server keeps its id, flavor, addresses and host and boots a new image.
        The image is recorded at once (as Nova records it at the API); the host then redefines the
        guest from it under ``rebuilding``."""
        self.request_action("rebuild", admin=admin)
        self._image_changed(image_ref, image)

    class ImageChanged(Aggregate.Event):
        """A rebuild gave the server a new image (recorded with the rebuild's ActionRequested, as Nova
        records the image at the API); the host then redefines the guest from it."""

        image_ref: str
        image: dict[str, Any] | None

    @event(ImageChanged)
    def _image_changed(self, image_ref: str, image: dict[str, Any] | None) -> None:
        self.image_ref = image_ref
        self.image = image

    def change_boot_data(
        self, key: tuple[str | None, str | None] | None, user_data: tuple[dict[str, Any] | None] | None
    ) -> None:
        """A rebuild's new key pair (2.54: ``(name, public key)``, or ``(None, None)`` to drop it)
        and user data (2.57: where it is filed, or None to drop it); None leaves either as it was."""
        key_name, key_data = key if key is not None else (self.key_name, self.key_data)
        filed = user_data[0] if user_data is not None else self.user_data
        if (key_name, key_data, filed) != (self.key_name, self.key_data, self.user_data):
            self._boot_data_changed(key_name, key_data, filed)

    class BootDataChanged(Aggregate.Event):
        """A rebuild changed the key pair (microversion 2.54) or the user data (2.57) the server boots
        with: the values after the change (user data only as where it is filed, never the data)."""

        key_name: str | None
        key_data: str | None
        user_data: dict[str, Any] | None

    @event(BootDataChanged)
    def _boot_data_changed(
        self, key_name: str | None, key_data: str | None, user_data: dict[str, Any] | None
    ) -> None:
        self.key_name = key_name
        self.key_data = key_data
        self.user_data = user_data

    def _ensure_under_way(self, key: str) -> None:
        self._ensure_exists()
        if self.task_state != ACTIONS[key].task_state:
            raise InvalidState(
                f"Instance {self.id} is not carrying out '{key}' (task_state {self.task_state})"
            )

    def finish_action(self, key: str, power_state: int) -> None:
        """The host carried the action out; the guest now reports ``power_state``."""
        self._ensure_under_way(key)
        vm_state = ACTIONS[key].vm_state
        if key == "rebuild" and self.vm_state == VmState.STOPPED:
            vm_state = VmState.STOPPED  # Nova: a stopped server is rebuilt stopped
        self._action_finished(key, vm_state, power_state)

    class ActionFinished(Aggregate.Event):
        """The host carried the action out: the server's new vm_state and the power state the guest
        reported; no task."""

        action: str
        vm_state: str
        power_state: int

    @event(ActionFinished)
    def _action_finished(self, action: str, vm_state: str, power_state: int) -> None:
        self.vm_state = vm_state
        self.task_state = None
        self.power_state = power_state

    def fail_action(
        self, key: str, code: str, message: str, details: str, *, power_state: int | None, broken: bool
    ) -> None:
        """The host could not carry the action out: no task any more, the vm_state it had (ERROR
        when ``broken``: the guest is gone or unusable), and the power state the host saw."""
        self._ensure_under_way(key)
        vm_state = VmState.ERROR if broken else self.vm_state
        observed = self.power_state if power_state is None else power_state
        self._action_failed(key, code, message[:255], details[:65535], vm_state, observed)

    class ActionFailed(Aggregate.Event):
        """The host could not carry the action out: no task, the vm_state the server is left in (error when
        the guest is gone or unusable), the power state the host saw, and the fault (code, message,
        details; never secrets)."""

        action: str
        code: str
        message: str
        details: str
        vm_state: str
        power_state: int

    @event(ActionFailed)
    def _action_failed(
        self, action: str, code: str, message: str, details: str, vm_state: str, power_state: int
    ) -> None:
        self.vm_state = vm_state
        self.task_state = None
        self.power_state = power_state
        self.fault = {"code": code, "message": message, "details": details}

    def reset_state(self, state: str) -> None:
        """Nova's os-resetState (admins): force ``active`` or ``error``, with no task under way. The
        host is not asked: it is how an operator frees a server whose task will never finish."""
        self._ensure_exists()
        vm_state = {"active": VmState.ACTIVE, "error": VmState.ERROR}.get(state)
        if vm_state is None:
            raise InvalidInput(
                f"Invalid input for field/attribute state. Value: {state[:32]}. Not active or error"
            )
        self._state_reset(vm_state)

    class StateReset(Aggregate.Event):
        """An admin forced the server's state (Nova's os-resetState): active or error, no task under way."""

        vm_state: str

    @event(StateReset)
    def _state_reset(self, vm_state: str) -> None:
        self.vm_state = vm_state
        self.task_state = None

    def lock(self, *, admin: bool, reason: str | None = None) -> None:
        """Lock the server against actions by non-admins; locking a locked server changes nothing."""
        self._ensure_exists()
        if not self.locked:
            self._locked(LOCKED_BY_ADMIN if admin else LOCKED_BY_OWNER, reason)

    class Locked(Aggregate.Event):
        """The server was locked: actions by non-admins are refused until it is unlocked. locked_by is
        owner or admin (then only an admin unlocks it)."""

        locked_by: str
        reason: str | None

    @event(Locked)
    def _locked(self, locked_by: str, reason: str | None) -> None:
        self.locked_by = locked_by
        self.locked_reason = reason

    def unlock(self, *, admin: bool) -> None:
        """Only an admin lifts an admin's lock (Nova's ``unlock_override`` policy)."""
        self._ensure_exists()
        if not self.locked:
            return
        if self.locked_by == LOCKED_BY_ADMIN and not admin:
            raise Forbidden(
                "Policy doesn't allow os_compute_api:os-lock-server:unlock:unlock_override to be performed."
            )
        self._unlocked()

    class Unlocked(Aggregate.Event):
        """The server was unlocked."""

    @event(Unlocked)
    def _unlocked(self) -> None:
        self.locked_by = None
        self.locked_reason = None

    # -- resize and cold migration (commands.servers.moves) -----------------------------------------
    def request_migration(
        self,
        migration_id: str,
        migration_type: str,
        new_flavor: dict[str, Any],
        *,
        admin: bool,
        target_host: str | None = None,
    ) -> None:
        """Nova's resize (a new flavor) or cold migration (the same flavor, another host): the scheduler
        places the move, the source host stops and removes the guest, the destination starts it; the
        server then waits in VERIFY_RESIZE for confirm or revert."""
        action = "resize" if migration_type == RESIZE else "migrate"
        self._ensure_exists()
        self._check_lock(admin)
        for attr, value, allowed in (
            ("vm_state", self.vm_state, (VmState.ACTIVE, VmState.STOPPED)),
            ("task_state", self.task_state, (None,)),
        ):
            if value not in allowed:
                raise InvalidState(f"Cannot '{action}' instance {self.id} while it is in {attr} {value}")
        if self.host is None:
            raise InvalidState(f"Cannot '{action}' instance {self.id} while it is on no host")
        if target_host == self.host:
            raise InvalidInput(f"The target host can't be the same one: {target_host}")
        self._migration_requested(
            migration_id, migration_type, self.host, dict(self.flavor), dict(new_flavor), target_host,
            self.vm_state == VmState.STOPPED,
        )  # fmt: skip

    class MigrationRequested(Aggregate.Event):
        """A resize (a new flavor) or cold migration (another host, the same flavor) was requested: the
        server is RESIZE/resize_prep until the scheduler places it. For a resize, the project's usage
        holds the larger flavor from now on (ProjectUsage.HoldingChanged in the same append)."""

        migration_id: str
        migration_type: str
        source: str
        old_flavor: dict[str, Any]
        new_flavor: dict[str, Any]
        target_host: str | None
        stopped: bool

    @event(MigrationRequested)
    def _migration_requested(
        self,
        migration_id: str,
        migration_type: str,
        source: str,
        old_flavor: dict[str, Any],
        new_flavor: dict[str, Any],
        target_host: str | None,
        stopped: bool,
    ) -> None:
        self.task_state = TaskState.RESIZE_PREP
        self.migration = {
            "id": migration_id,
            "type": migration_type,
            "source": source,
            "dest": None,
            "old_flavor": old_flavor,
            "new_flavor": new_flavor,
            "target_host": target_host,
            "stopped": stopped,
        }

    @property
    def awaiting_move(self) -> bool:
        """A resize or migration waiting for the scheduler."""
        return self.migration is not None and self.task_state == TaskState.RESIZE_PREP

    def _moving(self, task_state: str, step: str) -> dict[str, Any]:
        self._ensure_exists()
        if self.migration is None or self.task_state != task_state:
            raise InvalidState(
                f"Instance {self.id} is not at the migration step '{step}' (task_state {self.task_state})"
            )
        return self.migration

    def schedule_migration(self, dest: str) -> None:
        m = self._moving(TaskState.RESIZE_PREP, "schedule")
        if dest == m["source"]:
            raise InvalidState(f"Instance {self.id} is on {dest} already")
        self._migration_scheduled(m["id"], m["source"], dest)

    class MigrationScheduled(Aggregate.Event):
        """The scheduler placed the move on dest (appended with the destination's InstanceClaimed and the
        source's ClaimHandedToMigration): task_state resize_migrating; the source host stops and removes
        the guest next."""

        migration_id: str
        source: str
        dest: str

    @event(MigrationScheduled)
    def _migration_scheduled(self, migration_id: str, source: str, dest: str) -> None:
        self.task_state = TaskState.RESIZE_MIGRATING
        self.migration = {**(self.migration or {}), "dest": dest}

    def leave_source(self) -> None:
        """The source host stopped and removed the guest."""
        m = self._moving(TaskState.RESIZE_MIGRATING, "leave the source")
        self._migrated_from_source(m["id"], m["dest"])

    class MigratedFromSource(Aggregate.Event):
        """The source host stopped and removed the guest: task_state resize_migrated; the destination host
        defines and starts it next."""

        migration_id: str
        dest: str

    @event(MigratedFromSource)
    def _migrated_from_source(self, migration_id: str, dest: str) -> None:
        self.task_state = TaskState.RESIZE_MIGRATED

    def finish_migration(self, power_state: int) -> None:
        """The destination host defined the guest with the new flavor (and started it, unless the
        server was stopped): the server is there now, waiting for confirm or revert."""
        m = self._moving(TaskState.RESIZE_MIGRATED, "finish")
        self._migration_finished(m["id"], m["dest"], m["new_flavor"], power_state)

    class MigrationFinished(Aggregate.Event):
        """The destination host runs the guest with the new flavor (shut off if the server was stopped):
        the server is VERIFY_RESIZE on dest until confirmed or reverted."""

        migration_id: str
        dest: str
        flavor: dict[str, Any]
        power_state: int

    @event(MigrationFinished)
    def _migration_finished(
        self, migration_id: str, dest: str, flavor: dict[str, Any], power_state: int
    ) -> None:
        self.host = dest
        self.flavor = flavor
        self.vm_state = VmState.RESIZED
        self.task_state = None
        self.power_state = power_state

    @property
    def migrating(self) -> bool:
        """A resize or migration is under way (not yet waiting for confirm or revert)."""
        return self.migration is not None and self.task_state in (
            TaskState.RESIZE_PREP,
            TaskState.RESIZE_MIGRATING,
            TaskState.RESIZE_MIGRATED,
            TaskState.RESIZE_REVERTING,
        )

    def fail_migration(self, code: str, message: str, details: str, *, broken: bool) -> None:
        """The move failed: the server is back on its source with its old flavor (its resources there
        are its own again), in its old vm_state, or in ERROR when ``broken`` (its guest is gone)."""
        self._ensure_exists()
        if self.migration is None or not self.migrating:
            raise InvalidState(f"Instance {self.id} has no migration under way")
        m = self.migration
        vm_state = VmState.ERROR if broken else (VmState.STOPPED if m["stopped"] else VmState.ACTIVE)
        self._migration_failed(
            m["id"], m["source"], m["old_flavor"], vm_state, code, message[:255], details[:65535]
        )

    class MigrationFailed(Aggregate.Event):
        """The move failed before VERIFY_RESIZE (no valid host, or a hypervisor error): the server is back
        on its source with its old flavor and the fault; vm_state error when its guest is gone. Appended
        with the claims' return to the source."""

        migration_id: str
        source: str
        flavor: dict[str, Any]
        vm_state: str
        code: str
        message: str
        details: str

    @event(MigrationFailed)
    def _migration_failed(
        self,
        migration_id: str,
        source: str,
        flavor: dict[str, Any],
        vm_state: str,
        code: str,
        message: str,
        details: str,
    ) -> None:
        self.host = source
        self.flavor = flavor
        self.vm_state = vm_state
        self.task_state = None
        self.fault = {"code": code, "message": message, "details": details}
        self.migration = None

    def _resized(self, action: str, admin: bool) -> dict[str, Any]:
        self._ensure_exists()
        self._check_lock(admin)
        if self.vm_state != VmState.RESIZED or self.task_state is not None or self.migration is None:
            raise InvalidState(
                f"Cannot '{action}' instance {self.id} while it is in vm_state {self.vm_state}"
            )
        return self.migration

    def confirm_resize(self, *, admin: bool) -> None:
        """Keep the server where it is now; the source host's hold on the old resources goes."""
        m = self._resized("confirmResize", admin)
        self._resize_confirmed(m["id"], m["source"], VmState.STOPPED if m["stopped"] else VmState.ACTIVE)

    class ResizeConfirmed(Aggregate.Event):
        """The user kept the moved server (confirmResize): appended with the source's MigrationReleased and
        the usage settling on the new flavor."""

        migration_id: str
        source: str
        vm_state: str

    @event(ResizeConfirmed)
    def _resize_confirmed(self, migration_id: str, source: str, vm_state: str) -> None:
        self.vm_state = vm_state
        self.migration = None

    def request_revert(self, *, admin: bool) -> None:
        """Go back: the destination removes the guest, the source starts it again with the old flavor."""
        m = self._resized("revertResize", admin)
        self._revert_requested(m["id"], m["dest"])

    class RevertRequested(Aggregate.Event):
        """The user asked to go back (revertResize): REVERT_RESIZE; the destination removes the guest next."""

        migration_id: str
        dest: str

    @event(RevertRequested)
    def _revert_requested(self, migration_id: str, dest: str) -> None:
        self.task_state = TaskState.RESIZE_REVERTING

    def leave_dest(self) -> None:
        """The destination removed the guest: the server belongs to its source again."""
        m = self._moving(TaskState.RESIZE_REVERTING, "leave the destination")
        if self.host != m["dest"]:
            raise InvalidState(f"Instance {self.id} has left {m['dest']} already")
        self._reverted_on_dest(m["id"], m["source"], m["old_flavor"])

    class RevertedOnDest(Aggregate.Event):
        """The destination removed the guest: the server is on its source again with its old flavor
        (appended with the destination's InstanceReleased and the source's ClaimTakenBack); the source
        starts the guest next."""

        migration_id: str
        source: str
        flavor: dict[str, Any]

    @event(RevertedOnDest)
    def _reverted_on_dest(self, migration_id: str, source: str, flavor: dict[str, Any]) -> None:
        self.host = source
        self.flavor = flavor

    def finish_revert(self, power_state: int) -> None:
        m = self._moving(TaskState.RESIZE_REVERTING, "finish the revert")
        if self.host != m["source"]:
            raise InvalidState(f"Instance {self.id} is not back on {m['source']} yet")
        vm_state = VmState.STOPPED if m["stopped"] else VmState.ACTIVE
        self._resize_reverted(m["id"], vm_state, power_state)

    class ResizeReverted(Aggregate.Event):
        """The source runs the guest again with the old flavor: the revert is done (appended with the usage
        settling on the old flavor)."""

        migration_id: str
        vm_state: str
        power_state: int

    @event(ResizeReverted)
    def _resize_reverted(self, migration_id: str, vm_state: str, power_state: int) -> None:
        self.vm_state = vm_state
        self.task_state = None
        self.power_state = power_state
        self.migration = None

    # -- what the host found (reconciliation) -----------------------------------------------------
    def sync_power_state(self, observed: int, *, missing: bool) -> bool:
        """Record what the hypervisor reports when it disagrees with the log (Nova's power-state sync).

        Only a server at rest is synced (no task: an action or a spawn under way owns the guest).
        A guest that stopped or crashed on its own leaves an ACTIVE server SHUTOFF (stopped); a guest
        missing from its host puts the server in ERROR. False when there was nothing to record.
        """
        self._ensure_exists()
        if self.task_state is not None or self.vm_state == VmState.BUILDING or self.host is None:
            return False
        vm_state, reason = self.vm_state, "power state changed outside Stratus"
        if missing:
            vm_state, reason = VmState.ERROR, "guest missing from its hypervisor"
        elif self.vm_state == VmState.ACTIVE and observed in (
            PowerState.SHUTDOWN,
            PowerState.CRASHED,
            PowerState.NOSTATE,
        ):
            vm_state, reason = VmState.STOPPED, "guest stopped or crashed on its own"
        if (vm_state, observed) == (self.vm_state, self.power_state):
            return False
        self._power_state_synced(vm_state, observed, reason)
        return True

    class PowerStateSynced(Aggregate.Event):
        """The host's hypervisor reported a power state the log did not have (reconciliation, as Nova's
        power-state sync): the server's vm_state and power_state as recorded from then on (stopped for a
        guest that stopped or crashed on its own, error for a guest missing from its host), and why."""

        vm_state: str
        power_state: int
        reason: str

    @event(PowerStateSynced)
    def _power_state_synced(self, vm_state: str, power_state: int, reason: str) -> None:
        self.vm_state = vm_state
        self.power_state = power_state

    # -- deletion -------------------------------------------------------------------------------
    def request_delete(self, *, admin: bool = True) -> bool:
        """Start deleting; False when a deletion is already under way (a retried delete)."""
        self._ensure_exists()
        self._check_lock(admin)
        if self.task_state == TaskState.DELETING:
            return False
        self._deletion_requested()
        return True

    class DeletionRequested(Aggregate.Event):
        """Deletion was requested (task_state deleting)."""

    @event(DeletionRequested)
    def _deletion_requested(self) -> None:
        self.task_state = TaskState.DELETING

    @property
    def needs_host_cleanup(self) -> bool:
        """A host holds (or may hold) a domain and a claim for this instance."""
        return self.host is not None

    def mark_deleted(self) -> None:
        self._ensure_exists()
        self._deleted()

    class Deleted(Aggregate.Event):
        """The instance is gone (vm_state deleted); its host resources are released with it."""

    @event(Deleted)
    def _deleted(self) -> None:
        self.vm_state = VmState.DELETED
        self.task_state = None
        self.power_state = PowerState.NOSTATE
