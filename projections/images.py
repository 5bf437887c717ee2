"""The image read models: what ``/image/v2/images`` (with its members) and ``/image/v2/tasks`` list
and show, and Nova's ``/images`` proxy.

Like the identity tables, their rows never need reading before they are written (a creation inserts
the row, every later event overwrites the fields it carries), so each event becomes SQL statements
(``projections.statements``), computed here without I/O, that the batch's view runs in order with the
batch's other writes. The tables live beside the others in each read-model schema, so a rebuild
rebuilds them too.
"""

from __future__ import annotations

from commands.image import ACTIVE, DEACTIVATED, DELETED, QUEUED, Image
from commands.task import FAILURE, PENDING, Task
from projections.statements import Statement, Statements, jsonb

# The image columns an ``Image.Updated`` may set (its ``fields``), and how each is stored.
_UPDATED_COLUMNS = (
    "name", "visibility", "protected", "os_hidden", "min_disk", "min_ram", "tags", "owner",
    "container_format", "disk_format",
)  # fmt: skip

TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("images", ("id",)),
    ("image_members", ("image_id", "member_id")),
    ("image_tasks", ("id",)),
)

# Idempotent: a read-model schema made before these tables existed gets them when next opened (its
# log holds no image event, so they start empty and correct).
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

-- The server columns the image and key-pair features added (a schema made before them gets them here; run
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


def _created(e: Image.Created, position: int) -> list[Statement]:
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
                e.protected, jsonb(list(e.tags)), jsonb(dict(e.properties)),
                e.os_hidden, e.timestamp, e.timestamp, e.originator_version, position,
            ),
        )
    ]  # fmt: skip


def _uploaded(e: Image.Uploaded, position: int) -> list[Statement]:
    return [
        (
            "UPDATE {s}.images SET status = %s, size = %s, checksum = %s, os_hash_algo = %s,"
            " os_hash_value = %s, updated_at = %s, version = %s, position = %s WHERE aggregate_id = %s",
            (
                ACTIVE, e.size, e.checksum, e.os_hash_algo, e.os_hash_value,
                e.timestamp, e.originator_version, position, e.originator_id,
            ),
        )
    ]  # fmt: skip


def _deleted(e: Image.Deleted, position: int) -> list[Statement]:
    return [
        (
            "UPDATE {s}.images SET status = %s, deleted = true, deleted_at = %s, updated_at = %s,"
            " version = %s, position = %s WHERE aggregate_id = %s",
            (DELETED, e.timestamp, e.timestamp, e.originator_version, position, e.originator_id),
        )
    ]


def _updated(e: Image.Updated, position: int) -> list[Statement]:
    sets = [f"{column} = %s" for column in _UPDATED_COLUMNS if column in e.fields]
    values: list[object] = [
        jsonb(list(e.fields[c])) if c == "tags" else e.fields[c] for c in _UPDATED_COLUMNS if c in e.fields
    ]
    sets.append("properties = (properties || %s) - %s::text[]")
    values.extend((jsonb(dict(e.properties)), list(e.removed)))
    return [
        (
            f"UPDATE {{s}}.images SET {', '.join(sets)}, updated_at = %s, version = %s, position = %s"
            " WHERE aggregate_id = %s",
            (*values, e.timestamp, e.originator_version, position, e.originator_id),
        )
    ]


def _status(status: str) -> Statements:
    """(De)activation: the image's status becomes ``status``."""

    def statements(e: Image.Event, position: int) -> list[Statement]:
        return [
            (
                "UPDATE {s}.images SET status = %s, updated_at = %s, version = %s, position = %s"
                " WHERE aggregate_id = %s",
                (status, e.timestamp, e.originator_version, position, e.originator_id),
            )
        ]

    return statements


# An image's member rows name the image by its id; the events name it by its aggregate.
_IMAGE = "(SELECT id FROM {s}.images WHERE aggregate_id = %s)"


def _touch(e: Image.Event, position: int) -> Statement:
    """The image's version and position, moved on by a change of its members."""
    return (
        "UPDATE {s}.images SET version = %s, position = %s WHERE aggregate_id = %s",
        (e.originator_version, position, e.originator_id),
    )


def _member_added(e: Image.MemberAdded, position: int) -> list[Statement]:
    return [
        (
            "INSERT INTO {s}.image_members (image_id, member_id, status, created_at, updated_at)"
            " SELECT id, %s, 'pending', %s, %s FROM {s}.images WHERE aggregate_id = %s"
            " ON CONFLICT DO NOTHING",
            (e.member_id, e.timestamp, e.timestamp, e.originator_id),
        ),
        _touch(e, position),
    ]


def _member_status_changed(e: Image.MemberStatusChanged, position: int) -> list[Statement]:
    return [
        (
            f"UPDATE {{s}}.image_members SET status = %s, updated_at = %s WHERE image_id = {_IMAGE}"
            " AND member_id = %s",
            (e.status, e.timestamp, e.originator_id, e.member_id),
        ),
        _touch(e, position),
    ]


def _member_removed(e: Image.MemberRemoved, position: int) -> list[Statement]:
    return [
        (
            f"DELETE FROM {{s}}.image_members WHERE image_id = {_IMAGE} AND member_id = %s",
            (e.originator_id, e.member_id),
        ),
        _touch(e, position),
    ]


def _task_created(e: Task.Created, position: int) -> list[Statement]:
    return [
        (
            "INSERT INTO {s}.image_tasks (id, type, status, owner, created_at, updated_at)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
            (e.originator_id, e.task_type, PENDING, e.owner, e.timestamp, e.timestamp),
        )
    ]


def _task_failed(e: Task.Failed, position: int) -> list[Statement]:
    return [
        (
            "UPDATE {s}.image_tasks SET status = %s, updated_at = %s WHERE id = %s",
            (FAILURE, e.timestamp, e.originator_id),
        )
    ]


APPLY: dict[type, Statements] = {
    Image.Created: _created,
    Image.Uploaded: _uploaded,
    Image.Deleted: _deleted,
    Image.Updated: _updated,
    Image.Deactivated: _status(DEACTIVATED),
    Image.Reactivated: _status(ACTIVE),
    Image.MemberAdded: _member_added,
    Image.MemberStatusChanged: _member_status_changed,
    Image.MemberRemoved: _member_removed,
    Task.Created: _task_created,
    Task.Failed: _task_failed,
}
