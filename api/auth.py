"""Who is calling, and what they may do: a placeholder until the identity issue replaces this module.

THIS IS NOT AUTHENTICATION. The caller states its identity in plain headers and is believed:
``X-User-Id``, ``X-Project-Id`` and ``X-Roles`` (comma-separated), the names Keystone's auth_token
middleware gives the identity it verified. A request without any of them acts as the configured
demo user in the demo project with roles ``admin,member``; a request that names a user or project
but no roles is a plain ``member``. Everything about identity and policy lives here, so that a real
token check (and a real policy engine) can take this module's place without touching the resources.

Policy follows Nova's defaults: admins may list every project's servers (``all_tenants``), see
which host a server runs on, create flavors and see hypervisors; everyone else sees only their own
project's servers, and another project's server does not exist for them (404, not 403).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import falcon

from api.errors import BadRequest, Forbidden
from stratus.context import Actor

USER_HEADER = "X-User-Id"
PROJECT_HEADER = "X-Project-Id"
ROLES_HEADER = "X-Roles"
ADMIN_ROLE = "admin"
_ID_RE = re.compile(r"^[A-Za-z0-9_.@-]{1,255}$")
_ROLE_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,255}$")


@dataclass(frozen=True)
class DemoIdentity:
    """Who a request without identity headers acts as."""

    user_id: str = "demo"
    project_id: str = "demo"
    roles: tuple[str, ...] = (ADMIN_ROLE, "member")


def actor_from_headers(req: falcon.Request, demo: DemoIdentity) -> Actor:
    user = req.get_header(USER_HEADER)
    project = req.get_header(PROJECT_HEADER)
    roles_value = req.get_header(ROLES_HEADER)
    if user is None and project is None and roles_value is None:
        return Actor(user_id=demo.user_id, project_id=demo.project_id, roles=demo.roles)
    user = _checked(USER_HEADER, user, demo.user_id)
    project = _checked(PROJECT_HEADER, project, demo.project_id)
    if roles_value is None:
        roles: tuple[str, ...] = ("member",)
    else:
        roles = tuple(r.strip() for r in roles_value.split(",") if r.strip())
        bad = [r for r in roles if not _ROLE_RE.match(r)]
        if bad:
            raise BadRequest(f"Invalid role in header {ROLES_HEADER}: {bad[0][:64]!r}")
    return Actor(user_id=user, project_id=project, roles=roles)


def _checked(header: str, value: str | None, default: str) -> str:
    if value is None:
        return default
    value = value.strip()
    if not _ID_RE.match(value):
        raise BadRequest(f"Invalid value for header {header}: 1-255 characters of [A-Za-z0-9_.@-]")
    return value


def is_admin(actor: Actor) -> bool:
    return ADMIN_ROLE in actor.roles


def require_admin(actor: Actor, action: str) -> None:
    if not is_admin(actor):
        raise Forbidden(f"Policy doesn't allow {action} to be performed.")


def project_scope(actor: Actor, all_tenants: bool) -> str | None:
    """The project whose servers a listing shows; None (every project) for an admin's ``all_tenants``."""
    if all_tenants:
        require_admin(actor, "os_compute_api:servers:index:get_all_tenants")
        return None
    return actor.project_id


def server_scope(actor: Actor) -> str | None:
    """The project a server must belong to for ``actor`` to see or act on it (None: any, for admins)."""
    return None if is_admin(actor) else actor.project_id
