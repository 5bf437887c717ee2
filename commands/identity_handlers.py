"""``IdentityHandlers``: Keystone's use cases as the methods callers used before the bus, each one
line over it. It exists for the tests that still call it; new code sends the commands of
``commands.keystone`` to the bus: ``bus.handle(CreateProject("web"))``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from commands.bus import Facade
from commands.keystone.application_credentials import (
    CreateApplicationCredential,
    DeleteAccessRule,
    DeleteApplicationCredential,
)
from commands.keystone.assignments import (
    Assignment,
    AssignRole,
    GrantRole,
    RevokeRole,
    UnassignRole,
)
from commands.keystone.bootstrap import BootstrapIdentity, Bootstrapped
from commands.keystone.catalog import (
    CreateEndpoint,
    CreateRegion,
    CreateService,
    DeleteEndpoint,
    DeleteRegion,
    DeleteService,
    SeedCatalog,
    UpdateEndpoint,
    UpdateRegion,
    UpdateService,
)
from commands.keystone.domains import CreateDomain, DeleteDomain, UpdateDomain
from commands.keystone.groups import AddGroupUser, CreateGroup, DeleteGroup, RemoveGroupUser, UpdateGroup
from commands.keystone.projects import CreateProject, DeleteProject, UpdateProject
from commands.keystone.roles import CreateRole, DeleteRole, ImplyRole, StopImplyingRole, UpdateRole
from commands.keystone.tokens import RevokeToken
from commands.keystone.users import CreateUser, DeleteUser, RecordPasswordSet, UpdateUser
from commands.unit_of_work import Result

__all__ = [
    "Bootstrapped",
    "CreateProject",
    "CreateUser",
    "GrantRole",
    "IdentityHandlers",
    "RevokeRole",
    "RevokeToken",
    "UpdateProject",
    "UpdateUser",
]


class IdentityHandlers(Facade):
    """Keystone's commands as methods over a bus of their own (for tests; see the module)."""

    def bootstrap(self, admin_project: str = "admin", admin_user: str = "admin") -> Bootstrapped:
        return self.handle(BootstrapIdentity(admin_project, admin_user))  # type: ignore[no-any-return]

    def create_project(self, cmd: CreateProject) -> Result:
        return self.handle(cmd)  # type: ignore[no-any-return]

    def update_project(self, cmd: UpdateProject) -> Result:
        return self.handle(cmd)  # type: ignore[no-any-return]

    def delete_project(self, project_id: str) -> Result:
        return self.handle(DeleteProject(project_id))  # type: ignore[no-any-return]

    def create_user(self, cmd: CreateUser) -> Result:
        return self.handle(cmd)  # type: ignore[no-any-return]

    def update_user(self, cmd: UpdateUser) -> Result:
        return self.handle(cmd)  # type: ignore[no-any-return]

    def delete_user(self, user_id: str) -> Result:
        return self.handle(DeleteUser(user_id))  # type: ignore[no-any-return]

    def record_password_set(self, user_id: str) -> Result:
        return self.handle(RecordPasswordSet(user_id))  # type: ignore[no-any-return]

    def grant_role(self, cmd: GrantRole) -> Result:
        return self.handle(cmd)  # type: ignore[no-any-return]

    def revoke_role(self, cmd: RevokeRole) -> Result:
        return self.handle(cmd)  # type: ignore[no-any-return]

    def revoke_token(self, cmd: RevokeToken) -> Result:
        return self.handle(cmd)  # type: ignore[no-any-return]

    def create_domain(self, cmd: CreateDomain) -> Result:
        return self.handle(cmd)  # type: ignore[no-any-return]

    def update_domain(self, cmd: UpdateDomain) -> Result:
        return self.handle(cmd)  # type: ignore[no-any-return]

    def delete_domain(self, cmd: DeleteDomain) -> Result:
        return self.handle(cmd)  # type: ignore[no-any-return]

    def create_group(self, cmd: CreateGroup) -> Result:
        return self.handle(cmd)  # type: ignore[no-any-return]

    def update_group(self, cmd: UpdateGroup) -> Result:
        return self.handle(cmd)  # type: ignore[no-any-return]

    def delete_group(self, group_id: str) -> Result:
        return self.handle(DeleteGroup(group_id))  # type: ignore[no-any-return]

    def add_group_user(self, group_id: str, user_id: str) -> Result:
        return self.handle(AddGroupUser(group_id, user_id))  # type: ignore[no-any-return]

    def remove_group_user(self, group_id: str, user_id: str) -> Result:
        return self.handle(RemoveGroupUser(group_id, user_id))  # type: ignore[no-any-return]

    def create_role(self, cmd: CreateRole) -> Result:
        return self.handle(cmd)  # type: ignore[no-any-return]

    def update_role(self, cmd: UpdateRole) -> Result:
        return self.handle(cmd)  # type: ignore[no-any-return]

    def delete_role(self, rid: str) -> Result:
        return self.handle(DeleteRole(rid))  # type: ignore[no-any-return]

    def imply_role(self, prior_role_id: str, implied_role_id: str) -> Result:
        return self.handle(ImplyRole(prior_role_id, implied_role_id))  # type: ignore[no-any-return]

    def stop_implying_role(self, prior_role_id: str, implied_role_id: str) -> Result:
        return self.handle(StopImplyingRole(prior_role_id, implied_role_id))  # type: ignore[no-any-return]

    def assign(self, a: Assignment) -> Result:
        return self.handle(AssignRole(a))  # type: ignore[no-any-return]

    def unassign(self, a: Assignment) -> Result:
        return self.handle(UnassignRole(a))  # type: ignore[no-any-return]

    def create_region(self, cmd: CreateRegion) -> Result:
        return self.handle(cmd)  # type: ignore[no-any-return]

    def update_region(self, region_id: str, description: str | None, parent_region_id: str | None) -> Result:
        return self.handle(UpdateRegion(region_id, description, parent_region_id))  # type: ignore[no-any-return]

    def delete_region(self, region_id: str) -> Result:
        return self.handle(DeleteRegion(region_id))  # type: ignore[no-any-return]

    def create_service(self, cmd: CreateService) -> Result:
        return self.handle(cmd)  # type: ignore[no-any-return]

    def update_service(self, service_id: str, changes: dict[str, Any]) -> Result:
        return self.handle(UpdateService(service_id, changes))  # type: ignore[no-any-return]

    def delete_service(self, service_id: str, endpoints: tuple[str, ...] = ()) -> Result:
        return self.handle(DeleteService(service_id, endpoints))  # type: ignore[no-any-return]

    def create_endpoint(self, cmd: CreateEndpoint) -> Result:
        return self.handle(cmd)  # type: ignore[no-any-return]

    def update_endpoint(self, endpoint_id: str, changes: dict[str, Any]) -> Result:
        return self.handle(UpdateEndpoint(endpoint_id, changes))  # type: ignore[no-any-return]

    def delete_endpoint(self, endpoint_id: str) -> Result:
        return self.handle(DeleteEndpoint(endpoint_id))  # type: ignore[no-any-return]

    def seed_catalog(self) -> int:
        return self.handle(SeedCatalog())  # type: ignore[no-any-return]

    def create_application_credential(self, cmd: CreateApplicationCredential, credential_id: str) -> Result:
        return self.handle(replace(cmd, application_credential_id=credential_id))  # type: ignore[no-any-return]

    def delete_application_credential(self, credential_id: str) -> Result:
        return self.handle(DeleteApplicationCredential(credential_id))  # type: ignore[no-any-return]

    def delete_access_rule(self, user_id: str, rule_id: str) -> Result:
        return self.handle(DeleteAccessRule(user_id, rule_id))  # type: ignore[no-any-return]
