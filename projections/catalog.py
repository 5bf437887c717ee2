"""The image and key-pair read models: what ``/image/v2/images`` and ``/os-keypairs`` list and show.

Like the identity tables, their rows never need reading before they are written (a creation inserts
the row, every later event overwrites the fields it carries), so each event becomes SQL statements,
computed here without I/O, that the batch's view runs in order with the batch's other writes. The
tables live beside the others in each read-model schema, so a rebuild rebuilds them too.
"""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from commands.image import ACTIVE, DEACTIVATED, DELETED, QUEUED, Image
from commands.keypair import KeyPair
from commands.task import FAILURE, PENDING, Task
from stratus.serialization import dumps

Statement = tuple[str, tuple[Any, ...]]  # SQL with ``{s}`` for the schema, and its parameters

ImageCreated: type = Image.Created  # type: ignore[attr-defined]
ImageUploaded: type = Image.Uploaded  # type: ignore[attr-defined]
ImageDeleted: type = Image.Deleted  # type: ignore[attr-defined]
ImageUpdated: type = Image.Updated  # type: ignore[attr-defined]
ImageDeactivated: type = Image.Deactivated  # type: ignore[attr-defined]
ImageReactivated: type = Image.Reactivated  # type: ignore[attr-defined]
MemberAdded: type = Image.MemberAdded
MemberStatusChanged: type = Image.MemberStatusChanged
MemberRemoved: type = Image.MemberRemoved
TaskCreated: type = Task.Created  # type: ignore[attr-defined]
TaskFailed: type = Task.Failed  # type: ignore[attr-defined]
KeyPairCreated: type = KeyPair.Created  # type: ignore[attr-defined]
KeyPairRecreated: type = KeyPair.Recreated  # type: ignore[attr-defined]
KeyPairDeleted: type = KeyPair.Deleted  # type: ignore[attr-defined]

HANDLED: tuple[type, ...] = (
    ImageCreated, ImageUploaded, ImageDeleted, ImageUpdated, ImageDeactivated, ImageReactivated,
    MemberAdded, MemberStatusChanged, MemberRemoved, TaskCreated, TaskFailed,
    KeyPairCreated, KeyPairRecreated, KeyPairDeleted,
)  # fmt: skip
# The image columns an ``Image.Updated`` may set (its ``fields``), and how each is stored.
_UPDATED_COLUMNS = (
    "name", "visibility", "protected", "os_hidden", "min_disk", "min_ram", "tags", "owner",
    "container_format", "disk_format",
)  # fmt: skip

TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("images", ("id",)),
    ("image_members", ("image_id", "member_id")),
    ("image_tasks", ("id",)),
    ("keypairs", ("id",)),
)

# Idempotent: a read-model schema made before these tables existed gets them when next opened (its
# log holds no image or key-pair event, so they start empty and correct).
DDL = """
CREATE TABLE IF NOT EXISTS {s}.images (
    id uuid PRIMARY KEY,
    name text,
    owner text NOT NULL,
    visibility text NOT NULL,
    status text NOT NULL,
    container_format text,
    disk_format text,
    min_disk integer NOT NULL DEFAULT 0,
    min_ram integer NOT NULL DEFAULT 0,
    protected boolean NOT NULL DEFAULT false,
    tags jsonb NOT NULL DEFAULT '[]',
    properties jsonb NOT NULL DEFAULT '{{}}',
    size bigint,
    checksum text,
    os_hash_algo text,
    os_hash_value text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    deleted boolean NOT NULL DEFAULT false,
    deleted_at timestamptz,
    version integer NOT NULL,
    position bigint NOT NULL
);
-- The image's aggregate: derived from its id since Image.Created v2 (the id itself before).
ALTER TABLE {s}.images ADD COLUMN IF NOT EXISTS aggregate_id uuid;
UPDATE {s}.images SET aggregate_id = id WHERE aggregate_id IS NULL;
CREATE UNIQUE INDEX IF NOT EXISTS images_aggregate ON {s}.images (aggregate_id);
CREATE INDEX IF NOT EXISTS images_created ON {s}.images (created_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS images_owner ON {s}.images (owner);
CREATE INDEX IF NOT EXISTS images_name ON {s}.images (name);
ALTER TABLE {s}.images ADD COLUMN IF NOT EXISTS os_hidden boolean NOT NULL DEFAULT false;

-- The projects a shared image is shared with (Glance's image members); image_id is the image's id.
CREATE TABLE IF NOT EXISTS {s}.image_members (
    image_id uuid NOT NULL,
    member_id text NOT NULL,
    status text NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (image_id, member_id)
);
CREATE INDEX IF NOT EXISTS image_members_member ON {s}.image_members (member_id, status);

-- Glance's tasks (commands.task), listed newest first.
CREATE TABLE IF NOT EXISTS {s}.image_tasks (
    id uuid PRIMARY KEY,
    type text NOT NULL,
    status text NOT NULL,
    owner text NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS image_tasks_created ON {s}.image_tasks (created_at DESC, id DESC);

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

-- The server columns these features added (a schema made before them gets them here; run
-- `stratus rebuild` afterwards to fill them from the log).
ALTER TABLE {s}.instances ADD COLUMN IF NOT EXISTS description text;
ALTER TABLE {s}.instances ADD COLUMN IF NOT EXISTS key_name text;
ALTER TABLE {s}.instances ADD COLUMN IF NOT EXISTS ports jsonb NOT NULL DEFAULT '[]';
ALTER TABLE {s}.instances ADD COLUMN IF NOT EXISTS tags jsonb NOT NULL DEFAULT '[]';
ALTER TABLE {s}.instances ADD COLUMN IF NOT EXISTS reservation_id text;
ALTER TABLE {s}.instances ADD COLUMN IF NOT EXISTS image jsonb;
ALTER TABLE {s}.instances ADD COLUMN IF NOT EXISTS user_data jsonb;
ALTER TABLE {s}.instances ADD COLUMN IF NOT EXISTS launch_index integer NOT NULL DEFAULT 0;
ALTER TABLE {s}.instances ADD COLUMN IF NOT EXISTS locked_by text;
ALTER TABLE {s}.instances ADD COLUMN IF NOT EXISTS locked_reason text;
"""


def _json(value: Any) -> Jsonb:
    return Jsonb(value, dumps=lambda obj: dumps(obj).decode())


def statements(event: Any, position: int) -> list[Statement]:
    """The writes one event makes to the catalog tables (none for events of other aggregates)."""
    e: Any = event  # the event classes are made by eventsourcing, out of mypy's sight
    version = e.originator_version
    if isinstance(event, ImageCreated):
        return [
            (
                "INSERT INTO {s}.images (id, aggregate_id, name, owner, visibility, status,"
                " container_format, disk_format, min_disk, min_ram, protected, tags, properties,"
                " os_hidden, created_at, updated_at, version, position)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (id) DO NOTHING",
                (
                    e.image_id, e.originator_id, e.name, e.owner, e.visibility, QUEUED,
                    e.container_format, e.disk_format, e.min_disk, e.min_ram,
                    e.protected, _json(list(e.tags)), _json(dict(e.properties)),
                    e.os_hidden, e.timestamp, e.timestamp, version, position,
                ),
            )
        ]  # fmt: skip
    if isinstance(event, ImageUploaded):
        return [
            (
                "UPDATE {s}.images SET status = %s, size = %s, checksum = %s, os_hash_algo = %s,"
                " os_hash_value = %s, updated_at = %s, version = %s, position = %s WHERE aggregate_id = %s",
                (
                    ACTIVE, e.size, e.checksum, e.os_hash_algo, e.os_hash_value,
                    e.timestamp, version, position, e.originator_id,
                ),
            )
        ]  # fmt: skip
    if isinstance(event, ImageDeleted):
        return [
            (
                "UPDATE {s}.images SET status = %s, deleted = true, deleted_at = %s, updated_at = %s,"
                " version = %s, position = %s WHERE aggregate_id = %s",
                (DELETED, e.timestamp, e.timestamp, version, position, e.originator_id),
            )
        ]
    if isinstance(event, ImageUpdated):
        return [_image_updated(e, position)]
    if isinstance(event, (ImageDeactivated, ImageReactivated)):
        status = DEACTIVATED if isinstance(event, ImageDeactivated) else ACTIVE
        return [
            (
                "UPDATE {s}.images SET status = %s, updated_at = %s, version = %s, position = %s"
                " WHERE aggregate_id = %s",
                (status, e.timestamp, version, position, e.originator_id),
            )
        ]
    if isinstance(event, (MemberAdded, MemberStatusChanged, MemberRemoved)):
        return _member_changed(e, position)
    if isinstance(event, TaskCreated):
        return [
            (
                "INSERT INTO {s}.image_tasks (id, type, status, owner, created_at, updated_at)"
                " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                (e.originator_id, e.task_type, PENDING, e.owner, e.timestamp, e.timestamp),
            )
        ]
    if isinstance(event, TaskFailed):
        return [
            (
                "UPDATE {s}.image_tasks SET status = %s, updated_at = %s WHERE id = %s",
                (FAILURE, e.timestamp, e.originator_id),
            )
        ]
    if isinstance(event, KeyPairCreated):
        return [
            (
                "INSERT INTO {s}.keypairs (id, user_id, name, public_key, fingerprint, type, created_at,"
                " version, position) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                (
                    e.originator_id, e.user_id, e.name, e.public_key, e.fingerprint,
                    e.type, e.timestamp, version, position,
                ),
            )
        ]  # fmt: skip
    if isinstance(event, KeyPairRecreated):
        return [
            (
                "UPDATE {s}.keypairs SET public_key = %s, fingerprint = %s, type = %s, created_at = %s,"
                " deleted = false, version = %s, position = %s WHERE id = %s",
                (
                    e.public_key, e.fingerprint, e.type, e.timestamp, version, position,
                    e.originator_id,
                ),
            )
        ]  # fmt: skip
    if isinstance(event, KeyPairDeleted):
        return [
            (
                "UPDATE {s}.keypairs SET deleted = true, version = %s, position = %s WHERE id = %s",
                (version, position, e.originator_id),
            )
        ]
    return []


def _image_updated(e: Any, position: int) -> Statement:
    sets = [f"{column} = %s" for column in _UPDATED_COLUMNS if column in e.fields]
    values: list[Any] = [
        _json(list(e.fields[c])) if c == "tags" else e.fields[c] for c in _UPDATED_COLUMNS if c in e.fields
    ]
    sets.append("properties = (properties || %s) - %s::text[]")
    values.extend((_json(dict(e.properties)), list(e.removed)))
    return (
        f"UPDATE {{s}}.images SET {', '.join(sets)}, updated_at = %s, version = %s, position = %s"
        " WHERE aggregate_id = %s",
        (*values, e.timestamp, e.originator_version, position, e.originator_id),
    )


def _member_changed(e: Any, position: int) -> list[Statement]:
    """An image's member row (the image is found by its aggregate), and the image's position."""
    image = "(SELECT id FROM {s}.images WHERE aggregate_id = %s)"
    touch = (
        "UPDATE {s}.images SET version = %s, position = %s WHERE aggregate_id = %s",
        (e.originator_version, position, e.originator_id),
    )
    added, changed = isinstance(e, MemberAdded), isinstance(e, MemberStatusChanged)
    if added:
        row: Statement = (
            "INSERT INTO {s}.image_members (image_id, member_id, status, created_at, updated_at)"
            " SELECT id, %s, 'pending', %s, %s FROM {s}.images WHERE aggregate_id = %s"
            " ON CONFLICT DO NOTHING",
            (e.member_id, e.timestamp, e.timestamp, e.originator_id),
        )
    elif changed:
        row = (
            f"UPDATE {{s}}.image_members SET status = %s, updated_at = %s WHERE image_id = {image}"
            " AND member_id = %s",
            (e.status, e.timestamp, e.originator_id, e.member_id),
        )
    else:
        row = (
            f"DELETE FROM {{s}}.image_members WHERE image_id = {image} AND member_id = %s",
            (e.originator_id, e.member_id),
        )
    return [row, touch]
