"""Where the commands on domains, groups, roles and assignments were (``commands.keystone``); kept
for the tests that import them from here."""

from commands.keystone.assignments import Assignment
from commands.keystone.domains import CreateDomain, DeleteDomain, UpdateDomain
from commands.keystone.groups import CreateGroup, UpdateGroup
from commands.keystone.roles import CreateRole, UpdateRole

__all__ = [
    "Assignment",
    "CreateDomain",
    "CreateGroup",
    "CreateRole",
    "DeleteDomain",
    "UpdateDomain",
    "UpdateGroup",
    "UpdateRole",
]
