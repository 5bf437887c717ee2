"""The first run: Keystone's default roles, an ``admin`` project and an ``admin`` user holding ``admin``.

``stratus bootstrap``'s composition root; ``stratus run`` calls ``main`` before the API starts.
Seeding twice changes nothing. The admin's password is ``STRATUS_ADMIN_PASSWORD`` when that is set
(a changed value replaces the old password, as ``keystone-manage bootstrap`` does); otherwise one is
generated the first time, returned to the caller to print once, and never written anywhere but as a
hash.
"""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import dataclass

import psycopg
from psycopg.rows import dict_row

from api.identity.credentials import Credentials, ensure_schema, password_hasher
from commands.bus import MessageBus, bootstrap
from commands.keystone.bootstrap import BootstrapIdentity, Bootstrapped
from commands.keystone.users import RecordPasswordSet
from projections.schema import ensure_live_schema
from stratus.config import Settings
from stratus.context import SYSTEM, CommandContext, acting

ADMIN_PROJECT = "admin"
ADMIN_USER = "admin"


@dataclass(frozen=True)
class Seeded:
    """What the seeding made: the admin's project and user, the log's position after it."""

    project_id: str
    user_id: str
    position: int
    # The password made up for the admin on this run (None: it was set before, or given).
    generated_password: str | None


def seed(bus: MessageBus, credentials: Credentials, password: str | None) -> Seeded:
    """Seed Keystone through ``bus`` and set the admin's password."""
    with acting(CommandContext(actor=SYSTEM)):
        done: Bootstrapped = bus.handle(BootstrapIdentity(ADMIN_PROJECT, ADMIN_USER))
        position = done.position
        generated = None
        stored = credentials.password_hash(done.user_id)
        if password is None and stored is None:
            password = generated = secrets.token_urlsafe(18)
        if password is not None and not (stored is not None and credentials.check(done.user_id, password)):
            with credentials.setting(done.user_id, password):
                position = bus.handle(RecordPasswordSet(done.user_id)).position
    return Seeded(done.project_id, done.user_id, position, generated)


def main(settings: Settings, password: str | None) -> Seeded:
    """Seed the deployment ``settings`` names (its event log and its database)."""
    from commands.app import Stratus
    from stratus.eventstore import Factory, NatsBridge
    from stratus.postgres import database_url

    url = settings.database_url or database_url(settings)
    bridge = NatsBridge(
        settings.nats_urls, name="stratus-bootstrap", seed_file=settings.nats_seed_file
    ).start()
    try:
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            ensure_schema(conn)
            ensure_live_schema(conn)  # so that the API can answer before the projector's first batch
            bus = bootstrap(Stratus(Factory(bridge=bridge, settings=settings)))
            credentials = Credentials(lambda: contextlib.nullcontext(conn), hasher=password_hasher(settings))
            return seed(bus, credentials, password)
    finally:
        bridge.close()
