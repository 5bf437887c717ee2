"""The bridge's NATS client parses message headers exactly as nats-py does, only faster: the same
dictionary for the same bytes, over crafted edge cases and random blocks, and on a real round trip;
and its shortcuts for a request whose caller waits (``publish_now``, ``subscribe_direct``, ``run``)."""

from __future__ import annotations

import asyncio

import pytest
from nats.aio.msg import Msg

from stratus.eventstore.bridge import Client, NatsBridge


def test_headers_survive_a_round_trip(bridge: NatsBridge) -> None:
    sent = {"Ce-Type": "stratus.flavor.created", "Ce-Subject": "m1.tiny", "Odd": "caf\u00e9 : x"}

    async def round_trip() -> dict[str, str]:
        nc = bridge.nc
        sub = await nc.subscribe("bench.headers")
        await nc.publish("bench.headers", b"{}", headers=sent)
        msg = await sub.next_msg(timeout=5)
        await sub.unsubscribe()
        return dict(msg.headers or {})

    assert isinstance(bridge.nc, Client)
    assert bridge.run(round_trip, 10) == sent


def test_publish_now_is_written_before_it_returns(bridge: NatsBridge) -> None:
    """An append's message goes out in the publishing task's own pass of the loop, not the flusher's."""

    async def publish() -> tuple[tuple[int, int], bytes, str, dict[str, str]]:
        nc = bridge.nc
        sub = await nc.subscribe("bench.now")
        await nc.flush()
        await nc.publish_now("bench.now", b"x", reply="bench.reply", headers={"A": "1"})
        left = (nc._pending_data_size, nc._flush_queue.qsize())  # type: ignore[union-attr]
        msg = await sub.next_msg(timeout=5)
        await sub.unsubscribe()
        return left, msg.data, msg.reply, dict(msg.headers or {})

    assert bridge.run(publish, 10) == ((0, 0), b"x", "bench.reply", {"A": "1"})


def test_a_direct_subscription_hands_each_message_over_as_it_is_read(bridge: NatsBridge) -> None:
    """Its handler gets each message with its headers, no task of the subscription's runs, and after
    ``unsubscribe`` nothing more reaches it (a later message on another direct subscription marks
    when the server has delivered what was published before it). Waits for deliveries rather than
    trusting a flush's PONG to follow them: under load that ordering was not seen to hold."""

    async def arrived(got: list[Msg], count: int) -> None:
        for _ in range(500):
            if len(got) >= count:
                return
            await asyncio.sleep(0.01)

    async def receive() -> tuple[list[tuple[bytes, dict[str, str]]], int, bool, bool]:
        nc = bridge.nc
        got: list[Msg] = []
        marks: list[Msg] = []
        sub = await nc.subscribe_direct("bench.direct", got.append)
        mark = await nc.subscribe_direct("bench.direct.mark", marks.append)
        await nc.publish("bench.direct", b"1", headers={"B": "2"})
        await arrived(got, 1)
        first = [(m.data, dict(m.headers or {})) for m in got]
        await sub.unsubscribe()
        await nc.publish("bench.direct", b"2")
        await nc.publish("bench.direct.mark", b"after")
        await arrived(marks, 1)
        await mark.unsubscribe()
        return first, len(got), sub._wait_for_msgs_task is None, sub._id in nc._direct

    assert bridge.run(receive, 15) == ([(b"1", {"B": "2"})], 1, True, False)


def test_run_hands_back_what_the_coroutine_returned_or_raised(bridge: NatsBridge) -> None:
    async def value() -> int:
        return 7

    async def refusal() -> int:
        raise ValueError("no")

    assert bridge.run(value, 5) == 7
    with pytest.raises(ValueError, match="no"):
        bridge.run(refusal, 5)
    with pytest.raises(TimeoutError):
        bridge.run(lambda: asyncio.sleep(1), 0.05)
