"""``/identity``: Keystone's v3 API as operators use it, one module per resource, as Keystone has.

- ``versions``: discovery (``/identity``, ``/identity/v3``);
- ``auth``: tokens (issue, validate, revoke) and ``/auth/{projects,domains,system,catalog}``;
- ``projects``, ``users``, ``domains``, ``groups``, ``roles`` (and the rules implying roles),
  ``role_assignments``, ``application_credentials`` (and access rules);
- ``catalog``: regions, services and endpoints, the service catalog built from them;
- ``views``: Keystone's bodies of each resource; ``common``: paths and the ``Resource`` base;
- ``middleware``: errors in Keystone's shape (``KeystoneErrors``);
- ``tokens``: the Fernet tokens themselves; ``credentials``: password hashes and login throttling.

Writes are identity commands on the event log; reads come from the identity read model.
A write that clients read back at once (a created project, a disabled user, a revoked token)
answers only once the read model has applied it, so the next request sees its effect.
"""

from __future__ import annotations

from typing import Any

import falcon

from api.identity import (
    application_credentials,
    auth,
    catalog,
    domains,
    groups,
    projects,
    role_assignments,
    roles,
    users,
    versions,
)
from api.identity.common import PREFIX, V3
from api.identity.middleware import KeystoneErrors

__all__ = ["IDENTITY_SCHEMAS", "KeystoneErrors", "add_routes"]

# The request schemas (``schemas/requests/``) the identity API validates bodies against.
IDENTITY_SCHEMAS = (
    *auth.SCHEMAS,
    *projects.SCHEMAS,
    *users.SCHEMAS,
    *domains.SCHEMAS,
    *groups.SCHEMAS,
    *roles.SCHEMAS,
    *catalog.SCHEMAS,
    *application_credentials.SCHEMAS,
)


def add_routes(app: falcon.App, **collaborators: Any) -> None:
    """Mount the identity API under ``/identity`` (``collaborators``: see ``common.Resource``)."""
    c = collaborators
    app.add_route(PREFIX, versions.Versions())
    app.add_route(V3, versions.Version())

    app.add_route(f"{V3}/auth/tokens", auth.Tokens(**c))
    app.add_route(f"{V3}/auth/projects", auth.AuthProjects(**c))
    app.add_route(f"{V3}/auth/domains", auth.AuthDomains(**c))
    app.add_route(f"{V3}/auth/system", auth.AuthSystem(**c))
    app.add_route(f"{V3}/auth/catalog", auth.AuthCatalog(**c))

    app.add_route(f"{V3}/projects", projects.Projects(**c))
    app.add_route(f"{V3}/projects/{{project_id}}", projects.ProjectItem(**c))

    app.add_route(f"{V3}/users", users.Users(**c))
    app.add_route(f"{V3}/users/{{user_id}}", users.UserItem(**c))
    app.add_route(f"{V3}/users/{{user_id}}/projects", users.UserProjects(**c))
    app.add_route(f"{V3}/users/{{user_id}}/password", users.UserPassword(**c))

    app.add_route(f"{V3}/domains", domains.Domains(**c))
    app.add_route(f"{V3}/domains/{{domain_id}}", domains.DomainItem(**c))

    app.add_route(f"{V3}/groups", groups.Groups(**c))
    app.add_route(f"{V3}/groups/{{group_id}}", groups.GroupItem(**c))
    app.add_route(f"{V3}/groups/{{group_id}}/users", groups.GroupUsers(**c))
    app.add_route(f"{V3}/groups/{{group_id}}/users/{{user_id}}", groups.GroupUser(**c))
    app.add_route(f"{V3}/users/{{user_id}}/groups", groups.UserGroups(**c))

    app.add_route(f"{V3}/roles", roles.Roles(**c))
    app.add_route(f"{V3}/roles/{{role_id}}", roles.RoleItem(**c))
    app.add_route(f"{V3}/roles/{{role_id}}/implies", roles.RoleImplies(**c))
    app.add_route(f"{V3}/roles/{{role_id}}/implies/{{implied_role_id}}", roles.RoleImply(**c))
    app.add_route(f"{V3}/role_inferences", roles.RoleInferences(**c))

    for scope in ("project", "domain", "system"):
        for actor in ("user", "group"):
            on = "system" if scope == "system" else f"{scope}s/{{{scope}_id}}"
            base = f"{V3}/{on}/{actor}s/{{{actor}_id}}/roles"
            app.add_route(base, role_assignments.AssignedRoles(scope, actor, **c))
            app.add_route(f"{base}/{{role_id}}", role_assignments.AssignedRole(scope, actor, **c))
    app.add_route(f"{V3}/role_assignments", role_assignments.RoleAssignments(**c))

    app.add_route(f"{V3}/regions", catalog.Regions(**c))
    app.add_route(f"{V3}/regions/{{region_id}}", catalog.RegionItem(**c))
    app.add_route(f"{V3}/services", catalog.Services(**c))
    app.add_route(f"{V3}/services/{{service_id}}", catalog.ServiceItem(**c))
    app.add_route(f"{V3}/endpoints", catalog.Endpoints(**c))
    app.add_route(f"{V3}/endpoints/{{endpoint_id}}", catalog.EndpointItem(**c))

    credentials = f"{V3}/users/{{user_id}}/application_credentials"
    app.add_route(credentials, application_credentials.ApplicationCredentials(**c))
    app.add_route(f"{credentials}/{{credential_id}}", application_credentials.ApplicationCredentialItem(**c))
    app.add_route(f"{V3}/users/{{user_id}}/access_rules", application_credentials.AccessRules(**c))
    app.add_route(
        f"{V3}/users/{{user_id}}/access_rules/{{rule_id}}", application_credentials.AccessRuleItem(**c)
    )
