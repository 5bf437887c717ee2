"""Who may do what: Nova's and Keystone's default policies, as one table of named rules.

Roles come from Keystone's defaults, each implying the next: ``admin`` → ``manager`` → ``member``
→ ``reader`` (a token's roles include the implied ones). The rules are Nova's 2023+ defaults
(``nova/policies/base.py``) without system scope: an ``admin`` of any project administers the
cloud, as Nova's legacy ``context_is_admin`` does.

- ``ADMIN``: ``role:admin``.
- ``PROJECT_READER_OR_ADMIN``: admin, or ``reader`` in the target's project.
- ``PROJECT_MEMBER_OR_ADMIN``: admin, or ``member`` in the target's project.
- ``PROJECT_MANAGER_OR_ADMIN``: admin, or ``manager`` in the target's project.
- ``ANYONE``: any authenticated caller.
- ``SYSTEM_READER_OR_ADMIN``: admin, or ``reader`` in a token scoped to the system (Keystone's
  ``system_scope:all``); identity's reads.

A resource declares a route's rule with a hook, checked before the responder runs, against the
caller's own project (the resource then scopes what it reads to that project, so another project's
resource is a 404, never a 403):

    @falcon.before(policy.require("os_compute_api:servers:create"))
    def on_post(self, req, resp): ...

or checks in code, with the resource's project once it knows it:
``policy.authorize(req.context.actor, "os_compute_api:servers:show", project_id=row["project_id"])``.
A rule name that is not in ``RULES`` is a bug caught when the module is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import falcon

from api.errors import Forbidden
from stratus.context import Actor

Check = Callable[[Actor, "str | None"], bool]


def _admin(actor: Actor, project_id: str | None) -> bool:
    return "admin" in actor.roles


def _project(role: str) -> Check:
    def check(actor: Actor, project_id: str | None) -> bool:
        own = project_id is None or project_id == actor.project_id
        return _admin(actor, project_id) or (role in actor.roles and own)

    return check


def _anyone(actor: Actor, project_id: str | None) -> bool:
    return True


def _system_reader(actor: Actor, project_id: str | None) -> bool:
    """Keystone's ``role:reader and system_scope:all`` (or any admin)."""
    return _admin(actor, project_id) or (actor.system and "reader" in actor.roles)


def _project_or_system_reader(actor: Actor, project_id: str | None) -> bool:
    return _system_reader(actor, project_id) or _project("reader")(actor, project_id)


ADMIN: Check = _admin
PROJECT_READER_OR_ADMIN: Check = _project("reader")
PROJECT_MEMBER_OR_ADMIN: Check = _project("member")
PROJECT_MANAGER_OR_ADMIN: Check = _project("manager")
ANYONE: Check = _anyone
SYSTEM_READER_OR_ADMIN: Check = _system_reader
PROJECT_OR_SYSTEM_READER: Check = _project_or_system_reader


@dataclass(frozen=True)
class Rule:
    """One policy rule: who may (a check on the actor's roles and project) and what it is for."""

    check: Check
    description: str


RULES: dict[str, Rule] = {
    # -- compute: servers -----------------------------------------------------------------------
    "os_compute_api:servers:index": Rule(PROJECT_READER_OR_ADMIN, "List servers"),
    "os_compute_api:servers:detail": Rule(PROJECT_READER_OR_ADMIN, "List servers with details"),
    "os_compute_api:servers:show": Rule(PROJECT_READER_OR_ADMIN, "Show a server"),
    "os_compute_api:servers:create": Rule(PROJECT_MEMBER_OR_ADMIN, "Create a server"),
    "os_compute_api:servers:update": Rule(PROJECT_MEMBER_OR_ADMIN, "Update a server"),
    "os_compute_api:servers:delete": Rule(PROJECT_MEMBER_OR_ADMIN, "Delete a server"),
    "os_compute_api:servers:index:get_all_tenants": Rule(ADMIN, "List every project's servers"),
    "os_compute_api:servers:detail:get_all_tenants": Rule(ADMIN, "List every project's servers"),
    "os_compute_api:servers:allow_all_filters": Rule(ADMIN, "Filter servers by any field"),
    "os_compute_api:servers:show:host_status": Rule(ADMIN, "See the host's status in a server"),
    "os_compute_api:os-extended-server-attributes": Rule(ADMIN, "See a server's host"),
    "os_compute_api:servers:create:forced_host": Rule(ADMIN, "Create a server on a named host"),
    "os_compute_api:os-admin-actions:reset_state": Rule(ADMIN, "Reset a server's state"),
    "os_compute_api:os-instance-actions:events:details": Rule(ADMIN, "See a failure's details"),
    # Nova has one rule per action (servers:start, servers:stop, servers:reboot, os-pause-server:pause,
    # os-lock-server:lock, os-console-output...), all PROJECT_MEMBER_OR_ADMIN: one rule stands for them.
    "os_compute_api:servers:action": Rule(PROJECT_MEMBER_OR_ADMIN, "Any POST /servers/{id}/action"),
    "os_compute_api:os-remote-consoles": Rule(PROJECT_MEMBER_OR_ADMIN, "Open a server's remote console"),
    "os_compute_api:os-server-password:show": Rule(
        PROJECT_READER_OR_ADMIN, "Show the encrypted administrative password a server's guest posted"
    ),
    "os_compute_api:os-server-password:clear": Rule(
        PROJECT_MEMBER_OR_ADMIN, "Clear the encrypted administrative password a server's guest posted"
    ),
    "os_compute_api:os-instance-actions:list": Rule(PROJECT_READER_OR_ADMIN, "List a server's actions"),
    "os_compute_api:os-instance-actions:show": Rule(PROJECT_READER_OR_ADMIN, "Show a server's action"),
    # -- compute: the cloud's own resources -----------------------------------------------------
    "os_compute_api:os-flavor-manage:create": Rule(ADMIN, "Create a flavor"),
    "os_compute_api:os-flavor-manage:update": Rule(ADMIN, "Update a flavor"),
    "os_compute_api:os-flavor-manage:delete": Rule(ADMIN, "Delete a flavor"),
    "os_compute_api:flavors": Rule(ANYONE, "List and show flavors"),
    "os_compute_api:os-hypervisors:list": Rule(ADMIN, "List hypervisors"),
    "os_compute_api:os-hypervisors:list-detail": Rule(ADMIN, "List hypervisors with details"),
    "os_compute_api:os-hypervisors:show": Rule(ADMIN, "Show a hypervisor"),
    "os_compute_api:os-services:list": Rule(ADMIN, "List compute services"),
    "os_compute_api:os-services:update": Rule(ADMIN, "Enable or disable a compute service"),
    "os_compute_api:os-aggregates:index": Rule(ADMIN, "List host aggregates"),
    "os_compute_api:os-aggregates:create": Rule(ADMIN, "Create a host aggregate"),
    "os_compute_api:os-aggregates:show": Rule(ADMIN, "Show a host aggregate"),
    "os_compute_api:os-aggregates:update": Rule(ADMIN, "Update a host aggregate"),
    "os_compute_api:os-aggregates:delete": Rule(ADMIN, "Delete a host aggregate"),
    "os_compute_api:os-aggregates:add_host": Rule(ADMIN, "Add a host to an aggregate"),
    "os_compute_api:os-aggregates:remove_host": Rule(ADMIN, "Remove a host from an aggregate"),
    "os_compute_api:os-quota-sets:show": Rule(PROJECT_READER_OR_ADMIN, "Show a project's quotas"),
    "os_compute_api:os-quota-sets:update": Rule(ADMIN, "Change a project's quotas"),
    "os_compute_api:os-keypairs:index": Rule(ANYONE, "List your key pairs"),
    "os_compute_api:os-keypairs:create": Rule(ANYONE, "Create a key pair"),
    "os_compute_api:os-keypairs:show": Rule(ANYONE, "Show a key pair"),
    "os_compute_api:os-keypairs:delete": Rule(ANYONE, "Delete a key pair"),
    "os_compute_api:limits": Rule(ANYONE, "Show your limits"),
    # -- identity (Keystone's defaults, with admin in any project standing for system admin) ----
    "identity:list_projects": Rule(SYSTEM_READER_OR_ADMIN, "List projects"),
    "identity:get_project": Rule(PROJECT_OR_SYSTEM_READER, "Show a project (your own, or any as admin)"),
    "identity:create_project": Rule(ADMIN, "Create a project"),
    "identity:update_project": Rule(ADMIN, "Update (enable, disable) a project"),
    "identity:delete_project": Rule(ADMIN, "Delete a project (its grants go; its servers stay)"),
    "identity:list_users": Rule(SYSTEM_READER_OR_ADMIN, "List users"),
    "identity:get_user": Rule(SYSTEM_READER_OR_ADMIN, "Show a user (yourself: always allowed)"),
    "identity:create_user": Rule(ADMIN, "Create a user"),
    "identity:update_user": Rule(ADMIN, "Update (enable, disable, set the password of) a user"),
    "identity:delete_user": Rule(ADMIN, "Delete a user (their grants, tokens and password go)"),
    "identity:list_user_projects": Rule(
        SYSTEM_READER_OR_ADMIN, "List a user's projects (your own: always allowed)"
    ),
    "identity:list_roles": Rule(SYSTEM_READER_OR_ADMIN, "List roles"),
    "identity:get_role": Rule(SYSTEM_READER_OR_ADMIN, "Show a role"),
    "identity:create_grant": Rule(ADMIN, "Give a user or group a role in a project or domain"),
    "identity:revoke_grant": Rule(ADMIN, "Take a user's or group's role in a project or domain away"),
    "identity:check_grant": Rule(
        SYSTEM_READER_OR_ADMIN, "Check a user's or group's role in a project or domain"
    ),
    "identity:list_grants": Rule(
        SYSTEM_READER_OR_ADMIN, "List a user's or group's roles in a project or domain"
    ),
    "identity:list_role_assignments": Rule(SYSTEM_READER_OR_ADMIN, "List role assignments"),
    "identity:create_role": Rule(ADMIN, "Create a role"),
    "identity:update_role": Rule(ADMIN, "Rename or describe a role (not a built-in one)"),
    "identity:delete_role": Rule(ADMIN, "Delete a role and its assignments (not a built-in one)"),
    "identity:create_implied_role": Rule(ADMIN, "Make a role imply another"),
    "identity:delete_implied_role": Rule(ADMIN, "Stop a role implying another"),
    "identity:get_implied_role": Rule(SYSTEM_READER_OR_ADMIN, "Show or check a role inference rule"),
    "identity:list_implied_roles": Rule(SYSTEM_READER_OR_ADMIN, "List the roles a role implies"),
    "identity:list_role_inference_rules": Rule(SYSTEM_READER_OR_ADMIN, "List every role inference rule"),
    "identity:list_domains": Rule(SYSTEM_READER_OR_ADMIN, "List domains"),
    "identity:get_domain": Rule(ANYONE, "Show a domain"),
    "identity:create_domain": Rule(ADMIN, "Create a domain"),
    "identity:update_domain": Rule(ADMIN, "Rename, describe, enable or disable a domain"),
    "identity:delete_domain": Rule(ADMIN, "Delete a disabled domain with its projects, users and groups"),
    "identity:list_groups": Rule(SYSTEM_READER_OR_ADMIN, "List groups"),
    "identity:get_group": Rule(SYSTEM_READER_OR_ADMIN, "Show a group"),
    "identity:create_group": Rule(ADMIN, "Create a group"),
    "identity:update_group": Rule(ADMIN, "Rename or describe a group"),
    "identity:delete_group": Rule(ADMIN, "Delete a group (its members' roles through it go)"),
    "identity:list_users_in_group": Rule(SYSTEM_READER_OR_ADMIN, "List a group's members"),
    "identity:add_user_to_group": Rule(ADMIN, "Add a user to a group"),
    "identity:remove_user_from_group": Rule(ADMIN, "Remove a user from a group"),
    "identity:check_user_in_group": Rule(SYSTEM_READER_OR_ADMIN, "Check that a user is in a group"),
    "identity:list_groups_for_user": Rule(
        SYSTEM_READER_OR_ADMIN, "List a user's groups (your own: always allowed)"
    ),
    "identity:list_regions": Rule(ANYONE, "List regions"),
    "identity:get_region": Rule(ANYONE, "Show a region"),
    "identity:create_region": Rule(ADMIN, "Create a region"),
    "identity:update_region": Rule(ADMIN, "Update a region"),
    "identity:delete_region": Rule(ADMIN, "Delete a region"),
    "identity:list_services": Rule(SYSTEM_READER_OR_ADMIN, "List the catalog's services"),
    "identity:get_service": Rule(SYSTEM_READER_OR_ADMIN, "Show a service"),
    "identity:create_service": Rule(ADMIN, "Add a service to the catalog"),
    "identity:update_service": Rule(ADMIN, "Update a service"),
    "identity:delete_service": Rule(ADMIN, "Delete a service and its endpoints"),
    "identity:list_endpoints": Rule(SYSTEM_READER_OR_ADMIN, "List endpoints"),
    "identity:get_endpoint": Rule(SYSTEM_READER_OR_ADMIN, "Show an endpoint"),
    "identity:create_endpoint": Rule(ADMIN, "Add an endpoint to the catalog"),
    "identity:update_endpoint": Rule(ADMIN, "Update an endpoint"),
    "identity:delete_endpoint": Rule(ADMIN, "Delete an endpoint"),
    "identity:list_application_credentials": Rule(
        SYSTEM_READER_OR_ADMIN, "List a user's application credentials (yours: always)"
    ),
    "identity:get_application_credential": Rule(
        SYSTEM_READER_OR_ADMIN, "Show an application credential (yours: always)"
    ),
    "identity:delete_application_credential": Rule(ADMIN, "Delete an application credential (yours: always)"),
    "identity:list_access_rules": Rule(SYSTEM_READER_OR_ADMIN, "List a user's access rules (yours: always)"),
    "identity:delete_access_rule": Rule(ADMIN, "Delete an unused access rule (yours: always)"),
    "identity:get_access_rule": Rule(SYSTEM_READER_OR_ADMIN, "Show an access rule (yours: always)"),
    "identity:validate_token": Rule(
        SYSTEM_READER_OR_ADMIN, "Validate another user's token (your own: always allowed)"
    ),
    "identity:revoke_token": Rule(ADMIN, "Revoke another user's token (your own: always allowed)"),
}


def allowed(actor: Actor, rule: str, *, project_id: str | None = None) -> bool:
    return RULES[rule].check(actor, project_id)


def authorize(actor: Actor, rule: str, *, project_id: str | None = None) -> None:
    """Raise 403 unless ``actor`` may do ``rule`` (on a resource of ``project_id``, if given)."""
    if not allowed(actor, rule, project_id=project_id):
        raise Forbidden(f"Policy doesn't allow {rule} to be performed.")


def require(rule: str) -> Callable[..., None]:
    """A falcon ``before`` hook checking ``rule`` against the caller's own project."""
    if rule not in RULES:
        raise KeyError(f"no policy rule named {rule!r}")

    def hook(req: falcon.Request, resp: falcon.Response, resource: Any, params: dict[str, Any]) -> None:
        authorize(req.context.actor, rule)

    return hook
