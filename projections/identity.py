"""The identity read model: projects, users, roles, role assignments and revoked tokens.

Its rows never need reading before they are written (a grant inserts a row, a revocation deletes
one, an update overwrites the fields it carries), so each event becomes SQL statements, computed
here without I/O, that the batch's view runs in order with the batch's other writes. The tables
live beside the others in each read-model schema, so a rebuild rebuilds them too.

Password hashes are not here: they are not derived from the log (see ``api/credentials.py``).
"""

from __future__ import annotations

from commands.identity import Project, Role, Token, User
from projections import identity_directory as directory
from projections.statements import Statement, Statements, jsonb

# Idempotent: a read-model schema made before identity existed gets these tables when next opened
# (its log holds no identity event, so they start empty and correct).
# Each table and its key, for the row-for-row comparison of a rebuild.
TABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("projects", ("id",)),
    ("users", ("id",)),
    ("roles", ("id",)),
    ("role_assignments", ("project_id", "user_id", "role_id")),
    ("revoked_tokens", ("token_id",)),
    ("project_token_cutoffs", ("user_id", "project_id")),
    *directory.TABLES,
)

DDL = (
    """
CREATE TABLE IF NOT EXISTS {s}.projects (
    id text PRIMARY KEY,
    name text NOT NULL,
    domain_id text NOT NULL,
    description text NOT NULL DEFAULT '',
    enabled boolean NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    position bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS projects_domain_name ON {s}.projects (domain_id, name);

CREATE TABLE IF NOT EXISTS {s}.users (
    id text PRIMARY KEY,
    name text NOT NULL,
    domain_id text NOT NULL,
    default_project_id text,
    enabled boolean NOT NULL,
    email text,
    description text,
    password_set_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    position bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS users_domain_name ON {s}.users (domain_id, name);
-- Tokens issued before this moment are no longer valid: set by a password change, a disable and a
-- role removal (Keystone's revocation by user and issued_before); a later enable leaves it.
ALTER TABLE {s}.users ADD COLUMN IF NOT EXISTS tokens_valid_after timestamptz;
-- Keystone's extra attributes of a user (any it does not know), shown back as they were given.
ALTER TABLE {s}.users ADD COLUMN IF NOT EXISTS extra jsonb;
-- The same for the user's tokens on one project only: set by the removal of a role there (as
-- Keystone revokes by user and project), so their tokens on other projects live on.
CREATE TABLE IF NOT EXISTS {s}.project_token_cutoffs (
    user_id text NOT NULL,
    project_id text NOT NULL,
    valid_after timestamptz NOT NULL,
    PRIMARY KEY (user_id, project_id)
);

CREATE TABLE IF NOT EXISTS {s}.roles (
    id text PRIMARY KEY,
    name text NOT NULL,
    description text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    position bigint NOT NULL
);

CREATE TABLE IF NOT EXISTS {s}.role_assignments (
    project_id text NOT NULL,
    user_id text NOT NULL,
    role_id text NOT NULL,
    granted_at timestamptz NOT NULL,
    position bigint NOT NULL,
    PRIMARY KEY (project_id, user_id, role_id)
);
CREATE INDEX IF NOT EXISTS role_assignments_user ON {s}.role_assignments (user_id, project_id);

-- Tokens revoked before they expire; a row can go once expires_at has passed.
CREATE TABLE IF NOT EXISTS {s}.revoked_tokens (
    token_id text PRIMARY KEY,
    user_id text NOT NULL,
    project_id text NOT NULL,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz NOT NULL,
    position bigint NOT NULL
);
"""
    + directory.DDL
)


# The user's tokens issued before the event end (never moved back: a later event cannot revive them).
_END_TOKENS = (
    "UPDATE {s}.users SET tokens_valid_after = GREATEST(COALESCE(tokens_valid_after, %s), %s) WHERE id = %s"
)


# The rows that name a user and go with them.
_USER_ROWS = (
    "role_assignments",
    "domain_assignments",
    "group_members",
    "application_credentials",
    "access_rules",
)


def _project_created(e: Project.Created, position: int) -> list[Statement]:
    t = e.timestamp
    return [
        (
            "INSERT INTO {s}.projects (id, name, domain_id, description, enabled, created_at, "
            "updated_at, position) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
            (e.project_id, e.name, e.domain_id, e.description, e.enabled, t, t, position),
        )
    ]


def _project_deleted(e: Project.Deleted, position: int) -> list[Statement]:
    pid = e.originator_id.hex
    return [
        ("DELETE FROM {s}.role_assignments WHERE project_id = %s", (pid,)),
        ("DELETE FROM {s}.group_assignments WHERE scope_type = 'project' AND scope_id = %s", (pid,)),
        ("DELETE FROM {s}.application_credentials WHERE project_id = %s", (pid,)),
        ("DELETE FROM {s}.project_token_cutoffs WHERE project_id = %s", (pid,)),
        ("DELETE FROM {s}.projects WHERE id = %s", (pid,)),
    ]


def _user_deleted(e: User.Deleted, position: int) -> list[Statement]:
    uid = e.originator_id.hex
    return [
        *((f"DELETE FROM {{s}}.{t} WHERE user_id = %s", (uid,)) for t in _USER_ROWS),
        ("DELETE FROM {s}.system_assignments WHERE actor_type = 'user' AND actor_id = %s", (uid,)),
        ("DELETE FROM {s}.users WHERE id = %s", (uid,)),
    ]


def _project_updated(e: Project.Updated, position: int) -> list[Statement]:
    t = e.timestamp
    return [
        (
            "UPDATE {s}.projects SET description = %s, enabled = %s, updated_at = %s, position = %s "
            "WHERE id = %s",
            (e.description, e.enabled, t, position, e.originator_id.hex),
        )
    ]


def _project_role_granted(e: Project.RoleGranted, position: int) -> list[Statement]:
    t = e.timestamp
    return [
        (
            "INSERT INTO {s}.role_assignments (project_id, user_id, role_id, granted_at, position) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (e.originator_id.hex, e.user_id, e.role_id, t, position),
        )
    ]


def _project_role_revoked(e: Project.RoleRevoked, position: int) -> list[Statement]:
    t = e.timestamp
    return [
        (
            "DELETE FROM {s}.role_assignments WHERE project_id = %s AND user_id = %s AND role_id = %s",
            (e.originator_id.hex, e.user_id, e.role_id),
        ),
        (
            "INSERT INTO {s}.project_token_cutoffs AS c VALUES (%s, %s, %s) "
            "ON CONFLICT (user_id, project_id) "
            "DO UPDATE SET valid_after = GREATEST(c.valid_after, EXCLUDED.valid_after)",
            (e.user_id, e.originator_id.hex, t),
        ),
    ]


def _user_created(e: User.Created, position: int) -> list[Statement]:
    t = e.timestamp
    return [
        (
            "INSERT INTO {s}.users (id, name, domain_id, default_project_id, enabled, email, "
            "description, created_at, updated_at, position) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
            (
                e.user_id,
                e.name,
                e.domain_id,
                e.default_project_id,
                e.enabled,
                e.email,
                e.description,
                t,
                t,
                position,
            ),
        )
    ]


def _user_updated(e: User.Updated, position: int) -> list[Statement]:
    t = e.timestamp
    return [
        (
            "UPDATE {s}.users SET enabled = %s, email = %s, description = %s, default_project_id = %s, "
            "updated_at = %s, position = %s WHERE id = %s",
            (e.enabled, e.email, e.description, e.default_project_id, t, position, e.originator_id.hex),
        ),
        *([] if e.enabled else [(_END_TOKENS, (t, t, e.originator_id.hex))]),
    ]


def _user_access_rule_deleted(e: User.AccessRuleDeleted, position: int) -> list[Statement]:
    return [("DELETE FROM {s}.access_rules WHERE id = %s AND user_id = %s", (e.rule_id, e.originator_id.hex))]


def _user_extra_set(e: User.ExtraSet, position: int) -> list[Statement]:
    t = e.timestamp
    return [
        (
            "UPDATE {s}.users SET extra = %s, updated_at = %s, position = %s WHERE id = %s",
            (jsonb(e.extra), t, position, e.originator_id.hex),
        )
    ]


def _project_renamed(e: Project.Renamed, position: int) -> list[Statement]:
    t = e.timestamp
    return [
        (
            "UPDATE {s}.projects SET name = %s, updated_at = %s, position = %s WHERE id = %s",
            (e.name, t, position, e.originator_id.hex),
        )
    ]


def _user_renamed(e: User.Renamed, position: int) -> list[Statement]:
    t = e.timestamp
    return [
        (
            "UPDATE {s}.users SET name = %s, updated_at = %s, position = %s WHERE id = %s",
            (e.name, t, position, e.originator_id.hex),
        )
    ]


def _user_password_set(e: User.PasswordSet, position: int) -> list[Statement]:
    t = e.timestamp
    return [
        (
            "UPDATE {s}.users SET password_set_at = %s, updated_at = %s, position = %s WHERE id = %s",
            (t, t, position, e.originator_id.hex),
        ),
        (_END_TOKENS, (t, t, e.originator_id.hex)),
    ]


def _role_created(e: Role.Created, position: int) -> list[Statement]:
    t = e.timestamp
    return [
        (
            "INSERT INTO {s}.roles (id, name, description, created_at, position) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
            (e.role_id, e.name, e.description, t, position),
        )
    ]


def _token_revoked(e: Token.Revoked, position: int) -> list[Statement]:
    t = e.timestamp
    return [
        (
            "INSERT INTO {s}.revoked_tokens (token_id, user_id, project_id, expires_at, revoked_at, "
            "position) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (token_id) DO NOTHING",
            (e.token_id, e.user_id, e.project_id, e.expires_at, t, position),
        )
    ]


APPLY: dict[type, Statements] = {
    Project.Created: _project_created,
    Project.Deleted: _project_deleted,
    User.Deleted: _user_deleted,
    Project.Updated: _project_updated,
    Project.RoleGranted: _project_role_granted,
    Project.RoleRevoked: _project_role_revoked,
    User.Created: _user_created,
    User.Updated: _user_updated,
    User.AccessRuleDeleted: _user_access_rule_deleted,
    User.ExtraSet: _user_extra_set,
    Project.Renamed: _project_renamed,
    User.Renamed: _user_renamed,
    User.PasswordSet: _user_password_set,
    Role.Created: _role_created,
    Token.Revoked: _token_revoked,
    **directory.APPLY,
}
