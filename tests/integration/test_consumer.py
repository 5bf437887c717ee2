"""The workers' durable consumer against the real JetStream: a JetStream that is away for a moment
(a restart, a cluster electing a leader) is waited out, never the end of the worker's thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import nats.js.errors
import pytest

from commands.app import Stratus
from stratus.config import Settings
from stratus.eventstore import EventStoreUnavailable, NatsBridge
from workers.consumer import DurableConsumer, serve, when_ready
from workers.scheduler import SCHEDULER


class Away:
    """A pull subscription whose JetStream answers 503 (no stream leader) ``times`` times."""

    def __init__(self, inner: Any, times: int) -> None:
        self.inner, self.left, self.calls = inner, times, 0

    async def fetch(self, batch: int, timeout: float) -> list[Any]:
        self.calls += 1
        if self.left > 0:
            self.left -= 1
            raise nats.js.errors.ServiceUnavailableError
        return await self.inner.fetch(batch, timeout=timeout)

    async def unsubscribe(self) -> None:
        await self.inner.unsubscribe()


def test_a_jetstream_that_is_away_is_waited_out(
    app: Stratus, bridge: NatsBridge, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    consumer = DurableConsumer(bridge, stream=settings.stream, durable="away", filter_subjects=[">"]).open()
    consumer._sub = away = Away(consumer._sub, times=2)
    with pytest.raises(EventStoreUnavailable, match="JetStream unavailable"):
        consumer.fetch(1, 0.1)

    monkeypatch.setattr("workers.consumer._STORE_RETRY_DELAY", 0.01)
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            serve(consumer, lambda d: pytest.fail("nothing to deliver"), stop, actor=SCHEDULER, poll=0.05)
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        stop.wait(0.5)
        assert thread.is_alive() and away.calls > 3  # went on fetching after the second 503
    finally:
        stop.set()
        thread.join(5)
        consumer.close()
    assert errors == []


def test_a_binding_answered_503_again_and_again_is_made_anew(
    app: Stratus, bridge: NatsBridge, settings: Settings
) -> None:
    """After a cluster lost its leader twice, fetches on the old binding were answered 503 for
    minutes while appends worked (docs/reliability.md): three failures in a row bind again."""
    consumer = DurableConsumer(bridge, stream=settings.stream, durable="stuck", filter_subjects=[">"]).open()
    consumer._sub = stuck = Away(consumer._sub, times=1_000_000)
    try:
        for _ in range(3):
            with pytest.raises(EventStoreUnavailable):
                consumer.fetch(1, 0.1)
        assert consumer._sub is not stuck and stuck.calls == 3
        assert consumer.fetch(1, 0.1) == []  # the new binding answers
    finally:
        consumer.close()


class Deaf:
    """A pull subscription that hears nothing: every fetch waits and comes back empty, as a binding
    whose pull requests or answers go nowhere does."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, 0

    async def fetch(self, batch: int, timeout: float) -> list[Any]:
        self.calls += 1
        await asyncio.sleep(timeout)
        raise TimeoutError

    async def unsubscribe(self) -> None:
        await self.inner.unsubscribe()


def test_a_deaf_binding_with_messages_waiting_is_made_anew(
    app: Stratus, bridge: NatsBridge, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Empty fetches are normal, but not while the consumer holds messages no one was given (a fault
    campaign's hypervisor got nothing for 90 s after a stream leader's fault, an action waiting):
    after a quiet spell the binding asks, and binds again."""
    monkeypatch.setattr("workers.consumer._IDLE_CHECK_SECONDS", 0.3)
    consumer = DurableConsumer(bridge, stream=settings.stream, durable="deaf", filter_subjects=[">"]).open()
    consumer._sub = deaf = Deaf(consumer._sub)
    try:
        for _ in range(4):  # quiet, nothing waiting: the binding is kept
            assert consumer.fetch(1, 0.1) == []
        assert consumer._sub is deaf
        bridge.run(lambda: bridge.js.publish(f"{settings.subject_prefix}.deaf.test", b"{}"), 10)
        got: list[Any] = []
        for _ in range(20):
            got += consumer.fetch(1, 0.1)
            if got:
                break
        assert consumer._sub is not deaf and len(got) == 1
    finally:
        consumer.close()


def test_a_consumer_opened_while_jetstream_elects_its_leaders_waits_for_them(
    app: Stratus, bridge: NatsBridge, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A part restarted while the cluster elects leaders met "nats: timeout" asking for its consumer
    and exited (docs/reliability.md, finding 4): opening is tried again until JetStream answers."""
    from workers import consumer as module

    real, timeouts = module.reconcile, [nats.errors.TimeoutError(), nats.js.errors.ServiceUnavailableError()]

    async def electing(*args: Any, **kwargs: Any) -> None:
        if timeouts:
            raise timeouts.pop(0)
        await real(*args, **kwargs)

    monkeypatch.setattr(module, "reconcile", electing)
    monkeypatch.setattr(module, "_OPEN_DELAYS", (0.01,))
    consumer = DurableConsumer(bridge, stream=settings.stream, durable="electing", filter_subjects=[">"])
    with pytest.raises(TimeoutError):
        consumer.open()  # one attempt alone fails, as before
    opened = when_ready("opening consumer electing", consumer.open, threading.Event())
    try:
        assert opened is consumer and timeouts == [] and consumer.fetch(1, 0.1) == []
    finally:
        consumer.close()
    stopped = threading.Event()
    stopped.set()
    assert when_ready("opening", lambda: pytest.fail("not tried once stopped"), stopped) is None
