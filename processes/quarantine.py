"""``stratus quarantine list``: the events the parts following the log skipped (JetStream only)."""

from __future__ import annotations

import dataclasses

import orjson

from stratus.config import Settings
from stratus.eventstore import NatsBridge
from stratus.quarantine import Quarantine


def list_records(settings: Settings, *, part: str | None, as_json: bool) -> int:
    """Print every record (of ``part`` only, if given), oldest first, as a table or JSON lines."""
    with NatsBridge(
        settings.nats_urls, name="stratus-quarantine", seed_file=settings.nats_seed_file
    ) as bridge:
        records = Quarantine(bridge, log_stream=settings.stream).list(part)
    if as_json:
        for r in records:
            print(orjson.dumps(dataclasses.asdict(r)).decode())
        return 0
    if not records:
        print("no quarantined events")
        return 0
    print(f"{'POSITION':>10}  {'PART':<24} {'AT':<20} {'TOPIC':<40} {'ORIGINATOR':<36} ERROR")
    for r in records:
        print(f"{r.position:>10}  {r.part:<24} {r.at:<20} {r.topic:<40} {r.originator_id:<36} "
              f"{r.error}: {r.reason}")  # fmt: skip
    return 0
