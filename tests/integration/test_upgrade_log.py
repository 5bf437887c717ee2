"""A log written by an earlier release, checked in (tests/fixtures/upgrade_log/), imported into a fresh
stream of a signed deployment and replayed by the current code: every event's class still exists,
the read models rebuild with nothing quarantined, every aggregate loads (through the upcasters),
and ``audit verify`` passes, the old events as "unsigned before the cut-over" and what the current
release appends after it as signed (docs/upgrades.md)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.utils import resolve_topic
from psycopg import sql

from commands.flavors.create import CreateFlavor
from processes import trust
from projections.projector import Projector
from projections.schema import LIVE_SCHEMA, TABLES
from stratus.audit import export, signatures, verify
from stratus.context import Actor, CommandContext, acting
from stratus.eventstore import JetStreamApplicationRecorder
from stratus.eventstore.signing import Verifier
from stratus.quarantine import Quarantine
from tests.fixtures import upgrade_log
from tests.fixtures.commands import make_app
from tests.fixtures.facades.handlers import Handlers
from tests.fixtures.projections import read_models
from tests.fixtures.trust import Trusted

OPERATOR = Actor(user_id="operator", project_id="admin", roles=("admin",))
# Tables a log with every event type leaves rows in (those of deleted things only may be empty).
FILLED = (
    "instances", "hosts", "host_claims", "flavors", "projects", "users", "roles", "domains", "groups",
    "regions", "images", "image_tasks", "keypairs", "quota_classes", "migrations",
)  # fmt: skip


def _header(event: export.ExportedEvent, name: str) -> str:
    return next(v for k, v in event.headers.items() if k.lower() == name)


@pytest.mark.parametrize("path", upgrade_log.logs(), ids=lambda p: p.name)
def test_an_earlier_releases_log_imports_replays_and_verifies(
    trusted: Trusted, database_url: str, path: Path
) -> None:
    events = list(export.read_lines(upgrade_log.lines(path)))
    last = events[-1].position
    topics = Counter(_header(e, "ce-topic") for e in events)
    assert len(topics) >= 150  # every event type the release had (tests/fixtures/every_event.py)
    for topic in topics:  # an event's topic never changes (its class may gain an upcaster)
        resolve_topic(topic)

    operator = trusted.bridge("admin")
    JetStreamApplicationRecorder.from_settings(operator, trusted.settings).ensure_stream()
    imported = export.import_events(
        operator, trusted.settings.stream, trusted.settings.subject_prefix, events
    )
    assert imported == last == len(events)
    # The deployment signs from here on; the current release's API appends after the old log.
    trust.cut_over(trusted.directory, lambda: last)
    api = Handlers(make_app(trusted.bridge("api"), trusted.as_part("api")))
    with acting(CommandContext(actor=OPERATOR)):
        after = api.create_flavor(CreateFlavor("upgraded", "m1.upgraded", 1, 256, 1)).position
    assert after == last + 1

    # The read models rebuild from the old log and the new event, nothing quarantined.
    projector_app = make_app(trusted.bridge("projector"), trusted.as_part("projector"))
    quarantine = Quarantine(operator, log_stream=trusted.settings.stream)
    checks = Verifier.load(trusted.settings.trust_registry)
    assert checks is not None and checks.registry.signed_from == last + 1
    with read_models(database_url) as conn:
        projector = Projector(
            projector_app.recorder,  # type: ignore[arg-type]
            projector_app.mapper,
            conn,
            quarantine=quarantine,
            trust=checks,
        )
        assert projector.catch_up() == after
        counts = {
            table: conn.execute(
                sql.SQL("SELECT count(*) FROM {}.{}").format(
                    sql.Identifier(LIVE_SCHEMA), sql.Identifier(table)
                )
            ).fetchone()[0]  # type: ignore[index]
            for table, _ in TABLES
        }
        upgraded = conn.execute(
            f"SELECT name FROM {LIVE_SCHEMA}.flavors WHERE flavorid = 'upgraded'"
        ).fetchone()
    assert quarantine.list() == []
    assert [t for t in FILLED if not counts[t]] == []
    assert upgraded == ("m1.upgraded",)

    # Every aggregate of the old log loads with the current code (upcasters included).
    app = make_app(operator, trusted.settings)
    loaded: Counter[str] = Counter()
    for aggregate in {(_header(e, "ce-subject"), _header(e, "stratus-id-type")) for e in events}:
        raw, id_type = aggregate
        aggregate_id: Any = UUID(raw) if id_type == "uuid" else raw
        found: Any = app.repository.get(aggregate_id)
        loaded[type(found).__name__] += 1
    kinds = {topic.split(":")[1].split(".")[0] for topic in topics}
    assert set(loaded) == kinds

    # audit verify: the chain holds; the old events are unsigned before the cut-over, the new signed.
    s = trusted.settings
    auditor = trusted.as_part("auditor").nats_seed_file
    chain = verify.verify(s.nats_urls, s.stream, s.subject_prefix, seed_file=auditor)
    assert chain.ok and chain.last_position == after
    report = signatures.verify(s.nats_urls, s.stream, s.subject_prefix, checks, seed_file=auditor)
    assert (report.signed, report.unsigned, report.refused) == (1, last, 0)
    assert dict(report.by_identity) == {"api": 1}
