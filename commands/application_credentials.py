"""Application credentials: a user's delegation of (some of) their roles in one project to a program.

The credential's secret never enters the log: ``Created`` records who may use it, where, with which
roles, until when and for which requests (access rules); the secret's hash lives in the API's
credentials table (``api/credentials.py``), as a password's does.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from commands.identity import Name, checked_name


class ApplicationCredential(Aggregate):
    """A user's credential for a program: who it acts as, in which project, with which roles."""

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


def __getattr__(name: str) -> Any:
    """``CreateApplicationCredential`` was here; it is ``commands.keystone.application_credentials``'s
    now (imported on demand: that module imports this one), still importable from here for tests."""
    if name == "CreateApplicationCredential":
        from commands.keystone.application_credentials import CreateApplicationCredential

        return CreateApplicationCredential
    raise AttributeError(name)
