"""A token's revocation (Keystone's DELETE /v3/auth/tokens), recorded so every API worker refuses it."""

from __future__ import annotations

from dataclasses import dataclass

from eventsourcing.persistence import IntegrityError

from commands.identity import Token
from commands.unit_of_work import Result, UnitOfWork


@dataclass(frozen=True)
class RevokeToken:
    """Revoke a token (Keystone's DELETE /v3/auth/tokens)."""

    token_id: str
    user_id: str
    project_id: str
    expires_at: str


def revoke_token(cmd: RevokeToken, uow: UnitOfWork) -> Result:
    """Record a token's revocation; revoking it again is a no-op."""
    token = Token(
        token_id=cmd.token_id, user_id=cmd.user_id, project_id=cmd.project_id, expires_at=cmd.expires_at
    )
    try:
        return Result(cmd.token_id, uow.save(token))
    except IntegrityError:
        return Result(cmd.token_id, uow.app.recorder.max_notification_id() or 0)
