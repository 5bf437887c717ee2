"""The scheduler's step: place one requested instance on a host, or record why none has room.

The host view is advisory; ``Handlers.place_instance`` claims the resources on the chosen host
under the Host aggregate's optimistic-concurrency check, so a stale view only means trying the next
candidate. Several schedulers may run at once: they cannot overcommit a host, they can only lose
a race and move on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from commands.errors import Conflict, InsufficientResources, InvalidState, NotFound, NoValidHost
from commands.handlers import FailInstance, Handlers, PlaceInstance
from commands.host import Resources
from commands.server_group import ServerGroup
from commands.states import TaskState, VmState
from workers.filters import Filtered, Request, run_filters, traits_of
from workers.host_selection import NO_VALID_HOST, Selection, _shortage, ranked_for_group
from workers.host_view import HostView
from workers.outcome import DONE, Outcome, RetryPolicy
from workers.weighers import Multipliers, weigh

log = logging.getLogger(__name__)

# Select again after every candidate filled up under us: other schedulers were faster.
_ROUNDS = 3


class Placement:
    def __init__(
        self,
        handlers: Handlers,
        view: HostView,
        catch_up: Callable[[], None],
        *,
        retry: RetryPolicy | None = None,
        multipliers: Multipliers | None = None,
        rounds: int = _ROUNDS,
    ) -> None:
        """``catch_up`` brings ``view`` up to the log's current end before a decision; ``rounds``:
        how many times to filter and weigh again when every candidate filled up under us."""
        self._handlers = handlers
        self._view = view
        self._catch_up = catch_up
        self._retry = retry or RetryPolicy()
        self._multipliers = multipliers or Multipliers()
        self._rounds = rounds

    def handle(self, server_id: str, attempt: int) -> Outcome:
        if attempt > self._retry.give_up_after:
            # Handling this request kept killing the scheduler: record it rather than loop.
            return self._fail(server_id, f"Gave up after {attempt} deliveries of the request.")
        try:
            return self._place(server_id)
        except Conflict as e:
            retry = self._retry.retry(attempt, e.message)
            if retry is not None:
                return retry
            return self._fail(server_id, f"Gave up after {attempt} attempts: {e.message}")

    def _place(self, server_id: str) -> Outcome:
        try:
            inst = self._handlers.instance(server_id)
        except NotFound:
            return DONE  # deleted before it was placed
        if inst.vm_state != VmState.BUILDING or inst.task_state != TaskState.SCHEDULING:
            return DONE  # placed or failed already: a redelivery
        need = Resources.of_flavor(inst.flavor)
        group = self._handlers.server_group_of(server_id)
        required, forbidden = traits_of(self._extra_specs(inst.flavor))
        request = Request(server_id, need, inst.availability_zone, group, required, forbidden)
        details = ""
        for _ in range(self._rounds):
            self._catch_up()
            filtered = run_filters(self._view.hosts(), request)
            if not filtered.hosts:
                details = _why_none(request, filtered)
                break
            free = {h.hostname: h.free() for h in filtered.hosts}
            selection = Selection(tuple(weigh(free, self._multipliers)))
            if group is not None:
                selection = ranked_for_group(selection, group, server_id)
            for hostname in selection.hosts:
                try:
                    self._handlers.place_instance(PlaceInstance(server_id, hostname))
                except InsufficientResources:
                    log.info("place %s: %s filled up meanwhile, trying the next host", server_id, hostname)
                    continue
                except (InvalidState, NotFound):
                    return DONE  # deleted, placed or failed by someone else meanwhile
                return DONE
            details = (
                f"Requested vcpus={need.vcpus}, memory_mb={need.memory_mb}, disk_gb={need.disk_gb}; "
                f"every candidate host ({', '.join(selection.hosts)}) filled up while placing."
            )
        return self._fail(server_id, details)

    def _extra_specs(self, flavor: dict[str, object]) -> dict[str, str]:
        """The flavor's extra specs as they are now (the instance keeps only its sizes)."""
        try:
            return dict(self._handlers.flavor(str(flavor["id"])).extra_specs)
        except NotFound:
            return {}  # deleted since: no trait requirements can be read

    def _fail(self, server_id: str, details: str) -> Outcome:
        try:
            inst = self._handlers.instance(server_id)
            if inst.task_state != TaskState.SCHEDULING:
                return DONE  # placed by another scheduler after all, or being deleted
            log.warning("place %s: %s %s", server_id, NO_VALID_HOST, details)
            self._handlers.fail_instance(FailInstance(server_id, NoValidHost.code, NO_VALID_HOST, details))
        except NotFound:
            return DONE  # deleted meanwhile: nothing to report on
        return DONE


def _why_none(request: Request, filtered: Filtered) -> str:
    """The fault's details: why, and Nova's filter results."""
    if filtered.removed_by == "ResourcesFilter":
        before = filtered.last_hosts
        why = _shortage({h.hostname: h.free() for h in before}, request.need)
    elif filtered.removed_by == "TraitsFilter":
        wanted = sorted(request.required_traits) + [f"!{t}" for t in sorted(request.forbidden_traits)]
        why = f"no compute host has the traits {', '.join(wanted)}."
    elif filtered.results == ["ComputeFilter: (start: 0, end: 0)"]:
        why = _shortage({}, request.need)
    else:
        why = _no_candidates(request.need, request.zone, request.group)
    return f"{why} {filtered.summary()}"


def _no_candidates(need: Resources, zone: str | None, group: ServerGroup | None) -> str:
    wanted = f"Requested vcpus={need.vcpus}, memory_mb={need.memory_mb}, disk_gb={need.disk_gb}"
    where = f" in availability zone {zone}" if zone else ""
    allowed = f" that the server group's {group.policy} policy allows" if group is not None else ""
    return f"{wanted}; no enabled compute host{where}{allowed}."
