"""Who is acting, and why: the context every appended event is stamped with.

The API sets it per request, workers per consumed event. The event store reads it when it appends,
so actor, request, correlation and causation ids reach the envelope without threading them through
every domain method. It never holds secrets (no tokens, no passwords).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Actor:
    """Who asks: a user, the project the token is scoped to ("" for the system scope), their roles."""

    user_id: str
    project_id: str  # "" for a token scoped to the system (Keystone's system scope)
    roles: tuple[str, ...] = ()

    @property
    def system(self) -> bool:
        return self.project_id == ""


SYSTEM = Actor(user_id="stratus", project_id="service", roles=("service",))


@dataclass(frozen=True)
class CommandContext:
    """Who asks and in which conversation: the actor and the request, correlation and causation ids
    every event it leads to records."""

    actor: Actor = SYSTEM
    request_id: str = field(default_factory=lambda: f"req-{uuid.uuid4()}")
    # The conversation this command belongs to (the first request's id, carried through workers).
    correlation_id: str = ""
    # The id of the event or command that caused this one.
    causation_id: str = ""

    def __post_init__(self) -> None:
        if not self.correlation_id:
            object.__setattr__(self, "correlation_id", self.request_id)

    def caused_by(self, event_id: str, correlation_id: str | None = None) -> CommandContext:
        """The context of work done in reaction to the event ``event_id``."""
        return replace(
            self,
            request_id=f"req-{uuid.uuid4()}",
            causation_id=event_id,
            correlation_id=correlation_id or self.correlation_id,
        )


_current: ContextVar[CommandContext | None] = ContextVar("stratus_command_context", default=None)


def current() -> CommandContext:
    ctx = _current.get()
    return ctx if ctx is not None else CommandContext()


def peek() -> CommandContext | None:
    """The context installed now, if any (a log line outside any command has none)."""
    return _current.get()


@contextlib.contextmanager
def acting(ctx: CommandContext) -> Iterator[CommandContext]:
    token = _current.set(ctx)
    try:
        yield ctx
    finally:
        _current.reset(token)


# Per event, for an append that carries the work of several commands (a scheduler placing a batch of
# requests in one atomic append): (originator id, version) -> the context of the command that
# decided that event. Events not named here take the current context.
_per_event: ContextVar[Mapping[tuple[str, int], CommandContext] | None] = ContextVar(
    "stratus_event_contexts", default=None
)


def event_contexts() -> Mapping[tuple[str, int], CommandContext] | None:
    return _per_event.get()


@contextlib.contextmanager
def acting_per_event(contexts: Mapping[tuple[str, int], CommandContext]) -> Iterator[None]:
    """Stamp each event ``(originator id, version)`` of the appends inside with its own context."""
    token = _per_event.set(contexts)
    try:
        yield
    finally:
        _per_event.reset(token)
