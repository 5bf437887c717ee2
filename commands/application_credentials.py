"""Application credentials: a user's delegation of (some of) their roles in one project to a program.

The credential's secret never enters the log: ``Created`` records who may use it, where, with which
roles, until when and for which requests (access rules); the secret's hash lives in the API's
credentials table (``api/credentials.py``), as a password's does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from commands.identity import Name, checked_name
from commands.identity_base import IdentityBase
from commands.unit_of_work import Result


class ApplicationCredential(Aggregate):
    @staticmethod
    def create_id(application_credential_id: str, **_: object) -> UUID:
        return UUID(hex=application_credential_id)

    class Created(Aggregate.Created):
        """A user made an application credential: a program may act as them in project_id with role_ids
        until expires_at. The secret is not in the event: only its hash is kept, outside the log."""

        application_credential_id: str
        user_id: str
        project_id: str
        name: str
        description: str | None
        expires_at: str | None
        unrestricted: bool
        role_ids: list[str]
        access_rules: list[dict[str, Any]]

    @event(Created)
    def __init__(
        self,
        application_credential_id: str,
        user_id: str,
        project_id: str,
        name: str,
        description: str | None,
        expires_at: str | None,
        unrestricted: bool,
        role_ids: list[str],
        access_rules: list[dict[str, Any]],
    ) -> None:
        self.application_credential_id = application_credential_id
        self.user_id = user_id
        self.project_id = project_id
        self.name = name
        self.description = description
        self.expires_at = expires_at
        self.unrestricted = unrestricted
        self.role_ids = role_ids
        self.access_rules = access_rules
        self.deleted = False

    @classmethod
    def create(cls, **fields: Any) -> tuple[ApplicationCredential, Name]:
        """A credential and its name, unique among its user's credentials (as Keystone has it)."""
        checked_name("name", fields["name"])
        credential = cls(**fields)
        owner = fields["application_credential_id"]
        name = Name(
            kind="application_credential", domain_id=fields["user_id"], name=fields["name"], owner_id=owner
        )
        return credential, name

    def delete(self) -> None:
        self._deleted()

    class Deleted(Aggregate.Event):
        """The application credential was deleted: its tokens end."""

    @event(Deleted)
    def _deleted(self) -> None:
        self.deleted = True


@dataclass(frozen=True)
class CreateApplicationCredential:
    """Create a user's application credential (Keystone)."""

    user_id: str
    project_id: str
    name: str
    role_ids: tuple[str, ...]
    description: str | None = None
    expires_at: str | None = None
    unrestricted: bool = False
    access_rules: tuple[dict[str, Any], ...] = ()


class ApplicationCredentialHandlers(IdentityBase):
    """Keystone's application credential commands."""

    def application_credential(self, credential_id: str) -> ApplicationCredential:
        return self._identity(ApplicationCredential, credential_id, "application credential")

    def create_application_credential(self, cmd: CreateApplicationCredential, credential_id: str) -> Result:
        self.user(cmd.user_id)
        self.project(cmd.project_id)
        for rid in cmd.role_ids:
            self.role(rid)
        credential, _ = ApplicationCredential.create(
            application_credential_id=credential_id,
            user_id=cmd.user_id,
            project_id=cmd.project_id,
            name=cmd.name,
            description=cmd.description,
            expires_at=cmd.expires_at,
            unrestricted=cmd.unrestricted,
            role_ids=list(cmd.role_ids),
            access_rules=[dict(rule) for rule in cmd.access_rules],
        )
        return self._create_named(credential, "application_credential", cmd.user_id, cmd.name)

    def delete_application_credential(self, credential_id: str) -> Result:
        def decide() -> Result:
            credential = self.application_credential(credential_id)
            credential.delete()
            name = self._release_name("application_credential", credential.user_id, credential.name)
            return Result(credential_id, self.save(credential, *name))

        return self.retrying(decide)

    def delete_access_rule(self, user_id: str, rule_id: str) -> Result:
        def decide() -> Result:
            user = self.user(user_id)
            user.delete_access_rule(rule_id)
            return Result(rule_id, self.save(user))

        return self.retrying(decide)
