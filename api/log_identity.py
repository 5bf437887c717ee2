"""Who a token speaks for, read from the log: for when the identity read model (PostgreSQL) is away.

The API reads a caller's roles from the identity read model on every request; with PostgreSQL down
that would refuse every write, although writes go to the log. ``IdentityFromLog`` reads them from the
log's identity aggregates instead, as surely as the read model would or not at all: only for a token
scoped to a project where the user holds a role of their own (not only through a group or a domain),
with the same cut-offs (the user's password set or the user disabled since the token was issued, a
role of theirs taken away in its project, the token or its chain revoked). For any other token it
raises ``CannotTell``, and the request answers 503 as a read does (``api/auth.py``).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any, Protocol
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError

from api.identity.tokens import TokenClaims
from commands.app import Stratus
from commands.errors import NotFound
from commands.identity import ROLE_NAMES, Project, Role, Token, User, aggregate_id, role_id
from projections.identity_queries import Subject

_BUILTIN_ROLES = {role_id(name): name for name in ROLE_NAMES}
# How long a request waits for a lost connection to the log to come back before it answers 503: a
# client reconnects to another server of the cluster within this, a server that is down takes longer.
RECONNECT_GRACE_SECONDS = 1.0


class Connection(Protocol):
    """What ``log_reachable`` asks of the log's connection (``NatsBridge``)."""

    @property
    def is_connected(self) -> bool: ...


def log_reachable(bridge: Connection | None, grace: float = RECONNECT_GRACE_SECONDS) -> Callable[[], bool]:
    """Whether the log's connection is up now (or within ``grace`` seconds); always, for a log
    without a connection (None: the in-memory recorder of the unit tier)."""

    def reachable() -> bool:
        if bridge is None or bridge.is_connected:
            return True
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            time.sleep(0.05)
            if bridge.is_connected:
                return True
        return False

    return reachable


class CannotTell(Exception):
    """The log alone cannot say who a token speaks for as surely as the read model would."""


class IdentityFromLog:
    """A token's subject read from the log's identity aggregates, for when the read model is away.

    Mirrors ``projections.identity_queries.subject`` for the case it can decide: never more roles than
    the read model would give (a group's or a domain's roles are left out), never a token the read model
    would refuse. Raises ``CannotTell`` for everything else.
    """

    def __init__(self, app: Stratus, reachable: Callable[[], bool]) -> None:
        self._app = app
        self._reachable = reachable

    def subject(self, claims: TokenClaims) -> Subject | None:
        """The token's subject now (None: no such user), or ``CannotTell``."""
        if not claims.project_id or claims.application_credential_id:
            raise CannotTell("a system-scoped or application credential's token")
        if not self._reachable():
            raise CannotTell("the log is unreachable too")
        try:
            user_id, project_id = aggregate_id(claims.user_id), aggregate_id(claims.project_id)
        except NotFound:
            return None
        user = self._get(user_id)
        if not isinstance(user, User) or user.deleted:
            return None
        project = self._get(project_id)
        if not isinstance(project, Project) or getattr(project, "deleted", False):
            raise CannotTell("the token's project is not a live project on the log (a domain?)")
        roles = frozenset(self._role_name(r) for r in project.grants.get(claims.user_id, ()))
        roles -= {""}
        if not roles:
            raise CannotTell("the user holds no role of their own in the project (a group's?)")
        revoked = (
            self._ended_since(user_id, claims.issued_at, claims.user_id)
            or self._ended_since(project_id, claims.issued_at, claims.user_id)
            or any(self._revoked(t) for t in {claims.token_id, claims.chain})
        )
        user_row = {
            "id": claims.user_id,
            "name": user.name,
            "domain_id": user.domain_id,
            "enabled": user.enabled,
        }
        project_row = {
            "id": claims.project_id,
            "name": project.name,
            "domain_id": project.domain_id,
            "enabled": project.enabled,
        }
        return Subject(user_row, project_row, roles, revoked)

    def _get(self, agg_id: UUID) -> Any:
        try:
            return self._app.repository.get(agg_id)
        except AggregateNotFoundError:
            return None

    def _revoked(self, token_id: str) -> bool:
        try:
            agg_id = Token.create_id(token_id)
        except ValueError:
            raise CannotTell("a token id that names no aggregate") from None
        return isinstance(self._get(agg_id), Token)

    def _role_name(self, rid: str) -> str:
        if rid in _BUILTIN_ROLES:
            return _BUILTIN_ROLES[rid]
        try:
            role = self._get(UUID(hex=rid))
        except ValueError:
            return ""
        return role.name if isinstance(role, Role) and not getattr(role, "deleted", False) else ""

    def _ended_since(self, agg_id: UUID, issued_at: dt.datetime, user_id: str) -> bool:
        """Whether an event after ``issued_at`` ended the user's tokens, as the projection records it:
        the user's password set or the user disabled (``users.tokens_valid_after``), or one of the
        user's roles revoked in the project (``project_token_cutoffs``)."""
        for e in self._app.repository.event_store.get(agg_id):
            ends = (
                isinstance(e, User.PasswordSet)
                or (isinstance(e, User.Updated) and not e.enabled)
                or (isinstance(e, Project.RoleRevoked) and e.user_id == user_id)
            )
            if ends and isinstance(e, User.Event | Project.Event) and e.timestamp > issued_at:
                return True
        return False
