"""The first run of Keystone: the default domain, the catalog, the default roles, an admin project
and an admin user holding ``admin`` there.

Idempotent: every id is derived from a name, so a second run (or two API workers at once) finds
everything in place and appends nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from eventsourcing.persistence import IntegrityError

from commands.errors import AlreadyExists
from commands.identity import (
    DEFAULT_DOMAIN_ID,
    DEFAULT_DOMAIN_NAME,
    ROLE_NAMES,
    Domain,
    Name,
    Role,
    bootstrap_id,
    role_id,
)
from commands.keystone import loaders
from commands.keystone.assignments import GrantRole, grant_role
from commands.keystone.catalog import SeedCatalog, seed_catalog
from commands.keystone.projects import CreateProject, create_project
from commands.keystone.users import CreateUser, create_user
from commands.unit_of_work import UnitOfWork


@dataclass(frozen=True)
class BootstrapIdentity:
    """Seed Keystone (``stratus bootstrap``), with the admin project and user of these names."""

    admin_project: str = "admin"
    admin_user: str = "admin"


@dataclass(frozen=True)
class Bootstrapped:
    """The admin project, user and role a bootstrap made."""

    project_id: str
    user_id: str
    position: int


def bootstrap_identity(
    cmd: BootstrapIdentity, uow: UnitOfWork, new_identity_id: Callable[[], str]
) -> Bootstrapped:
    with contextlib.suppress(IntegrityError):  # seeded before
        uow.save(
            Domain(
                domain_id=DEFAULT_DOMAIN_ID,
                name=DEFAULT_DOMAIN_NAME,
                description="The default domain",
                enabled=True,
            ),
            Name(kind="domain", domain_id="", name=DEFAULT_DOMAIN_NAME, owner_id=DEFAULT_DOMAIN_ID),
        )
    seed_catalog(SeedCatalog(), uow)
    for name in ROLE_NAMES:
        rid = role_id(name)
        with contextlib.suppress(IntegrityError):  # seeded before
            uow.save(
                Role(role_id=rid, name=name, description=f"Keystone's default role {name}"),
                Name(kind="role", domain_id="", name=name, owner_id=rid),
            )
    pid = bootstrap_id("project", cmd.admin_project)
    uid = bootstrap_id("user", cmd.admin_user)
    try:
        create_project(
            CreateProject(cmd.admin_project, description="Bootstrap project", project_id=pid),
            uow,
            new_identity_id,
        )
    except AlreadyExists:
        loaders.project(uow, pid)  # the name is ours from an earlier run, not someone else's
    try:
        create_user(CreateUser(cmd.admin_user, default_project_id=pid, user_id=uid), uow, new_identity_id)
    except AlreadyExists:
        loaders.user(uow, uid)
    result = grant_role(GrantRole(pid, uid, role_id("admin")), uow)
    return Bootstrapped(pid, uid, result.position)
