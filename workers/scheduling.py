"""The scheduler's step: place one requested instance on a host, or record why none has room.

The host view is advisory; ``PlaceInstance`` (sent to the bus) claims the resources on the chosen host
under the Host aggregate's optimistic-concurrency check, so a stale view only means trying the next
candidate. Several schedulers may run at once: they cannot overcommit a host, they can only lose
a race and move on.
"""

from __future__ import annotations

import copy
import logging
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from eventsourcing.persistence import IntegrityError

from commands import loaders
from commands.bus import MessageBus
from commands.errors import Conflict, InsufficientResources, InvalidState, NotFound, NoValidHost
from commands.host import Host, Resources
from commands.instance import Instance
from commands.server_group import ServerGroup
from commands.servers.moves import FailMigration, ScheduleMigration
from commands.servers.scheduling import PlaceInstance, PlaceInstances, RecordPlacements, known_version
from commands.servers.spawn import FailInstance
from commands.states import TaskState, VmState
from stratus import metrics
from stratus.context import CommandContext, acting
from workers.filters import Filtered, Request, run_filters, traits_of
from workers.host_selection import NO_VALID_HOST, Selection, _shortage, ranked_for_group
from workers.host_view import HostView
from workers.outcome import DONE, Outcome, RetryPolicy
from workers.weighers import Multipliers, Ranking, weigh

log = logging.getLogger(__name__)

# Select again after every candidate filled up under us: other schedulers were faster.
_ROUNDS = 3
# How long a standing ranking keeps the normalization it was built with (then it is built again).
_RENORMALIZE_SECONDS = 5.0


@dataclass(frozen=True)
class Shard:
    """The hosts a scheduler places its batches on first, when several run (``STRATUS_SCHEDULER_SHARD``
    = ``i/n``: the hosts whose name hashes to ``i`` modulo ``n``). Schedulers that share the request
    consumer but rank the same hosts would pick the same best hosts, and one of two atomic appends
    touching a host loses; with shards their batches meet only when a shard is full."""

    index: int = 0
    count: int = 1

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"i/n"`` with 0 <= i < n; ``""``: every host."""
        if not text:
            return cls()
        try:
            index, count = (int(part) for part in text.split("/"))
        except ValueError:
            raise ValueError(f"STRATUS_SCHEDULER_SHARD must be i/n (e.g. 0/2), not {text!r}") from None
        if not 0 <= index < count:
            raise ValueError(f"STRATUS_SCHEDULER_SHARD {text!r}: need 0 <= i < n")
        return cls(index, count)

    def owns(self, hostname: str) -> bool:
        return self.count == 1 or zlib.crc32(hostname.encode()) % self.count == self.index


EVERY_HOST = Shard()


@dataclass
class _Standing:
    """The hosts that pass one request shape's filters, ranked, kept up to date between batches from
    the hosts the view saw change (instead of filtering and weighing every host for every batch)."""

    ranking: Ranking
    request: Request
    cursor: int  # the view's change cursor it is up to date with
    built: float


class Scheduling:
    """The scheduler's step for each request: filter and weigh the hosts of the view, claim on the
    best one under the Host aggregate's concurrency check, or fault the server with "No valid host"."""

    def __init__(
        self,
        bus: MessageBus,
        view: HostView,
        catch_up: Callable[[], None],
        *,
        retry: RetryPolicy | None = None,
        multipliers: Multipliers | None = None,
        rounds: int = _ROUNDS,
        siblings: Callable[[str, int], list[str]] | None = None,
        shard: Shard = EVERY_HOST,
    ) -> None:
        """``catch_up`` brings ``view`` up to the log's current end before a decision; ``rounds``:
        how many times to filter and weigh again when every candidate filled up under us."""
        self._bus = bus
        self._view = view
        self._catch_up = catch_up
        self._retry = retry or RetryPolicy()
        self._multipliers = multipliers or Multipliers()
        self._rounds = rounds
        # (reservation id, log position of a request) -> the servers requested with it, from there on
        self._siblings = siblings
        # servers whose multi-create this process settled (placed or failed, all together): their own
        # deliveries need no work (the scheduler clears it per batch)
        self.settled: set[str] = set()
        self._standing: dict[tuple[object, ...], _Standing] = {}
        self._shard = shard

    def handle(self, server_id: str, attempt: int, position: int = 0, *, created: bool = False) -> Outcome:
        """Place the server a request asks for (``created``: the request is its creation, which a
        server no longer being built has gone past: an unshelve or a move has its own request)."""
        if attempt > self._retry.give_up_after:
            # Handling this request kept killing the scheduler: record it rather than loop.
            return self._fail(server_id, f"Gave up after {attempt} deliveries of the request.")
        try:
            return self._place(server_id, position, created=created)
        except Conflict as e:
            retry = self._retry.retry(attempt, e.message)
            if retry is not None:
                return retry
            return self._fail(server_id, f"Gave up after {attempt} attempts: {e.message}")

    def _place(self, server_id: str, position: int = 0, *, created: bool = False) -> Outcome:
        try:
            inst = loaders.instance(self._bus.uow, server_id)
        except NotFound:
            return DONE  # deleted before it was placed
        if created and inst.vm_state != VmState.BUILDING:
            return DONE  # built (or failed) long ago: whatever it waits for now has its own request
        if inst.awaiting_move:
            return self._place_move(inst)
        if not inst.awaiting_host:
            return DONE  # placed or failed already: a redelivery
        need = Resources.of_flavor(inst.flavor)
        group = loaders.server_group_of(self._bus.uow, server_id)
        required, forbidden = traits_of(self._extra_specs(inst.flavor))
        request = Request(server_id, need, inst.availability_zone, group, required, forbidden)
        building = inst.vm_state == VmState.BUILDING  # an unshelve is never part of a multi-create
        if building and group is None and inst.reservation_id and position and self._siblings is not None:
            together = self._siblings(inst.reservation_id, position)
            if len(together) > 1 and together[0] == server_id:
                return self._place_together(together, request)
        details = ""
        target = inst.requested_host  # an admin's choice (2.74, 2.91): that host or none
        for _ in range(self._rounds):
            self._catch_up()
            hosts = [h for h in self._view.hosts() if target in (None, h.hostname)]
            filtered = run_filters(hosts, request, self._view.free_of)
            if not filtered.hosts:
                details = _why_none(request, filtered)
                break
            free = {h.hostname: filtered.free[h.hostname] for h in filtered.hosts}
            selection = Selection(tuple(weigh(free, self._multipliers)))
            if group is not None:
                selection = ranked_for_group(selection, group, server_id)
            for hostname in selection.hosts:
                try:
                    self._bus.handle(PlaceInstance(server_id, hostname))
                except InsufficientResources:
                    log.info("place %s: %s filled up meanwhile, trying the next host", server_id, hostname)
                    continue
                except (InvalidState, NotFound):
                    return DONE  # deleted, placed or failed by someone else meanwhile
                _placed(server_id, hostname)
                return DONE
            details = (
                f"Requested vcpus={need.vcpus}, memory_mb={need.memory_mb}, disk_gb={need.disk_gb}; "
                f"every candidate host ({', '.join(selection.hosts)}) filled up while placing."
            )
        return self._fail(server_id, details)

    def place_batch(
        self, requests: Sequence[tuple[Instance, CommandContext]]
    ) -> list[tuple[Instance, CommandContext]]:
        """New servers requested alone and in no group (``Instance.placed_alone``, as delivered: at
        version 1), placed in one pass over the host view and claimed in one atomic append, each event
        stamped with the context of the request it answers; a server no host has room for is failed.
        Returns those left to place one by one: the servers that changed since their request (deleted
        meanwhile), and all of them if the append lost a race to another scheduler every round."""
        pending = list(requests)
        for _ in range(self._rounds):
            self._catch_up()
            claimed: dict[str, Host] = {}
            placed: list[Instance] = []
            contexts: dict[tuple[str, int], CommandContext] = {}
            unplaceable: list[tuple[str, CommandContext, str]] = []
            said: list[tuple[str, str, CommandContext]] = []  # placed: (server, host, its request)
            why: dict[tuple[object, ...], str] = {}  # per request shape: a full cloud explains once
            for requested, ctx in pending:
                inst = copy.deepcopy(requested)
                need = Resources.of_flavor(inst.flavor)
                required, forbidden = traits_of(self._extra_specs(inst.flavor))
                request = Request(inst.server_id, need, inst.availability_zone, None, required, forbidden)
                host = self._claim_best(self._ranking(request, own=True), need, inst.server_id, claimed)
                if host is None and self._shard.count > 1:  # this shard is full: any host will do
                    host = self._claim_best(self._ranking(request, own=False), need, inst.server_id, claimed)
                if host is None:
                    shape = _shape(request)
                    if shape not in why:
                        why[shape] = self._no_room(request)
                    unplaceable.append((inst.server_id, ctx, why[shape]))
                    continue
                inst.schedule(host.hostname)
                placed.append(inst)
                contexts[(inst.server_id, inst.version)] = ctx
                said.append((inst.server_id, host.hostname, ctx))
                contexts[(str(host.id), host.version)] = ctx
            try:
                if placed:
                    self._bus.handle(RecordPlacements([*claimed.values(), *placed], contexts))
                    for server_id, hostname, ctx in said:
                        with acting(ctx):
                            _placed(server_id, hostname)
            except IntegrityError:
                self._standing.clear()  # they took room for claims that were not appended
                # Another scheduler claimed on one of these hosts first (decide again on a view that
                # has its claim), or a server changed since its request (leave it to the one-by-one path).
                uow = self._bus.uow
                changed = {r.server_id for r, _ in pending if known_version(uow, r.id) not in (None, 1)}
                left = [(r, c) for r, c in pending if r.server_id in changed]
                pending = [(r, c) for r, c in pending if r.server_id not in changed]
                if left:
                    return left + pending
                continue
            for server_id, ctx, details in unplaceable:
                with acting(ctx):
                    self._fail(server_id, details, created=True)
            return []
        return pending

    def _no_room(self, request: Request) -> str:
        """Why a server of a batch found no host (the fault's details)."""
        return _none_left(request, run_filters(self._view.hosts(), request, self._view.free_of))

    def _ranking(self, request: Request, *, own: bool = True) -> Ranking:
        """The standing ranking for the request's shape (flavor, zone, traits) over this scheduler's
        shard (``own``) or every host, brought up to date with the hosts that changed since the last
        batch; built afresh when it is new, when the view cannot say what changed, and every few
        seconds (to normalize the weighers over the hosts as they are)."""
        shape = (*_shape(request), own)
        mine = self._shard.owns if own else (lambda _name: True)
        standing = self._standing.get(shape)
        changed = self._view.changed_since(standing.cursor) if standing is not None else None
        if standing is None or changed is None or time.monotonic() - standing.built > _RENORMALIZE_SECONDS:
            hosts = [h for h in self._view.hosts() if mine(h.hostname)]
            filtered = run_filters(hosts, request, self._view.free_of)
            free = {h.hostname: filtered.free[h.hostname] for h in filtered.hosts}
            if len(self._standing) >= 64:
                self._standing.clear()
            standing = self._standing[shape] = _Standing(
                Ranking(free, self._multipliers), request, self._view.cursor, time.monotonic()
            )
            return standing.ranking
        for name in changed:
            host = self._view.named(name) if mine(name) else None
            passes = host is not None and run_filters([host], standing.request, self._view.free_of).hosts
            standing.ranking.update(name, self._view.free_of(host) if passes and host is not None else None)
        standing.cursor = self._view.cursor
        return standing.ranking

    def _claim_best(
        self, ranking: Ranking, need: Resources, server_id: str, claimed: dict[str, Host]
    ) -> Host | None:
        """Claim ``need`` on the best host the ranking offers (a copy of the view's host, which the
        claim checks again), or None."""
        while (name := ranking.take(need)) is not None:
            view_host = self._view.named(name)
            if view_host is None:
                ranking.drop(name)
                continue
            host = claimed.get(name) or copy.deepcopy(view_host)
            try:
                host.claim(server_id, need)
            except InsufficientResources:
                ranking.drop(name)  # fuller than its free resources said: not for this pass
                continue
            claimed[name] = host
            return host
        return None

    def _place_move(self, inst: Instance) -> Outcome:
        """A resize or cold migration: any host but the source (or the one an admin named) with room
        for the new flavor; the source keeps its claim under the migration until confirm or revert."""
        server_id, move = inst.server_id, inst.migration or {}
        flavor = move["new_flavor"]
        need = Resources.of_flavor(flavor)
        required, forbidden = traits_of(self._extra_specs(flavor))
        group = loaders.server_group_of(self._bus.uow, server_id)
        request = Request(server_id, need, inst.availability_zone, group, required, forbidden)
        details = ""
        for _ in range(self._rounds):
            self._catch_up()
            candidates = [
                h for h in self._view.hosts()
                if h.hostname != move["source"] and move["target_host"] in (None, h.hostname)
            ]  # fmt: skip
            filtered = run_filters(candidates, request, self._view.free_of)
            if not filtered.hosts:
                details = _why_none(request, filtered)
                break
            free = {h.hostname: filtered.free[h.hostname] for h in filtered.hosts}
            for hostname in weigh(free, self._multipliers):
                try:
                    self._bus.handle(ScheduleMigration(server_id, hostname))
                except InsufficientResources:
                    continue
                except (InvalidState, NotFound):
                    return DONE  # deleted, or placed by another scheduler meanwhile
                return DONE
            details = f"every candidate host filled up while placing the {move['type']}."
        try:
            if loaders.instance(self._bus.uow, server_id).awaiting_move:
                log.warning("move %s: %s %s", server_id, NO_VALID_HOST, details)
                self._bus.handle(FailMigration(server_id, NoValidHost.code, NO_VALID_HOST, details))
        except (InvalidState, NotFound):
            pass  # deleted, or placed after all
        return DONE

    def _waiting_for_host(self, server_ids: list[str]) -> list[str]:
        """Those of ``server_ids`` that still wait for a host."""
        waiting = []
        for s in server_ids:
            try:
                inst = loaders.instance(self._bus.uow, s)
            except NotFound:
                continue
            if inst.vm_state == VmState.BUILDING and inst.task_state == TaskState.SCHEDULING:
                waiting.append(s)
        return waiting

    def _place_together(self, server_ids: list[str], request: Request) -> Outcome:
        """A multi-create: choose a host for every server at once (each choice taking its room from the
        next), then claim them all in one atomic append; if they do not all fit, all fail (Nova)."""
        outcome = self._settle_together(server_ids, request)
        self.settled.update(server_ids)
        return outcome

    def _settle_together(self, server_ids: list[str], request: Request) -> Outcome:
        need, details = request.need, ""
        for _ in range(self._rounds):
            waiting = self._waiting_for_host(server_ids)
            if not waiting:
                return DONE
            self._catch_up()
            filtered = run_filters(self._view.hosts(), request, self._view.free_of)
            if not filtered.hosts:
                details = _why_none(request, filtered)
                break
            # weighed once for the request (as Nova normalizes), each pick taking its room from the next
            free = {h.hostname: filtered.free[h.hostname] for h in filtered.hosts}
            ranking = Ranking(free, self._multipliers)
            picks: list[PlaceInstance] = []
            for server_id in waiting:
                choice = ranking.take(need)
                if choice is None:
                    break
                picks.append(PlaceInstance(server_id, choice))
            if len(picks) < len(waiting):
                details = (
                    f"Requested {len(waiting)} servers of vcpus={need.vcpus}, memory_mb={need.memory_mb}, "
                    f"disk_gb={need.disk_gb} together; the hosts have room for {len(picks)}. "
                    f"{filtered.summary()}"
                )
                break
            try:
                self._bus.handle(PlaceInstances(tuple(picks)))
            except InsufficientResources:
                details = "every chosen host filled up while placing."
                continue  # the view was stale: choose again
            except (InvalidState, NotFound):
                continue  # one of them was deleted or placed meanwhile: the others still go together
            for pick in picks:
                _placed(pick.server_id, pick.hostname)
            return DONE
        for server_id in self._waiting_for_host(server_ids):
            self._fail(server_id, details)
        return DONE

    @staticmethod
    def _extra_specs(flavor: dict[str, object]) -> dict[str, str]:
        """The extra specs of the flavor as the request recorded it (Nova's request spec keeps the
        flavor too): nothing to read per server scheduled, and a flavor changed since does not move it."""
        specs = flavor.get("extra_specs")
        return {str(k): str(v) for k, v in specs.items()} if isinstance(specs, dict) else {}

    def give_up(self, server_id: str, details: str, *, created: bool = False) -> None:
        """Record that the server's request will not be placed (it was quarantined): a fault with
        ``details`` for a server waiting for a host, a failed move for one waiting to move; nothing
        for a server that moved on meanwhile."""
        try:
            if loaders.instance(self._bus.uow, server_id).awaiting_move:
                log.warning("move %s: %s %s", server_id, NO_VALID_HOST, details)
                self._bus.handle(FailMigration(server_id, NoValidHost.code, NO_VALID_HOST, details))
                return
        except (InvalidState, NotFound):
            return
        self._fail(server_id, details, created=created)

    def _fail(self, server_id: str, details: str, *, created: bool = False) -> Outcome:
        try:
            inst = loaders.instance(self._bus.uow, server_id)
            if not inst.awaiting_host or (created and inst.vm_state != VmState.BUILDING):
                return DONE  # placed by another scheduler after all, or being deleted (or unshelved)
            log.warning("place %s: %s %s", server_id, NO_VALID_HOST, details)
            self._bus.handle(FailInstance(server_id, NoValidHost.code, NO_VALID_HOST, details))
            metrics.SCHEDULER_PLACEMENTS.labels("no_valid_host").inc()
        except NotFound:
            return DONE  # deleted meanwhile: nothing to report on
        return DONE


def _placed(server_id: str, hostname: str) -> None:
    """Count a placement and say it (in the request's context: its line carries the boot's ids)."""
    metrics.SCHEDULER_PLACEMENTS.labels("placed").inc()
    log.info("placed %s on %s", server_id, hostname)


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


def _shape(request: Request) -> tuple[object, ...]:
    """What the filters and weighers see of a request outside a server group: its size, zone, traits."""
    return (request.need, request.zone, request.required_traits, request.forbidden_traits)


def _none_left(request: Request, filtered: Filtered) -> str:
    """Why a server of a batch found no host: none passed the filters, or those that did were filled
    by the servers placed before it."""
    if not filtered.hosts:
        return _why_none(request, filtered)
    need = request.need
    return (
        f"Requested vcpus={need.vcpus}, memory_mb={need.memory_mb}, disk_gb={need.disk_gb}; the "
        f"{len(filtered.hosts)} hosts that passed the filters have no room left for it. {filtered.summary()}"
    )


def _no_candidates(need: Resources, zone: str | None, group: ServerGroup | None) -> str:
    wanted = f"Requested vcpus={need.vcpus}, memory_mb={need.memory_mb}, disk_gb={need.disk_gb}"
    where = f" in availability zone {zone}" if zone else ""
    allowed = f" that the server group's {group.policy} policy allows" if group is not None else ""
    return f"{wanted}; no enabled compute host{where}{allowed}."
