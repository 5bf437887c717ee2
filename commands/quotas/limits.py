"""Setting quota limits: a project's own (Nova's os-quota-sets) and a quota class's (the ``default``
class's limits are every project's defaults)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from commands.errors import InvalidInput
from commands.quota import DEFAULT_LIMITS, ProjectQuota, QuotaClass, quota_aggregate_id, quota_class_id
from commands.unit_of_work import Result, UnitOfWork, retried


@dataclass(frozen=True)
class SetQuota:
    """Set a project's limits; ``used``: what it uses now (a limit below it needs ``force``)."""

    project_id: str
    limits: Mapping[str, int]
    used: Mapping[str, int] = field(default_factory=dict)
    force: bool = False


@dataclass(frozen=True)
class ResetQuota:
    """Drop a project's own limits: the defaults apply again."""

    project_id: str


@dataclass(frozen=True)
class SetQuotaClass:
    """Set a quota class's limits."""

    name: str
    limits: Mapping[str, int]


def quota(uow: UnitOfWork, project_id: str) -> ProjectQuota:
    """The project's own limits as the log has them."""
    return uow.find(ProjectQuota, quota_aggregate_id(project_id)) or ProjectQuota(project_id)


def quota_class(uow: UnitOfWork, name: str) -> dict[str, int]:
    """A quota class's limits (Nova's built-in defaults for a class never set)."""
    found = uow.find(QuotaClass, quota_class_id(name))
    return found.limits if found is not None else dict(DEFAULT_LIMITS)


def set_quota(cmd: SetQuota, uow: UnitOfWork) -> Result:
    """At least one resource must be named."""
    if not cmd.limits:
        raise InvalidInput("No quota to update: name at least one resource.")
    return _set_quota(cmd, uow)


@retried
def _set_quota(cmd: SetQuota, uow: UnitOfWork) -> Result:
    found = quota(uow, cmd.project_id)
    found.set_limits(cmd.limits, cmd.used, cmd.force)
    return Result(cmd.project_id, uow.save(found))


@retried
def reset_quota(cmd: ResetQuota, uow: UnitOfWork) -> Result:
    """The project's overrides are gone."""
    found = quota(uow, cmd.project_id)
    found.reset()
    return Result(cmd.project_id, uow.save(found))


@retried
def set_quota_class(cmd: SetQuotaClass, uow: UnitOfWork) -> Result:
    """Nova's quota class update."""
    found = uow.find(QuotaClass, quota_class_id(cmd.name)) or QuotaClass(cmd.name)
    found.set_limits(cmd.limits)
    return Result(cmd.name, uow.save(found))
