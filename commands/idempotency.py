"""Idempotency keys: a request retried with the same key acts once and gets the first answer.

A client that sends ``Idempotency-Key: K`` with a mutating request may send it again after any
failure (a timeout, a dropped connection, a 503) without acting twice. The record of a key is one
small aggregate per (scope, key), the scope being the caller's project (or its user when it has no
project), so two projects' keys never meet:

- ``Claimed`` (the request's fingerprint: an HMAC of its method, path, query and body under a key
  the API nodes hold, so the log never holds a digest that would confirm a guessed password or user
  data) is appended **in the same
  atomic append** as the request's first effect (``Stratus.save`` asks ``claim()`` for it). So the
  log has the claim if and only if the request acted, whatever crashes between the append and the
  client reading the answer: a process dying after JetStream stored the batch, an acknowledgement
  lost on the way back, an API worker killed while rendering.
- ``Answered`` (status, body and headers) is appended after the answer is formed, in a second
  append. A retry finding it replays it; a retry finding only the claim (the crash window between
  the two appends) runs the request again in *replay* mode: every command it sends to the bus
  returns the result the claimed append stands for instead of deciding again (``replayed``), so
  the resource renders the answer the first run would have, and that answer is then recorded.

Why not JetStream's ``Nats-Msg-Id`` deduplication with a command id derived from the key: message
ids are ``aggregate:version`` (the recorder relies on that for its own retries), a retry decides
again on the new state and so appends other versions under other ids, and the duplicate window is
minutes long. Only a record on the log, in the effect's own atomic append, answers "did it act?"
for ever and on every node.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from commands.errors import Conflict, DomainError

_NS = uuid5(NAMESPACE_URL, "urn:stratus:idempotency-key")
MAX_KEY_LENGTH = 255


def key_id(scope: str, key: str) -> UUID:
    """The id of the record of ``key`` in ``scope`` (a project, or ``user:<id>``)."""
    return uuid5(_NS, f"{scope}\x00{key}")


class KeyReused(DomainError):
    """The key was used before for another request (another method, path or body)."""

    code = "stratus.idempotency_key_reused"


class KeyInUse(Conflict):
    """Another request with the same key is being carried out right now."""

    code = "stratus.idempotency_key_in_use"


class AnswerLost(Conflict):
    """The request acted under the key, its answer was lost, and what its command returned cannot be
    rebuilt from the claim (only a plain ``Result`` can)."""

    code = "stratus.idempotency_answer_lost"


class IdempotencyKey(Aggregate):
    """One idempotency key of one scope: the request it was first used for, and its answer."""

    @staticmethod
    def create_id(scope: str, key: str) -> UUID:
        return key_id(scope, key)

    class Claimed(Aggregate.Created):
        """A request with an idempotency key acted: appended in the same atomic append as its first
        effect. ``target``: the id the command acted on (what a replay answers with)."""

        scope: str
        key: str
        fingerprint: str
        command: str
        target: str

    @event(Claimed)
    def __init__(self, scope: str, key: str, fingerprint: str, command: str, target: str) -> None:
        self.scope = scope
        self.key = key
        self.fingerprint = fingerprint
        self.command = command
        self.target = target
        self.answer: tuple[int, str, dict[str, str]] | None = None

    def check(self, fingerprints: Collection[str]) -> None:
        """Refuse the key for a request other than the one it was first used for (``fingerprints``:
        the request's, one per fingerprint key the deployment knows)."""
        if self.fingerprint not in fingerprints:
            raise KeyReused(
                "This Idempotency-Key was already used with a different request (method, path or body)."
            )

    def record_answer(self, status: int, body: str, headers: dict[str, str]) -> None:
        """Keep the answer the request got (once: the first answer is the answer)."""
        if self.answer is None:
            self._answered(status, body, headers)

    class Answered(Aggregate.Event):
        """The answer a request with an idempotency key got: what a retry with the key is given."""

        status: int
        body: str
        headers: dict[str, str]

    @event(Answered)
    def _answered(self, status: int, body: str, headers: dict[str, str]) -> None:
        self.answer = (status, body, dict(headers))


@dataclass
class Keyed:
    """One request made under an idempotency key, while it runs (in ``_keyed``)."""

    scope: str
    key: str
    fingerprint: str
    replay: Any = None  # the result every command returns instead of acting (replay mode)
    command: object | None = None  # the command being handled
    claimed: bool = False  # the claim is on the log (appended by this request)
    generated: list[str] = field(default_factory=list)  # ids drawn for the command, in order

    @property
    def record_id(self) -> UUID:
        return key_id(self.scope, self.key)


_keyed: ContextVar[Keyed | None] = ContextVar("stratus_idempotency_key", default=None)


def enter(request: Keyed) -> Token[Keyed | None]:
    """From now on this thread's commands run under ``request``'s key, until ``leave(token)``."""
    return _keyed.set(request)


def leave(token: Token[Keyed | None]) -> None:
    """The request under a key is over."""
    _keyed.reset(token)


@contextmanager
def keyed(request: Keyed | None) -> Iterator[Keyed | None]:
    """Run the commands of one request under its key (None: no key); ``enter`` and ``leave`` as a
    block, for callers whose request is one block (a CLI, the tests)."""
    token = _keyed.set(request)
    try:
        yield request
    finally:
        leave(token)


@contextmanager
def handling(command: object) -> Iterator[Any]:
    """Around one command on the bus: yields the result to return without acting (replay mode), or
    None, and remembers the command for the claim."""
    request = _keyed.get()
    if request is None:
        yield None
        return
    if request.replay is not None:
        yield request.replay
        return
    if request.command is None:
        request.command = command
    yield None


def drawn(new_id: Any) -> Any:
    """An id generator that also notes, for the claim, the ids it draws under a key."""

    def draw() -> Any:
        value = new_id()
        request = _keyed.get()
        if request is not None and not request.claimed:
            request.generated.append(str(value))
        return value

    return draw


def claim() -> IdempotencyKey | None:
    """The claim to append with the current request's first effect (None: no key, or claimed)."""
    request = _keyed.get()
    if request is None or request.claimed or request.replay is not None:
        return None
    return IdempotencyKey(
        request.scope, request.key, request.fingerprint, _name(request.command), _target(request)
    )


def claimed() -> None:
    """The claim was appended."""
    request = _keyed.get()
    if request is not None:
        request.claimed = True


def _name(command: object | None) -> str:
    return type(command).__name__ if command is not None else ""


def _target(request: Keyed) -> str:
    """What the command acted on: the first id drawn for it (a create), else its first id field that
    is set (``server_id``, ``flavorid``, a chosen ``image_id``...), else its first field."""
    if request.generated:
        return request.generated[0]
    command = request.command
    if command is None or not dataclasses.is_dataclass(command):
        return ""
    fields = [(f.name, getattr(command, f.name)) for f in dataclasses.fields(command)]
    value = next((v for name, v in fields if name.endswith("id") and v), fields[0][1] if fields else None)
    return "" if value is None else str(value)
