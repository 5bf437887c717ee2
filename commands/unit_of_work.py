"""The unit of work every command handler runs in: load the decision state from the log, decide, append
the new events in one atomic append, and decide again when another writer appended first (optimistic
concurrency on the log).

A handler is a function ``handler(cmd, uow, **dependencies)``; ``@retried`` makes its whole body the
unit that is run again on a lost race, so no handler writes its own retry loop.
"""

from __future__ import annotations

import copy
import functools
import random
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError

from commands.app import Stratus
from commands.errors import Conflict, DomainError, NotFound
from commands.ledger import Ledger, ledger_id
from commands.quota import (
    DEFAULT_CLASS,
    DEFAULT_LIMITS,
    ProjectQuota,
    QuotaClass,
    quota_aggregate_id,
    quota_class_id,
)
from stratus import metrics

A = TypeVar("A", bound=Aggregate)
_Q = TypeVar("_Q", ProjectQuota, QuotaClass)
T = TypeVar("T")

CONFLICT = "Another request changed this resource at the same time; retry."


class _Attempt:
    """One decision of a command. On the first, an aggregate the command appends to may come from this
    process's cache without asking the log whether it moved on, because the append checks exactly that
    (its expected last sequence); if it did move on, the command decides again on fresh reads."""

    def __init__(self, optimistic: bool) -> None:
        self.optimistic = optimistic
        self.used_cache = False
        self.appended: set[UUID] = set()  # loaded to be appended to: cached again once saved


_attempt: ContextVar[_Attempt | None] = ContextVar("stratus_attempt", default=None)


@contextmanager
def _deciding(optimistic: bool) -> Iterator[_Attempt]:
    attempt = _Attempt(optimistic)
    token = _attempt.set(attempt)
    try:
        yield attempt
    finally:
        _attempt.reset(token)


@dataclass(frozen=True)
class Result:
    """The id a command acted on and the log position of its last event (for read-your-writes)."""

    id: str
    position: int


def exists(app: Stratus, aggregate_id: UUID) -> bool:
    """Whether the log has an aggregate with this id (of any kind, deleted or not)."""
    try:
        app.repository.get(aggregate_id)
    except AggregateNotFoundError:
        return False
    return True


class UnitOfWork:
    """The log as the command handlers of one process see it: loads (from this process's aggregate
    cache where a decision may), one atomic append per decision, and the retry around them.

    ``attempts``: decisions a command makes at most before a lost race is reported as a conflict."""

    def __init__(self, app: Stratus, *, attempts: int = 5) -> None:
        self.app = app
        self.attempts = attempts
        # project -> the epoch of its quota usage last seen current (``commands.loaders.usage``)
        self.usage_epochs: dict[str, int] = {}
        # quota (or quota class) -> (its version, itself; None while the log has none): ``_current``
        self._quotas: dict[UUID, tuple[int, Aggregate | None]] = {}

    def find(self, cls: type[A], aggregate_id: UUID, *, appended: bool = False) -> A | None:
        """The aggregate as the log has it. ``appended``: the command appends to it, so on its first
        decision a copy this process cached (saved or read before) will do (see ``_Attempt``)."""
        attempt = _attempt.get()
        if appended and attempt is not None:
            attempt.appended.add(aggregate_id)
            cached = self._cached(aggregate_id) if attempt.optimistic else None
            if isinstance(cached, cls):
                attempt.used_cache = True
                return cached
        try:
            agg: Aggregate = self.app.repository.get(aggregate_id)
        except AggregateNotFoundError:
            return None
        return agg if isinstance(agg, cls) else None

    def appending(self, aggregate: Aggregate) -> Aggregate:
        """Note that the command appends to ``aggregate`` (loaded or opened otherwise than by
        ``find(appended=True)``): once saved, this process caches it, so the next command finds it
        without a load (see ``_Attempt``)."""
        attempt = _attempt.get()
        if attempt is not None:
            attempt.appended.add(aggregate.id)
        return aggregate

    def limits(self, project_id: str) -> Mapping[str, int]:
        """The project's quota limits: its own where an admin set them, else the default quota
        class's, else Nova's built-in defaults."""
        defaults = self._current(QuotaClass, quota_class_id(DEFAULT_CLASS))
        project = self._current(ProjectQuota, quota_aggregate_id(project_id))
        return {**(defaults.limits if defaults else DEFAULT_LIMITS), **(project.overrides if project else {})}

    def _current(self, cls: type[_Q], aggregate_id: UUID) -> _Q | None:
        """A quota or quota class as the log has it now, kept in this process by its version: the log's
        head (read ahead with a create's other reads, ``recorder.prefetched``) says whether it changed
        since, and it is loaded again only then. Most have no events at all (a project without
        overrides, no default class set): those cost no load, so no read of the snapshot stream
        either. Never handed to a command to change (the cached object is shared): limits only."""
        version, known = self._quotas.get(aggregate_id, (0, None))
        if aggregate_id in self._quotas and not self.app.recorder.select_events(aggregate_id, gt=version):
            return known if isinstance(known, cls) else None
        found = self.find(cls, aggregate_id)
        if len(self._quotas) > 100_000:
            self._quotas.clear()
        self._quotas[aggregate_id] = (found.version, found) if found is not None else (0, None)
        return found

    def ledger(self, resource: str, owner: str) -> Ledger:
        """What ``resource`` counts for ``owner`` (``commands.ledger``), as the log has it."""
        return self.find(Ledger, ledger_id(resource, owner)) or Ledger(resource, owner)

    def get(self, cls: type[A], aggregate_id: UUID, what: str, *, appended: bool = False) -> A:
        agg = self.find(cls, aggregate_id, appended=appended)
        if agg is None:
            raise NotFound(f"{what} could not be found.")
        return agg

    def forget(self, aggregate_id: UUID) -> None:
        """Drop an aggregate from this process's cache: one no decision reads again (a closed usage
        epoch), which would otherwise keep its memory until enough others pushed it out."""
        cache = self.app.repository.cache
        if cache is not None:
            with suppress(KeyError):
                cache.get(aggregate_id, evict=True)

    def forget_if(self, aggregate_id: UUID, unwanted: Callable[[Aggregate], bool]) -> None:
        """Drop an aggregate from this process's cache if ``unwanted`` says so of the cached copy: one
        loaded only to learn that it is not this process's to act on (another host's server)."""
        cache = self.app.repository.cache
        if cache is None:
            return
        with suppress(KeyError):
            cached = cache.get(aggregate_id)
            if isinstance(cached, Aggregate) and unwanted(cached):
                cache.get(aggregate_id, evict=True)

    def _cached(self, aggregate_id: UUID) -> Aggregate | None:
        cache = self.app.repository.cache
        try:
            agg = cache.get(aggregate_id) if cache is not None else None
        except KeyError:
            return None
        return copy.deepcopy(agg) if isinstance(agg, Aggregate) else None

    def save(self, *aggregates: Aggregate) -> int:
        recordings = self.app.save(*aggregates)
        cache, attempt = self.app.repository.cache, _attempt.get()
        if cache is not None and attempt is not None:  # the next step here will find what it appended
            for agg in aggregates:
                if agg.id in attempt.appended:
                    cache.put(agg.id, copy.deepcopy(agg))
        if recordings:
            return recordings[-1].notification.id
        # Nothing new (a retried command): the log's head is a position the read is sure to cover.
        return self.app.recorder.max_notification_id() or 0

    def retrying(
        self,
        decide: Callable[[], T],
        attempts: int | None = None,
        backoff: float = 0.0,
        conflict: str = CONFLICT,
    ) -> T:
        """Run load-decide-append again when a concurrent writer got there first; ``conflict``: the
        message of the ``Conflict`` raised when the last attempt loses too.

        ``backoff``: the most seconds to wait (random, growing with each attempt) before deciding
        again, for aggregates many writers contend for (a project's usage).
        """
        for attempt in range((attempts or self.attempts) - 1):
            with _deciding(optimistic=attempt == 0) as deciding:
                try:
                    return decide()
                except IntegrityError:
                    metrics.COMMAND_RETRIES.inc()
                    if backoff:
                        time.sleep(random.uniform(0, backoff * min(attempt + 1, 8)))
                    continue
                except DomainError:
                    if deciding.used_cache:
                        continue  # decided on a cached aggregate that may have moved on: decide afresh
                    raise
        try:
            return decide()
        except IntegrityError as e:
            raise Conflict(conflict) from e

    def retrying_on_usage(self, decide: Callable[[], T]) -> T:
        """``retrying`` for a decision that appends to a project's quota usage: every create, fault
        and delete in a project does, so many may race; each re-decides after a short random wait."""
        return self.retrying(decide, attempts=max(self.attempts, 100), backoff=0.01)


def retried(
    handler: Callable[..., T] | None = None, *, on_usage: bool = False, conflict: str = CONFLICT
) -> Any:
    """Make a handler ``handler(cmd, uow, ...)`` one unit of work: its whole body (load, decide, save)
    runs again when its append loses a race (``UnitOfWork.retrying``; ``on_usage``:
    ``UnitOfWork.retrying_on_usage``). Work that must happen once (new ids, a generated key) is done
    before, by a handler that passes it on to a ``@retried`` one."""

    def wrap(handler: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(handler)
        def run(cmd: Any, uow: UnitOfWork, *args: Any, **kwargs: Any) -> T:
            def decide() -> T:
                return handler(cmd, uow, *args, **kwargs)

            if on_usage:
                return uow.retrying_on_usage(decide)
            return uow.retrying(decide, conflict=conflict)

        return run

    return wrap(handler) if handler is not None else wrap
