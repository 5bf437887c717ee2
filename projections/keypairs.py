"""The key-pair read model: what ``/os-keypairs`` lists and shows.

As for images, a key pair's row never needs reading before it is written, so each event becomes SQL
statements (``projections.statements``) computed without I/O.
"""

from __future__ import annotations

from commands.keypair import KeyPair
from projections.statements import Statement, Statements

TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (("keypairs", ("id",)),)

# Idempotent: a read-model schema made before this table existed gets it when next opened (its log
# holds no key-pair event, so it starts empty and correct).
DDL = """
CREATE TABLE IF NOT EXISTS {s}.keypairs (
    id uuid PRIMARY KEY,
    user_id text NOT NULL,
    name text NOT NULL,
    public_key text NOT NULL,
    fingerprint text NOT NULL,
    type text NOT NULL,
    created_at timestamptz NOT NULL,
    deleted boolean NOT NULL DEFAULT false,
    version integer NOT NULL,
    position bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS keypairs_user_name ON {s}.keypairs (user_id, name);
"""


def _created(e: KeyPair.Created, position: int) -> list[Statement]:
    return [
        (
            "INSERT INTO {s}.keypairs (id, user_id, name, public_key, fingerprint, type, created_at,"
            " version, position) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
            (
                e.originator_id, e.user_id, e.name, e.public_key, e.fingerprint,
                e.type, e.timestamp, e.originator_version, position,
            ),
        )
    ]  # fmt: skip


def _recreated(e: KeyPair.Recreated, position: int) -> list[Statement]:
    return [
        (
            "UPDATE {s}.keypairs SET public_key = %s, fingerprint = %s, type = %s, created_at = %s,"
            " deleted = false, version = %s, position = %s WHERE id = %s",
            (
                e.public_key, e.fingerprint, e.type, e.timestamp, e.originator_version, position,
                e.originator_id,
            ),
        )
    ]  # fmt: skip


def _deleted(e: KeyPair.Deleted, position: int) -> list[Statement]:
    return [
        (
            "UPDATE {s}.keypairs SET deleted = true, version = %s, position = %s WHERE id = %s",
            (e.originator_version, position, e.originator_id),
        )
    ]


APPLY: dict[type, Statements] = {
    KeyPair.Created: _created,
    KeyPair.Recreated: _recreated,
    KeyPair.Deleted: _deleted,
}
