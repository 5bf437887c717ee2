"""``stratus rebuild``: open the log and PostgreSQL, rebuild the read models, report (the replay and the
swap are ``projections.rebuild``)."""

from __future__ import annotations

import sys

import psycopg

from processes.progress import Progress
from projections.rebuild import RebuildInProgress, rebuild
from projections.runner import open_event_log, read_models_url
from stratus import collector
from stratus.config import Settings
from stratus.eventstore.signing import Verifier


def main(settings: Settings, *, batch_size: int = 2000, keep_old: bool = False) -> int:
    """Rebuild, swap the new tables in, and say up to which position; 1 when another rebuild runs."""
    url = read_models_url(settings)
    with open_event_log(settings) as (log, mapper, quarantine), psycopg.connect(url, autocommit=True) as conn:
        trust = Verifier.load(settings.trust_registry)
        try:
            replay = Progress("stratus rebuild: replaying the log")
            with collector.frozen():
                result = rebuild(
                    conn, log, mapper, batch_size=batch_size, keep_old=keep_old, quarantine=quarantine,
                    trust=trust, progress=replay.update,
                )  # fmt: skip
            replay.finish()
        except RebuildInProgress as e:
            print(f"stratus rebuild: {e}", file=sys.stderr)
            return 1
    print(
        f"stratus rebuild: read models rebuilt up to position {result.position} "
        f"(replayed to {result.replayed} first, the rest at the swap) in {result.seconds:.1f} s"
        f", of which the replay {result.replay_seconds:.1f} s; "
        + (
            "its tables were the spare generation the projector made ahead of time"
            if result.spare
            else "its tables made now (no spare generation was ready: a running projector keeps one)"
        )
    )
    return 0
