"""The read models' tables, created in one PostgreSQL schema per generation.

Readers always name ``stratus_rm.<table>``. A rebuild fills the same tables in another schema and
renames the schemas in one transaction; the ``tracking`` row lives inside the schema, so it moves
with the data it describes.

Every writer of ``stratus_rm`` (the live runner per batch, a rebuild at its swap, the first
creation of the schema) holds the transaction-level advisory lock ``WRITER_LOCK`` first.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from projections import identity, images, keypairs, metadefs, operations

LIVE_SCHEMA = "stratus_rm"
# The NOTIFY channel on which each committed batch announces the position it reached.
POSITION_CHANNEL = "stratus_rm_position"
# pg_advisory_xact_lock key shared by every writer of the live schema (ascii "stratusrm" folded to 63 bits).
WRITER_LOCK = 0x7374726174757372
# A session-level advisory lock held for the whole of a rebuild: one rebuild at a time.
REBUILD_LOCK = WRITER_LOCK + 1
# A transaction-level advisory lock held by whoever makes, drops or takes the spare generation
# (``projections.rebuild.prepare_spare``), so that no two sessions change it at once.
SPARE_LOCK = WRITER_LOCK + 2

# Columns written by the projection, per table (generated columns are left out).
INSTANCE_COLUMNS: tuple[str, ...] = (
    "id", "name", "project_id", "user_id", "flavor", "image_ref", "metadata", "availability_zone",
    "description", "key_name", "ports", "tags", "reservation_id",
    "image", "user_data", "launch_index", "locked_by", "locked_reason",
    "access_ip_v4", "access_ip_v6", "hostname", "disk_config", "config_drive",
    "vm_state", "task_state", "power_state", "status", "host", "fault",
    "created_at", "updated_at", "launched_at", "deleted_at", "deleted", "version", "position",
)  # fmt: skip
HOST_COLUMNS: tuple[str, ...] = (
    "id", "hostname", "hypervisor_type", "vcpus", "memory_mb", "disk_gb",
    "cpu_allocation_ratio", "ram_allocation_ratio", "disk_allocation_ratio",
    "vcpus_used", "memory_mb_used", "disk_gb_used", "running_vms",
    "created_at", "updated_at", "version", "position",
)  # fmt: skip
CLAIM_COLUMNS: tuple[str, ...] = (
    "host_id", "instance_id", "vcpus", "memory_mb", "disk_gb", "claimed_at", "position",
)  # fmt: skip
FLAVOR_COLUMNS: tuple[str, ...] = (
    "flavorid", "id", "name", "vcpus", "ram", "disk", "ephemeral", "swap", "rxtx_factor",
    "is_public", "description", "deleted", "created_at", "deleted_at", "version", "position",
)  # fmt: skip

# Each table and its key, in the order a row-for-row comparison walks them.
TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("instances", ("id",)),
    ("hosts", ("id",)),
    ("host_claims", ("host_id", "instance_id")),
    ("flavors", ("flavorid",)),
    *identity.TABLES,
    *images.TABLES,
    *keypairs.TABLES,
    *metadefs.TABLES,
    *operations.TABLES,
    ("tracking", ("singleton",)),
)

_DDL = """
CREATE TABLE {s}.instances (
    id uuid PRIMARY KEY,
    name text NOT NULL,
    project_id text NOT NULL,
    user_id text NOT NULL,
    flavor jsonb NOT NULL,
    image_ref text NOT NULL DEFAULT '',
    metadata jsonb NOT NULL DEFAULT '{{}}',
    availability_zone text,
    description text,
    key_name text,
    -- fixed addresses: [{{network_id, network_name, address, mac}}]
    ports jsonb NOT NULL DEFAULT '[]',
    tags jsonb NOT NULL DEFAULT '[]',
    reservation_id text,
    -- what the server keeps of its image (kernel, ramdisk), its user data's digest, its index in
    -- its multi-create, and who locked it (Nova's locked_by: owner or admin) and why
    image jsonb,
    user_data jsonb,
    launch_index integer NOT NULL DEFAULT 0,
    locked_by text,
    locked_reason text,
    -- Nova's accessIPv4/v6, the hostname asked for (2.90; null: derived from the name), OS-DCF:diskConfig
    access_ip_v4 text,
    access_ip_v6 text,
    hostname text,
    disk_config text NOT NULL DEFAULT 'MANUAL',
    config_drive boolean NOT NULL DEFAULT false,  -- the guest has a config drive (Nova's "True"/"")
    vm_state text NOT NULL,
    task_state text,
    power_state integer NOT NULL DEFAULT 0,
    status text NOT NULL,
    host text,
    fault jsonb,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    launched_at timestamptz,
    deleted_at timestamptz,
    deleted boolean NOT NULL DEFAULT false,
    version integer NOT NULL,
    position bigint NOT NULL
);

CREATE TABLE {s}.hosts (
    id uuid PRIMARY KEY,
    hostname text NOT NULL UNIQUE,
    hypervisor_type text NOT NULL,
    vcpus integer NOT NULL,
    memory_mb bigint NOT NULL,
    disk_gb bigint NOT NULL,
    cpu_allocation_ratio double precision NOT NULL,
    ram_allocation_ratio double precision NOT NULL,
    disk_allocation_ratio double precision NOT NULL,
    vcpus_used integer NOT NULL DEFAULT 0,
    memory_mb_used bigint NOT NULL DEFAULT 0,
    disk_gb_used bigint NOT NULL DEFAULT 0,
    running_vms integer NOT NULL DEFAULT 0,
    -- Placement's rule, as commands.host.Host.capacity: int((total - reserved) * allocation_ratio).
    vcpus_capacity integer GENERATED ALWAYS AS (floor(vcpus * cpu_allocation_ratio)::integer) STORED,
    memory_mb_capacity bigint GENERATED ALWAYS AS (floor(memory_mb * ram_allocation_ratio)::bigint) STORED,
    disk_gb_capacity bigint GENERATED ALWAYS AS (floor(disk_gb * disk_allocation_ratio)::bigint) STORED,
    vcpus_free integer
        GENERATED ALWAYS AS (floor(vcpus * cpu_allocation_ratio)::integer - vcpus_used) STORED,
    memory_mb_free bigint
        GENERATED ALWAYS AS (floor(memory_mb * ram_allocation_ratio)::bigint - memory_mb_used) STORED,
    disk_gb_free bigint
        GENERATED ALWAYS AS (floor(disk_gb * disk_allocation_ratio)::bigint - disk_gb_used) STORED,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    version integer NOT NULL,
    position bigint NOT NULL
);

-- What each instance holds on its host (a release names only the instance).
CREATE TABLE {s}.host_claims (
    host_id uuid NOT NULL,
    instance_id text NOT NULL,
    vcpus integer NOT NULL,
    memory_mb bigint NOT NULL,
    disk_gb bigint NOT NULL,
    claimed_at timestamptz NOT NULL,
    position bigint NOT NULL,
    PRIMARY KEY (host_id, instance_id)
);

CREATE TABLE {s}.flavors (
    flavorid text PRIMARY KEY,
    id uuid NOT NULL UNIQUE,
    name text NOT NULL,
    vcpus integer NOT NULL,
    ram integer NOT NULL,
    disk integer NOT NULL,
    ephemeral integer NOT NULL DEFAULT 0,
    swap integer NOT NULL DEFAULT 0,
    rxtx_factor double precision NOT NULL DEFAULT 1.0,
    is_public boolean NOT NULL DEFAULT true,
    description text,
    deleted boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL,
    deleted_at timestamptz,
    version integer NOT NULL,
    position bigint NOT NULL
);

-- One row: the last log position applied to this schema's tables.
CREATE TABLE {s}.tracking (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    position bigint NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO {s}.tracking (singleton, position) VALUES (true, 0);
"""


# The secondary indexes of ``instances``: only its readers use them, never a write of the projection
# (a batch reads and writes its rows by their key), so a rebuild builds them once its replay is done
# (``create_schema(indexes=False)``, then ``create_indexes``) instead of keeping them up to date
# through every row's inserts and updates.
_INSTANCE_INDEXES = """
-- Nova's paging: newest first within a project (or across projects for an admin).
CREATE INDEX ON {s}.instances (project_id, created_at DESC, id DESC);
CREATE INDEX ON {s}.instances (created_at DESC, id DESC);
CREATE INDEX ON {s}.instances (status);
CREATE INDEX ON {s}.instances (host);
CREATE INDEX ON {s}.instances (name);
CREATE INDEX ON {s}.instances (updated_at);
"""

# The page indexes of listings that leave deleted servers out (every list but an admin's
# ``deleted=True``): a page then never reads past deleted rows. Deleted servers stay in ``instances``
# (Nova keeps its soft-deleted rows), so with the full indexes alone a first page read every deleted
# row newer than its 100th live one: 1.8 ms against 0.12 ms with these at 10^6 events
# (docs/performance.md, "Growth"). Named, so that ``CREATE INDEX IF NOT EXISTS`` finds them again.
_LIVE_PAGE_INDEXES = """
CREATE INDEX IF NOT EXISTS instances_live_project_page
    ON {s}.instances (project_id, created_at DESC, id DESC) WHERE NOT deleted;
CREATE INDEX IF NOT EXISTS instances_live_page ON {s}.instances (created_at DESC, id DESC) WHERE NOT deleted;
"""

# Columns added to tables of _DDL after it was first deployed (a live schema made before gets them).
_COLUMNS_ADDED = """
ALTER TABLE {s}.instances ADD COLUMN IF NOT EXISTS access_ip_v4 text;
ALTER TABLE {s}.instances ADD COLUMN IF NOT EXISTS access_ip_v6 text;
ALTER TABLE {s}.instances ADD COLUMN IF NOT EXISTS hostname text;
ALTER TABLE {s}.instances ADD COLUMN IF NOT EXISTS disk_config text NOT NULL DEFAULT 'MANUAL';
ALTER TABLE {s}.instances ADD COLUMN IF NOT EXISTS config_drive boolean NOT NULL DEFAULT false;
"""


def create_schema(conn: psycopg.Connection[Any], schema: str, *, indexes: bool = True) -> None:
    """Create ``schema`` with empty read-model tables at position 0 (in the caller's transaction).

    ``indexes=False``: without the secondary indexes of ``instances``, for a rebuild's replay, which
    makes them with ``create_indexes`` when it is done (keys and unique constraints are always made).
    A rebuild makes the same tables in two parts at once (``table_ddl``, ``projections.rebuild``)."""
    made = sql.SQL("CREATE SCHEMA {};").format(sql.Identifier(schema))
    conn.execute(sql.Composed([made, *table_ddl(schema, indexes=indexes)]))


def table_ddl(schema: str, *, indexes: bool = True) -> tuple[sql.Composed, sql.Composed]:
    """What ``create_schema`` runs in ``schema`` once it is made, in two parts of about the same
    size (the identity tables; the others) that name nothing of each other, so that a rebuild can
    run them in two transactions at once (``projections.rebuild``)."""
    s = sql.Identifier(schema)
    others = [sql.SQL(_DDL).format(s=s)]  # type: ignore[arg-type]
    if indexes:
        others.append(_index_ddl(s))
    for ddl in (images.DDL, keypairs.DDL, operations.DDL, metadefs.DDL):
        others.append(sql.SQL(ddl).format(s=s))  # type: ignore[arg-type]
    return sql.Composed(others), sql.SQL(identity.DDL).format(s=s)  # type: ignore[arg-type]


def create_indexes(conn: psycopg.Connection[Any], schema: str) -> None:
    """Make the secondary indexes of ``schema``'s ``instances`` left out by ``create_schema(indexes=False)``
    (the same names and definitions as ``create_schema`` makes), each in one pass over the table."""
    conn.execute(_index_ddl(sql.Identifier(schema)))


def index_ddl(schema: str) -> tuple[sql.Composed, sql.Composed]:
    """``create_indexes``'s statements in two halves, so that a rebuild can build them at once on
    two connections (``projections.rebuild``): each index is its own pass over the table."""
    s = sql.Identifier(schema)
    statements = [
        sql.SQL(statement).format(s=s)  # type: ignore[arg-type]
        for text in (_INSTANCE_INDEXES, _LIVE_PAGE_INDEXES)
        for statement in _statements(text)
    ]
    return sql.SQL(";").join(statements[0::2]), sql.SQL(";").join(statements[1::2])


def _statements(text: str) -> list[str]:
    """The statements of ``text``, without its comments (none holds a ``;``)."""
    lines = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    return [statement.strip() for statement in lines.split(";") if statement.strip()]


def _index_ddl(s: sql.Identifier) -> sql.Composed:
    return sql.Composed([sql.SQL(_INSTANCE_INDEXES).format(s=s), sql.SQL(_LIVE_PAGE_INDEXES).format(s=s)])  # type: ignore[arg-type]


def schema_exists(conn: psycopg.Connection[Any], schema: str) -> bool:
    row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    return row is not None


def ensure_live_schema(conn: psycopg.Connection[Any]) -> None:
    """Create ``stratus_rm`` if it does not exist yet; safe to call from several processes at once."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITER_LOCK,))
        if not schema_exists(conn, LIVE_SCHEMA):
            create_schema(conn, LIVE_SCHEMA)
        else:  # a schema made before the identity tables existed gets them, and newer columns
            conn.execute(sql.SQL(_COLUMNS_ADDED).format(s=sql.Identifier(LIVE_SCHEMA)))  # type: ignore[arg-type]
            migrate_live_page_indexes(conn, LIVE_SCHEMA)
            conn.execute(sql.SQL(identity.DDL).format(s=sql.Identifier(LIVE_SCHEMA)))  # type: ignore[arg-type]
            conn.execute(sql.SQL(images.DDL).format(s=sql.Identifier(LIVE_SCHEMA)))  # type: ignore[arg-type]
            conn.execute(sql.SQL(keypairs.DDL).format(s=sql.Identifier(LIVE_SCHEMA)))  # type: ignore[arg-type]
            conn.execute(sql.SQL(operations.DDL).format(s=sql.Identifier(LIVE_SCHEMA)))  # type: ignore[arg-type]
            conn.execute(sql.SQL(metadefs.DDL).format(s=sql.Identifier(LIVE_SCHEMA)))  # type: ignore[arg-type]


def migrate_live_page_indexes(conn: psycopg.Connection[Any], schema: str) -> bool:
    """Give a read model made before them the live page indexes (``_LIVE_PAGE_INDEXES``), then
    ANALYZE ``instances`` so that the planner knows them; True if they were missing.

    In the caller's transaction: building them holds off the projector's writes to ``instances``
    (reads go on) for as long as it takes, about a second per million rows."""
    with conn.cursor(row_factory=tuple_row) as cur:  # whatever rows the caller's connection makes
        found = cur.execute(
            "SELECT count(*) FROM pg_indexes WHERE schemaname = %s AND indexname = ANY(%s)",
            (schema, ["instances_live_project_page", "instances_live_page"]),
        ).fetchone()
    if found is not None and found[0] == 2:
        return False
    conn.execute(sql.SQL(_LIVE_PAGE_INDEXES).format(s=sql.Identifier(schema)))  # type: ignore[arg-type]
    analyze(conn, schema)
    return True


# The tables ``analyze`` gives statistics to.
ANALYZED_TABLES = ("instances", "hosts", "host_claims", "flavors")


def analyze(conn: psycopg.Connection[Any], schema: str) -> None:
    """Statistics for the tables whose plans depend on them (the server lists' filters and pages).

    A read model just filled (a rebuild) or changed much has none until autovacuum passes, and the
    planner, taking ``instances`` for a few rows, chose a scan of a whole project and a sort: 33 ms
    instead of a fraction of a millisecond at 10^5 events (docs/performance.md, "Growth")."""
    tables = sql.SQL(", ").join(sql.Identifier(schema, table) for table in ANALYZED_TABLES)
    conn.execute(sql.SQL("ANALYZE {}").format(tables))
