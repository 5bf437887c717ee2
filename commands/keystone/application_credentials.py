"""Application credentials' use cases: a user's credential for a program (its aggregate is
``commands.application_credentials.ApplicationCredential``), its deletion, and an access rule's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from commands.application_credentials import ApplicationCredential
from commands.keystone import loaders
from commands.unit_of_work import Result, UnitOfWork, retried


@dataclass(frozen=True)
class CreateApplicationCredential:
    """Create a user's application credential (``application_credential_id``: chosen by the API,
    which keeps the secret's hash under it)."""

    user_id: str
    project_id: str
    name: str
    role_ids: tuple[str, ...]
    description: str | None = None
    expires_at: str | None = None
    unrestricted: bool = False
    access_rules: tuple[dict[str, Any], ...] = ()
    application_credential_id: str = ""


@dataclass(frozen=True)
class DeleteApplicationCredential:
    """Delete an application credential: its tokens end."""

    application_credential_id: str


@dataclass(frozen=True)
class DeleteAccessRule:
    """Delete one of a user's access rules."""

    user_id: str
    rule_id: str


def create_application_credential(cmd: CreateApplicationCredential, uow: UnitOfWork) -> Result:
    loaders.user(uow, cmd.user_id)
    loaders.project(uow, cmd.project_id)
    for rid in cmd.role_ids:
        loaders.role(uow, rid)
    credential, _ = ApplicationCredential.create(
        application_credential_id=cmd.application_credential_id,
        user_id=cmd.user_id,
        project_id=cmd.project_id,
        name=cmd.name,
        description=cmd.description,
        expires_at=cmd.expires_at,
        unrestricted=cmd.unrestricted,
        role_ids=list(cmd.role_ids),
        access_rules=[dict(rule) for rule in cmd.access_rules],
    )
    return loaders.create_named(uow, credential, "application_credential", cmd.user_id, cmd.name)


@retried
def delete_application_credential(cmd: DeleteApplicationCredential, uow: UnitOfWork) -> Result:
    cid = cmd.application_credential_id
    credential = loaders.identity(uow, ApplicationCredential, cid, "application credential")
    credential.delete()
    name = loaders.release_name(uow, "application_credential", credential.user_id, credential.name)
    return Result(cid, uow.save(credential, *name))


@retried
def delete_access_rule(cmd: DeleteAccessRule, uow: UnitOfWork) -> Result:
    user = loaders.user(uow, cmd.user_id)
    user.delete_access_rule(cmd.rule_id)
    return Result(cmd.rule_id, uow.save(user))
