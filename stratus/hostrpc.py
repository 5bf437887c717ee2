"""Questions the API asks one compute host directly, over core NATS request/reply (outside the log).

Some answers live only on the host and are not facts worth an event: a guest's serial console
output changes every second. The API asks ``_STRATUS.HOST.<host>.console`` and the host's
hypervisor worker answers from its disk, with no database and no log involved. Nothing here is
persisted; a host that does not answer within the timeout is reported as unavailable.

A process that asks hosts holds one ``HostRPC`` on its NATS bridge, built by its composition root and
given to what asks (the API's server actions); ``Responder`` is the host's side.

Requests and answers are small JSON documents:
``{"server_id": "<uuid>", "length": <lines or null>}`` →
``{"output": "..."}`` or ``{"error": "<code>", "message": "..."}``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import nats.errors
import orjson
from nats.aio.msg import Msg

from stratus.eventstore.bridge import NatsBridge
from stratus.eventstore.subjects import encode_token

SUBJECT_PREFIX = "_STRATUS.HOST"
CONSOLE = "console"
NOT_FOUND = "not_found"
UNAVAILABLE = "unavailable"
# The most console output one answer carries (NATS's default max payload is 1 MiB).
MAX_OUTPUT_BYTES = 512 * 1024


class HostUnavailable(Exception):
    """The host did not answer (its worker is down or NATS is away)."""


class HostRefused(Exception):
    """The host answered with an error (``code``: ``NOT_FOUND``, ``UNAVAILABLE``, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def subject(host: str, question: str) -> str:
    return f"{SUBJECT_PREFIX}.{encode_token(host)}.{question}"


def ask(bridge: NatsBridge, host: str, question: str, body: dict[str, Any], timeout: float = 5.0) -> Any:
    """The host's answer; ``HostUnavailable`` when none comes, ``HostRefused`` for its errors."""

    async def request() -> Msg:
        return await bridge.nc.request(subject(host, question), orjson.dumps(body), timeout=timeout)

    try:
        msg = bridge.run(request, timeout + 1.0)
    except (nats.errors.TimeoutError, nats.errors.NoRespondersError, TimeoutError) as e:
        raise HostUnavailable(f"Compute host {host} did not answer") from e
    except nats.errors.Error as e:
        raise HostUnavailable(f"Compute host {host} could not be asked: {e}") from e
    answer = orjson.loads(msg.data)
    if isinstance(answer, dict) and "error" in answer:
        raise HostRefused(str(answer["error"]), str(answer.get("message", "")))
    return answer


class HostRPC:
    """The asking side, one per process: questions to compute hosts over ``bridge``."""

    def __init__(self, bridge: NatsBridge) -> None:
        self._bridge = bridge

    def ask(self, host: str, question: str, body: dict[str, Any], timeout: float = 5.0) -> Any:
        """The host's answer; ``HostUnavailable`` when none comes, ``HostRefused`` for its errors."""
        return ask(self._bridge, host, question, body, timeout)


class Responder:
    """The host's side: answers ``question`` with ``answer(body)`` on the bridge's event loop.

    ``answer`` must be quick (it runs on the loop): it returns a JSON-able value, or raises
    ``HostRefused`` for an answer that is an error.
    """

    def __init__(self, bridge: NatsBridge, host: str) -> None:
        self._bridge = bridge
        self._host = host
        self._subs: list[Any] = []

    def serve(self, question: str, answer: Callable[[dict[str, Any]], Any]) -> None:
        async def on_request(msg: Msg) -> None:
            try:
                body = orjson.loads(msg.data)
                reply = answer(body if isinstance(body, dict) else {})
            except HostRefused as r:
                reply = {"error": r.code, "message": r.message}
            except orjson.JSONDecodeError:
                reply = {"error": "bad_request", "message": "the request is not JSON"}
            await msg.respond(orjson.dumps(reply))

        async def subscribe() -> Any:
            nc = self._bridge.nc
            sub = await nc.subscribe(subject(self._host, question), cb=on_request)
            # answer a question asked as soon as this returns: the server has the subscription once a
            # flush came back (else "no responders"); while NATS is away it is sent on reconnecting
            with contextlib.suppress(nats.errors.Error, TimeoutError):
                await nc.flush(timeout=5)
            return sub

        self._subs.append(self._bridge.run(subscribe, 10.0))

    def close(self) -> None:
        subs, self._subs = self._subs, []
        if self._bridge.closed:
            return
        for sub in subs:
            try:
                self._bridge.run(sub.unsubscribe, 5.0)
            except (nats.errors.Error, TimeoutError):
                continue  # the connection is going away; so is the subscription
